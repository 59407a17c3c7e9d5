package docker

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/sandbox"
)

// hasRuntime reports whether the engine has an OCI runtime registered.
func hasRuntime(t *testing.T, name string) bool {
	t.Helper()
	need(t)
	api, _ := engine()
	in, err := api.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	_, ok := in.Runtimes[name]
	return ok
}

// gVisorWorkspace gives a root-owned test workspace to the default
// unprivileged user: gVisor before 2023 has no ambient capabilities, so
// commands could not write a workspace that belongs to root.
func gVisorWorkspace(t *testing.T, cfg sandbox.Config) {
	t.Helper()
	if os.Getuid() == 0 {
		if err := os.Chown(cfg.Workspace, 65532, 65532); err != nil {
			t.Fatal(err)
		}
	}
}

// Under gVisor (runsc, optional even in CI) the agent works over the attach
// stream with network none; input-wait detection degrades (see the log).
func TestRunsc(t *testing.T) {
	if !hasRuntime(t, "runsc") {
		t.Skip("runsc is not registered with the Docker engine")
	}
	cfg := testConfig(t)
	cfg.Runtime = "runsc"
	cfg.InputWait = 2 * time.Second
	gVisorWorkspace(t, cfg)
	c := newSandbox(t, cfg)
	if got := sh(t, c, "uname -r"); !strings.HasPrefix(got, "4.4") {
		t.Logf("kernel %q (gVisor reports 4.4.0)", got)
	}
	if got := sh(t, c, "echo hello; id -u"); !strings.HasPrefix(got, "hello") {
		t.Errorf("got %q", got)
	}
	sh(t, c, "mkdir -p d && cd d")
	if got := sh(t, c, "pwd"); got != c.Workspace()+"/d" {
		t.Errorf("pwd %q", got)
	}
	res, _ := run(t, c, sandbox.ExecRequest{Command: "sleep 100", Timeout: 500 * time.Millisecond})
	if !res.TimedOut {
		t.Errorf("timeout: %+v", res)
	}
	res, out := run(t, c, sandbox.ExecRequest{Command: "sleep 300 & echo bg"})
	if res.ExitCode != 0 || len(res.Background) == 0 {
		t.Errorf("background: %+v %q", res, out)
	}
	c.mu.Lock()
	iw := c.client.Agent().InputWait
	c.mu.Unlock()
	t.Logf("input-wait detection under gVisor: %v", iw)
	res, _ = run(t, c, sandbox.ExecRequest{Command: "read x", Timeout: 5 * time.Second})
	if iw && !res.InputWait {
		t.Errorf("input wait not detected: %+v", res)
	}
	if !iw && !res.TimedOut {
		t.Errorf("read x: %+v", res)
	}
	var w countWriter
	res, _ = run(t, c, sandbox.ExecRequest{Command: "yes | head -c 10M", Output: &w})
	if res.ExitCode != 0 || w.n.Load() != 10<<20 {
		t.Errorf("flood: exit %d, %d bytes", res.ExitCode, w.n.Load())
	}
}

// Under gVisor the cgroup counters are not visible inside: a memory bomb or a
// fork bomb takes the whole sandbox down (the sentry runs out of memory, or
// of host threads: a fork bomb, held to the process limit inside, churns
// through more of them than the engine's limit allows for). The call still
// returns; the sandbox may die in it or, for a bomb that went to the
// background, in the next one, and then the next call starts a new sandbox.
func TestRunscBombs(t *testing.T) {
	if !hasRuntime(t, "runsc") {
		t.Skip("runsc is not registered with the Docker engine")
	}
	cfg := testConfig(t)
	cfg.Runtime = "runsc"
	cfg.Memory = 256 << 20
	gVisorWorkspace(t, cfg)
	cfg.PidsLimit = 128
	c := newSandbox(t, cfg)
	for _, cmd := range []string{"head -c 1000000000 /dev/zero | tail -n 1 | wc -c", "bomb() { bomb | bomb & }; bomb"} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		res, err := c.Exec(ctx, sandbox.ExecRequest{Command: cmd, Timeout: 20 * time.Second})
		hung := ctx.Err() != nil
		cancel()
		if hung {
			t.Fatalf("%q hung", cmd)
		}
		t.Logf("%q: exit %d, oom %v, process limit %v, err %v", cmd, res.ExitCode, res.OOMKilled, res.ProcessLimit, err)
		var got string
		for try := range 2 {
			var w strings.Builder
			res, err := c.Exec(context.Background(), sandbox.ExecRequest{Command: "echo alive", Output: &w, Timeout: time.Minute})
			if err == nil {
				got = clean(w.String())
				break
			}
			var died *sandbox.DiedError
			if !errors.As(err, &died) || try > 0 {
				t.Fatalf("after %q: %+v %v", cmd, res, err)
			}
			t.Logf("after %q the sandbox died: %v", cmd, err)
		}
		if got != "alive" {
			t.Errorf("after %q: %q", cmd, got)
		}
	}
}

// Under gVisor the engine's pids limit counts gVisor's own threads (about
// eight for each process of the sandbox): there the limit is the commands'
// RLIMIT_NPROC, so a command that starts more processes than allowed has its
// forks fail, as under runc, and the sandbox lives on. Before, some fifty
// processes took a sandbox of the default limit down (exit status 2), and a
// limit as small as this one left gVisor no room to start.
func TestRunscProcessLimit(t *testing.T) {
	if !hasRuntime(t, "runsc") {
		t.Skip("runsc is not registered with the Docker engine")
	}
	cfg := testConfig(t)
	cfg.Runtime = "runsc"
	// Small: the more host threads gVisor holds, the longer the engine
	// takes to remove the container (half a minute at some 500).
	cfg.PidsLimit = 24
	gVisorWorkspace(t, cfg)
	c := newSandbox(t, cfg)
	script := `import subprocess
ps = []
try:
    for i in range(50):
        ps.append(subprocess.Popen(["sleep", "60"]))
    print("started all", len(ps))
except OSError as e:
    print("refused after", len(ps), e.errno)
for p in ps:
    p.kill()
    p.wait()
`
	if err := os.WriteFile(filepath.Join(c.Workspace(), "spawn.py"), []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	res, out := run(t, c, sandbox.ExecRequest{Command: "python3 spawn.py", Timeout: time.Minute})
	if !strings.HasPrefix(clean(out), "refused after ") || res.ExitCode != 0 {
		t.Errorf("50 processes against a limit of 24: exit %d, %q", res.ExitCode, clean(out))
	}
	res, out = run(t, c, sandbox.ExecRequest{Command: "echo alive"})
	if res.Restarted || clean(out) != "alive" {
		t.Errorf("after it: restarted %v (%s), %q", res.Restarted, res.RestartReason, clean(out))
	}
}
