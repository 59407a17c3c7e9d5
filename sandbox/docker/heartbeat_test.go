package docker

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/sandbox"
)

// rootExec runs a shell script in the sandbox's container as its root, with
// the container's capabilities: what the engine's owner can do, and no command.
func rootExec(t *testing.T, c *Container, script string) string {
	t.Helper()
	out, err := exec.Command("docker", "exec", "-u", "0", containerID(t, c), "sh", "-c", script).CombinedOutput()
	if err != nil {
		t.Fatalf("docker exec %q: %v\n%s", script, err, out)
	}
	return strings.TrimSpace(string(out))
}

const agentPidScript = `for d in /proc/[0-9]*; do case "$(tr '\0' ' ' < $d/cmdline 2>/dev/null)" in "/.corral/corral agent"*) echo ${d#/proc/};; esac; done`

// An agent that stops answering (here SIGSTOPped from outside, which no
// command can do) is noticed within seconds, the call says the sandbox broke,
// and the next call gets a new one.
func TestHeartbeatStoppedAgent(t *testing.T) {
	need(t)
	c := newSandbox(t, testConfig(t))
	sh(t, c, "true")
	pid := rootExec(t, c, agentPidScript)
	if pid == "" {
		t.Fatal("no agent found")
	}
	rootExec(t, c, "kill -STOP "+pid)
	begin := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := c.Exec(ctx, sandbox.ExecRequest{Command: "sleep 100", Timeout: 2 * time.Second})
	var d *sandbox.DiedError
	if !errors.As(err, &d) || !strings.Contains(d.Reason, "stopped answering") {
		t.Fatalf("after %v: %v", time.Since(begin), err)
	}
	t.Logf("noticed after %v: %v", time.Since(begin).Round(time.Millisecond), err)
	res, out := run(t, c, sandbox.ExecRequest{Command: "echo back"})
	if !res.Restarted || !strings.Contains(res.RestartReason, "stopped answering") || clean(out) != "back" {
		t.Errorf("next call: %+v %q", res, out)
	}
}

// A malformed frame on the host's stream (written here from outside, which no
// command can do) is a broken sandbox, never a command's exit status.
func TestMalformedFrameBreaksTheSandbox(t *testing.T) {
	need(t)
	c := newSandbox(t, testConfig(t))
	sh(t, c, "true")
	pid := rootExec(t, c, agentPidScript)
	done := make(chan error, 1)
	go func() {
		_, err := c.Exec(context.Background(), sandbox.ExecRequest{Command: "sleep 30", Timeout: time.Minute})
		done <- err
	}()
	time.Sleep(500 * time.Millisecond)
	rootExec(t, c, `printf '\377\0\0\0\1\0\0\0\0' > /proc/`+pid+`/fd/1`)
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the call did not end")
	}
	var d *sandbox.DiedError
	if !errors.As(err, &d) || !strings.Contains(d.Reason, "protocol") || strings.Contains(d.Reason, "status 0") {
		t.Fatalf("got %v", err)
	}
	res, out := run(t, c, sandbox.ExecRequest{Command: "echo back"})
	if !res.Restarted || clean(out) != "back" {
		t.Errorf("next call: %+v %q", res, out)
	}
}
