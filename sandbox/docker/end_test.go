package docker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/sandbox"
)

// Bounds in these tests only catch hangs: they sit far above what the
// behaviour needs, and no test asserts a duration.

func TestTimeout(t *testing.T) {
	c := newSandbox(t, testConfig(t))
	t.Run("term", func(t *testing.T) {
		res, out := run(t, c, sandbox.ExecRequest{Command: "echo begun; sleep 100", Timeout: 500 * time.Millisecond})
		if !res.TimedOut || res.Canceled || res.InputWait {
			t.Errorf("flags %+v", res)
		}
		if res.ExitCode != 128+15 {
			t.Errorf("exit %d %s, want 143 (SIGTERM)", res.ExitCode, res.Signal)
		}
		if clean(out) != "begun" {
			t.Errorf("output %q", out)
		}
	})
	t.Run("kill", func(t *testing.T) {
		// A command that ignores SIGTERM is killed 2 s later, with what it
		// started in the background.
		res, out := run(t, c, sandbox.ExecRequest{Command: "trap 'echo got TERM' TERM; sleep 300 & while :; do sleep 0.05; done", Timeout: 500 * time.Millisecond})
		if !res.TimedOut || res.ExitCode != 137 || res.Signal != "SIGKILL" {
			t.Errorf("exit %d %q, flags %+v", res.ExitCode, res.Signal, res)
		}
		if !strings.Contains(out, "got TERM") {
			t.Errorf("output %q", out)
		}
		if got := sh(t, c, "pgrep -x sleep || echo none"); got != "none" {
			t.Errorf("background processes survived the timeout: %q", got)
		}
	})
}

func TestCancel(t *testing.T) {
	c := newSandbox(t, testConfig(t))
	for _, cmd := range []string{"sleep 100", "trap '' TERM; sleep 100"} {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(300*time.Millisecond, cancel)
		res, _ := runCtx(t, ctx, c, sandbox.ExecRequest{Command: cmd})
		if !res.Canceled || res.TimedOut {
			t.Errorf("%q: flags %+v", cmd, res)
		}
		if res.ExitCode == 0 {
			t.Errorf("%q: exit 0 after cancel", cmd)
		}
	}
	// The sandbox is fine afterwards.
	sh(t, c, "true")
}

// The shell exits while `server &` keeps the terminal open: the call returns,
// the children keep running and are listed.
func TestBackgroundProcesses(t *testing.T) {
	c := newSandbox(t, testConfig(t))
	res, out := run(t, c, sandbox.ExecRequest{Command: "sleep 300 & echo started; (while :; do echo tick; sleep 0.01; done) &"})
	if res.ExitCode != 0 || !strings.HasPrefix(clean(out), "started") {
		t.Fatalf("exit %d, output %q", res.ExitCode, out)
	}
	var sleepPID int
	for _, p := range res.Background {
		if p.Command == "sleep 300" {
			sleepPID = p.PID
		}
	}
	if sleepPID == 0 || len(res.Background) < 2 {
		t.Fatalf("background %+v, want sleep 300 and the loop", res.Background)
	}
	// They keep running (and writing to the terminal does not hurt them).
	time.Sleep(300 * time.Millisecond)
	if got := sh(t, c, fmt.Sprintf("kill -0 %d && echo alive; pgrep -c -f 'sleep 0.01' >/dev/null || pgrep -c -x bash", sleepPID)); !strings.HasPrefix(got, "alive") {
		t.Errorf("background sleep is gone: %q", got)
	}
	// A daemon that detaches from the terminal is not listed and does not
	// hold the call either.
	res, _ = run(t, c, sandbox.ExecRequest{Command: "setsid sleep 200 </dev/null >/dev/null 2>&1 & true"})
	if res.ExitCode != 0 {
		t.Errorf("exit %d", res.ExitCode)
	}
}

