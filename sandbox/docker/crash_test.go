package docker

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/sandbox"
)

// An agent that dies says why: the error names the container's exit status
// and state, and the first lines the agent printed (where a Go program says
// what killed it) as well as the last ones, however long its dump of stacks.
func TestAgentCrashSaysWhy(t *testing.T) {
	need(t)
	agent := filepath.Join(t.TempDir(), "crashagent")
	build := exec.Command("go", "build", "-o", agent, "./sandbox/docker/testdata/crashagent")
	build.Dir = "../.."
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cfg := testConfig(t)
	cfg.Agent = agent
	c := newSandbox(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := c.Exec(ctx, sandbox.ExecRequest{Command: "true"})
	var died *sandbox.DiedError
	if !errors.As(err, &died) {
		t.Fatalf("exec with a crashing agent: %v, want a DiedError", err)
	}
	for _, want := range []string{"exited with status 2", "(container exited after ", "fatal error: out of memory allocating heap arena map", "lines]", "runtime.throw(...)"} {
		if !strings.Contains(died.Reason, want) {
			t.Errorf("%q is not in the reason: %s", want, died.Reason)
		}
	}
}
