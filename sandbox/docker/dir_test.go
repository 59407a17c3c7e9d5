package docker

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/corralhq/corral/sandbox"
)

// The working directory persists between calls, like a shell's, clamped to the
// workspace.
func TestWorkingDirectory(t *testing.T) {
	c := newSandbox(t, testConfig(t))
	ws := c.Workspace()
	if err := os.MkdirAll(filepath.Join(ws, "a", "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(ws, "a"), filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc", filepath.Join(ws, "out")); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		cmd   string
		dir   string // where it must start
		reset bool
		want  string // its output
	}{
		{cmd: "pwd", dir: ws, want: ws},
		{cmd: "cd a", dir: ws},
		{cmd: "pwd", dir: ws + "/a", want: ws + "/a"},
		{cmd: "cd b; exit 3", dir: ws + "/a"},                    // exit keeps the directory
		{cmd: "pwd; cd ..", dir: ws + "/a/b", want: ws + "/a/b"}, // relative cd
		{cmd: "cd /tmp", dir: ws + "/a"},                         // leaves the workspace
		{cmd: "pwd", dir: ws, reset: true, want: ws},             // back at the root, said once
		{cmd: "cd ../..", dir: ws},
		{cmd: "pwd", dir: ws, reset: true, want: ws},
		{cmd: "cd link/b", dir: ws}, // a symlink inside: resolved
		{cmd: "pwd", dir: ws + "/a/b", want: ws + "/a/b"},
		{cmd: "cd " + ws + "/out", dir: ws + "/a/b"}, // a symlink out of the workspace
		{cmd: "pwd", dir: ws, reset: true, want: ws},
		{cmd: "mkdir gone && cd gone", dir: ws},
		{cmd: "rmdir " + ws + "/gone", dir: ws + "/gone"}, // its directory vanishes under it
		{cmd: "pwd", dir: ws, reset: true, want: ws},
		{cmd: "cd a && exec true", dir: ws}, // exec: the directory is not known
		{cmd: "pwd", dir: ws, want: ws},
		{cmd: "(cd a; pwd)", dir: ws, want: ws + "/a"}, // a subshell does not move the shell
		{cmd: "pwd", dir: ws, want: ws},
	}
	for i, s := range steps {
		res, out := run(t, c, sandbox.ExecRequest{Command: s.cmd})
		if res.Dir != s.dir || res.DirReset != s.reset {
			t.Errorf("step %d %q: started in %q (reset %v), want %q (reset %v)", i, s.cmd, res.Dir, res.DirReset, s.dir, s.reset)
		}
		if s.want != "" && clean(out) != s.want {
			t.Errorf("step %d %q: output %q, want %q", i, s.cmd, clean(out), s.want)
		}
	}
	// A directory removed from the host between calls.
	sh(t, c, "mkdir -p x && cd x")
	if err := os.Remove(filepath.Join(ws, "x")); err != nil {
		t.Fatal(err)
	}
	if res, _ := run(t, c, sandbox.ExecRequest{Command: "true"}); res.Dir != ws || !res.DirReset {
		t.Errorf("after removal: dir %q reset %v", res.Dir, res.DirReset)
	}
}

// The directory persists, call after call with no pause between, in a
// workspace only its user may enter (mode 0700, theirs): the agent, root
// without CAP_DAC_OVERRIDE there, resolves the directories as the commands
// see them. Directories they made private (mkdir -m 700) too, and a Dir a
// request names in them.
func TestWorkingDirectoryPrivate(t *testing.T) {
	cfg := testConfig(t)
	privateWorkspace(t, cfg)
	c := newSandbox(t, cfg)
	ws := c.Workspace()
	sh(t, c, "mkdir -p a/b && mkdir -m 700 p && mkdir -m 700 p/q")
	steps := []struct {
		cmd  string
		dir  string // where it must start
		want string // its output
	}{
		{cmd: "cd a", dir: ws},
		{cmd: "pwd", dir: ws + "/a", want: ws + "/a"},
		{cmd: "cd b", dir: ws + "/a"},
		{cmd: "pwd", dir: ws + "/a/b", want: ws + "/a/b"},
		{cmd: "cd " + ws + "/p", dir: ws + "/a/b"},
		{cmd: "pwd", dir: ws + "/p", want: ws + "/p"},
		{cmd: "cd q; pwd", dir: ws + "/p", want: ws + "/p/q"},
		{cmd: "pwd", dir: ws + "/p/q", want: ws + "/p/q"},
		{cmd: "cd ../..", dir: ws + "/p/q"},
		{cmd: "pwd", dir: ws, want: ws},
	}
	for round := range 5 {
		for i, s := range steps {
			res, out := run(t, c, sandbox.ExecRequest{Command: s.cmd})
			if res.Dir != s.dir || res.DirReset || res.ExitCode != 0 {
				t.Errorf("round %d step %d %q: started in %q (reset %v, exit %d), want %q", round, i, s.cmd, res.Dir, res.DirReset, res.ExitCode, s.dir)
			}
			if s.want != "" && clean(out) != s.want {
				t.Errorf("round %d step %d %q: output %q, want %q", round, i, s.cmd, clean(out), s.want)
			}
		}
	}
	for _, dir := range []string{"p/q", ws + "/p/q"} {
		res, out := run(t, c, sandbox.ExecRequest{Command: "pwd", Dir: dir})
		if res.ExitCode != 0 || clean(out) != ws+"/p/q" {
			t.Errorf("Dir %q: exit %d, output %q", dir, res.ExitCode, clean(out))
		}
	}
}

// The next command's shell goes ahead to the directory the last one ended in;
// a directory replaced meanwhile (same path, another directory) is entered
// anew, never run in while it is gone.
func TestWorkingDirectoryReplaced(t *testing.T) {
	c := newSandbox(t, testConfig(t))
	ws := c.Workspace()
	sh(t, c, "mkdir -p d && cd d && touch old-marker")
	time.Sleep(300 * time.Millisecond) // the next shell is in d by now
	d := filepath.Join(ws, "d")
	if err := os.Rename(d, d+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, "new-marker"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	res, out := run(t, c, sandbox.ExecRequest{Command: "pwd; ls"})
	if res.Dir != d || clean(out) != d+"\nnew-marker" {
		t.Errorf("started in %q with output %q, want %q and the new directory's listing", res.Dir, clean(out), d)
	}
}

// A command that left the workspace, then its container's death between
// calls: the next command, in a new container, starts at the workspace's
// root and says its directory was reset, as it would have in the old one.
func TestWorkingDirectoryResetAcrossRestart(t *testing.T) {
	c := newSandbox(t, testConfig(t))
	ws := c.Workspace()
	sh(t, c, "cd /tmp")
	c.mu.Lock()
	old := c.client
	c.mu.Unlock()
	api, _ := engine()
	killer := api.(interface {
		ContainerKill(context.Context, string, string) error
	})
	if err := killer.ContainerKill(context.Background(), old.Name(), "KILL"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-old.Done():
	case <-time.After(60 * time.Second):
		t.Fatal("the client did not see its container die")
	}
	res, _ := run(t, c, sandbox.ExecRequest{Command: "true"})
	if !res.Restarted || res.Dir != ws || !res.DirReset {
		t.Errorf("after the restart: restarted %v, dir %q, reset %v; want dir %q, reset", res.Restarted, res.Dir, res.DirReset, ws)
	}
}