// Commands waiting for terminal input they will never get are ended early;
// quiet working commands are not.
func TestInputWait(t *testing.T) {
	cfg := testConfig(t)
	cfg.InputWait = 2 * time.Second
	c := newSandbox(t, cfg)
	c.mu.Lock()
	supported := c.client.Agent().InputWait
	c.mu.Unlock()
	if !supported {
		t.Skip("this kernel does not expose /proc/<pid>/syscall")
	}
	python := hasTool(t, c, "python3")
	git := hasTool(t, c, "git")
	waiting := []string{
		"read x",
		"printf 'Continue? [Y/n] '; read answer; echo answered",
		"cat",
		"head -n1 | sort",
		"echo before; read -p 'Password: ' -s pw",
	}
	if python {
		waiting = append(waiting,
			"python3 -c 'input(\"name? \")'",
			// A program polling the terminal (as vi and less do).
			"python3 -c 'import select,sys; select.select([sys.stdin],[],[])'",
			"python3 -c 'import selectors,sys; s=selectors.DefaultSelector(); s.register(sys.stdin, selectors.EVENT_READ); s.select()'",
		)
		if git {
			// git commit opening an editor that waits for keys.
			waiting = append(waiting, `git init -q repo && cd repo && touch f && git add f && GIT_EDITOR="python3 -c 'import select,sys; select.select([sys.stdin],[],[])'" git commit`)
		}
	}
	for _, cmd := range waiting {
		t.Run(cmd, func(t *testing.T) {
			t.Parallel()
			res, out := run(t, c, sandbox.ExecRequest{Command: cmd, Timeout: 50 * time.Second})
			if !res.InputWait || res.TimedOut {
				t.Errorf("not ended for input wait: %+v, output %q", res, out)
			}
			if res.ExitCode == 0 {
				t.Errorf("exit 0")
			}
		})
	}
	working := []string{
		"sleep 5",
		"sleep 5 | cat",
		"python3 -c 'import time; time.sleep(5)'",
		// Serving a socket while also reading the terminal.
		"python3 -c 'import socket,select,sys; s=socket.socket(); s.bind((\"127.0.0.1\",0)); s.listen(); select.select([s, sys.stdin],[],[], 5)'",
		// Printing now and then.
		"for i in 1 2 3 4 5; do read -t 1 x; echo $i; done",
	}
	for _, cmd := range working {
		if strings.Contains(cmd, "python3") && !python {
			continue
		}
		t.Run(cmd, func(t *testing.T) {
			t.Parallel()
			res, out := run(t, c, sandbox.ExecRequest{Command: cmd, Timeout: 50 * time.Second})
			if res.InputWait || res.TimedOut || res.ExitCode != 0 && !strings.HasPrefix(cmd, "for") {
				t.Errorf("ended early: %+v, output %q", res, out)
			}
		})
	}
}

// Input wait is detected whatever user the commands run as: the workspace's
// owner when it is not root (the agent then holds no CAP_DAC_OVERRIDE, and
// what /proc shows of a process's system calls and fds is its owner's
// alone), or another user a request names.
func TestInputWaitAsUser(t *testing.T) {
	cfg := testConfig(t)
	cfg.InputWait = 2 * time.Second
	uid := privateWorkspace(t, cfg)
	c := newSandbox(t, cfg)
	c.mu.Lock()
	supported := c.client.Agent().InputWait
	c.mu.Unlock()
	if !supported {
		t.Skip("this kernel does not expose /proc/<pid>/syscall")
	}
	if got := sh(t, c, "id -u"); got != strconv.Itoa(uid) {
		t.Fatalf("commands run as %s, want %d", got, uid)
	}
	cases := []sandbox.ExecRequest{
		{Command: "read x"},
		{Command: "cat"},
		{Command: "head -n1 | sort"},
		{Command: "echo before; read -p 'Password: ' -s pw"},
		// Another user, who may not enter the private workspace.
		{Command: "id -u; read x", User: "4321:8765", Dir: "/tmp"},
	}
	if hasTool(t, c, "python3") {
		cases = append(cases, sandbox.ExecRequest{Command: "python3 -c 'import select,sys; select.select([sys.stdin],[],[])'"})
	}
	for _, req := range cases {
		t.Run(req.Command+" "+req.User, func(t *testing.T) {
			t.Parallel()
			req.Timeout = 50 * time.Second
			res, out := run(t, c, req)
			if !res.InputWait || res.TimedOut || res.ExitCode == 0 {
				t.Errorf("not ended for input wait: %+v, output %q", res, out)
			}
		})
	}
	// A quiet working command is not ended.
	if res, out := run(t, c, sandbox.ExecRequest{Command: "sleep 5", Timeout: 50 * time.Second}); res.InputWait || res.TimedOut || res.ExitCode != 0 {
		t.Errorf("sleep ended early: %+v, output %q", res, out)
	}
}

func TestForkBomb(t *testing.T) {
	cfg := testConfig(t)
	cfg.PidsLimit = 128
	c := newSandbox(t, cfg)
	res, _ := run(t, c, sandbox.ExecRequest{Command: "bomb() { bomb | bomb & }; bomb", Timeout: 30 * time.Second})
	if !res.ProcessLimit {
		t.Errorf("process limit not reported: %+v", res)
	}
	if len(res.Background) != 0 {
		t.Errorf("the bomb was left running: %d processes", len(res.Background))
	}
	// The sandbox works afterwards, and nothing of the bomb is left.
	if got := sh(t, c, "ps -e --no-headers | wc -l"); got == "" {
		t.Error("no ps output")
	} else if n, _ := strconv.Atoi(got); n > 8 {
		t.Errorf("%d processes left:\n%s", n, sh(t, c, "ps -ef"))
	}
}

func TestMemoryBomb(t *testing.T) {
	cfg := testConfig(t)
	cfg.Memory = 128 << 20
	c := newSandbox(t, cfg)
	res, out := run(t, c, sandbox.ExecRequest{Command: "head -c 1000000000 /dev/zero | tail -n 1 | wc -c", Timeout: time.Minute})
	if !res.OOMKilled {
		t.Errorf("OOM not reported: %+v, output %q", res, out)
	}
	if res.ExitCode != 0 {
		// wc's status: the pipeline "succeeded" although tail was killed.
		t.Logf("exit %d", res.ExitCode)
	}
	if got := sh(t, c, "echo alive"); got != "alive" {
		t.Errorf("got %q", got)
	}
	// The next command is not blamed for the old kill.
	if res, _ := run(t, c, sandbox.ExecRequest{Command: "true"}); res.OOMKilled {
		t.Error("OOM reported again")
	}
}

func TestFullTmp(t *testing.T) {
	cfg := testConfig(t)
	cfg.Memory = 256 << 20
	c := newSandbox(t, cfg)
	res, out := run(t, c, sandbox.ExecRequest{Command: "head -c 2000000000 /dev/zero > /tmp/fill", Timeout: time.Minute})
	if res.ExitCode == 0 || !strings.Contains(out, "No space left on device") {
		t.Errorf("exit %d, output %q", res.ExitCode, out)
	}
	if res.OOMKilled {
		t.Error("a full /tmp was reported as out of memory")
	}
	sh(t, c, "rm /tmp/fill && echo ok > /tmp/small && cat /tmp/small")
}

// When the container dies, the pending call returns, and the next one starts a
// new container and says so.
func TestContainerDeath(t *testing.T) {
	c := newSandbox(t, testConfig(t))
	sh(t, c, "mkdir -p sub && cd sub")
	old := containerID(t, c)
	api, _ := engine()
	killer := api.(interface {
		ContainerKill(context.Context, string, string) error
	})
	done := make(chan error, 1)
	var res sandbox.ExecResult
	go func() {
		var err error
		res, err = c.Exec(context.Background(), sandbox.ExecRequest{Command: "sleep 100"})
		done <- err
	}()
	time.Sleep(300 * time.Millisecond)
	if err := killer.ContainerKill(context.Background(), old, "KILL"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		var d *sandbox.DiedError
		if !errors.As(err, &d) {
			t.Fatalf("pending call: %v, want a DiedError (result %+v)", err, res)
		}
		t.Logf("pending call: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("the pending call hung")
	}
	res2, out := run(t, c, sandbox.ExecRequest{Command: "pwd"})
	if !res2.Restarted || res2.RestartReason == "" {
		t.Errorf("restart not reported: %+v", res2)
	}
	t.Logf("restart reason: %s", res2.RestartReason)
	if clean(out) != c.Workspace()+"/sub" {
		t.Errorf("dir after restart %q", out)
	}
	if containerID(t, c) == old {
		t.Error("same container")
	}
	if res3, _ := run(t, c, sandbox.ExecRequest{Command: "true"}); res3.Restarted {
		t.Error("restart reported twice")
	}
}
