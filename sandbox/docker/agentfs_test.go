package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corralhq/corral/fsys"
	"github.com/corralhq/corral/fsys/fsystest"
	"github.com/corralhq/corral/sandbox"
	"github.com/corralhq/corral/sandbox/proto"
)

// agentFS opens the sandbox's workspace through its agent.
func agentFS(t testing.TB, c *Container) *sandbox.AgentFS {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a, err := c.AgentFS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

func TestAgentFSBasics(t *testing.T) {
	c := newSandbox(t, testConfig(t))
	a := agentFS(t, c)
	if a.Name() != c.Workspace() {
		t.Errorf("Name = %q, want %q", a.Name(), c.Workspace())
	}
	if err := a.MkdirAll("d/e", 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := a.OpenFile("d/e/f.txt", os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("0123456789abcdef\r\n"), 100_000) // 1.8 MB
	if n, err := f.Write(data); err != nil || n != len(data) {
		t.Fatalf("write %d %v", n, err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	host, err := os.ReadFile(filepath.Join(c.Workspace(), "d/e/f.txt"))
	if err != nil || !bytes.Equal(host, data) {
		t.Fatalf("the host sees %d bytes (%v), want %d", len(host), err, len(data))
	}
	g, err := a.OpenFile("d/e/f.txt", os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(g)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes (%v), want %d", len(got), err, len(data))
	}
	fi, err := g.Stat()
	if err != nil {
		t.Fatal(err)
	}
	g.Close()
	hfi, _ := os.Stat(filepath.Join(c.Workspace(), "d/e/f.txt"))
	if !fsys.SameFile(fi, hfi) || fi.Size() != int64(len(data)) || !fi.ModTime().Equal(hfi.ModTime()) {
		t.Errorf("remote %v %v %v vs host %v %v", fi.Size(), fi.ModTime(), fi.Sys(), hfi.Size(), hfi.ModTime())
	}
	uid, _, _ := fsys.Owner(fi)
	want := 65532 // a workspace of root's: commands run as 65532
	if os.Geteuid() != 0 {
		want = os.Geteuid() // an ordinary user's: commands run as its owner
	}
	if uid != want {
		t.Errorf("a file made through the agent belongs to %d, want the commands' user %d", uid, want)
	}
	if _, err := a.Stat("missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("stat missing: %v", err)
	}
	if _, err := a.Readlink("d"); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("readlink of a directory: %v", err)
	}
	if _, err := a.OpenFile("../etc/passwd", os.O_RDONLY, 0); err == nil || !errors.Is(err, fsys.ErrEscape) {
		t.Errorf("open ../etc/passwd: %v", err)
	}
	sub, err := a.OpenRoot("d")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if w, ok := sub.Where(); !ok || w != filepath.Join(c.Workspace(), "d") {
		t.Errorf("Where = %q %v", w, ok)
	}
	d, err := sub.OpenFile(".", os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil || len(names) != 1 || names[0] != "e" {
		t.Errorf("names %q %v", names, err)
	}
	if err := sub.Rename("e/f.txt", "g.txt"); err != nil {
		t.Fatal(err)
	}
	if err := sub.Remove("e"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(c.Workspace(), "d/g.txt")); err != nil {
		t.Error(err)
	}
}

// The file half of the conformance suite, through the agent: with a
// workspace that belongs to root (commands, and the agent's file
// operations, override permissions) and with one that belongs to an
// unprivileged user (permissions hold); under gVisor where it is
// registered; over a stream without write deadlines, as a pod's.
func TestAgentFSConformance(t *testing.T) {
	for _, tc := range []struct {
		name    string
		owner   int
		runtime string
		piped   bool
	}{
		{name: "root-workspace", owner: 0},
		{name: "user-workspace", owner: 1000},
		{name: "gvisor", owner: 65532, runtime: "runsc"},
		{name: "piped", owner: 1000, piped: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t)
			if tc.runtime != "" {
				if !hasRuntime(t, tc.runtime) {
					t.Skipf("%s is not registered with the Docker engine", tc.runtime)
				}
				cfg.Runtime = tc.runtime
			}
			if os.Geteuid() == 0 {
				if err := os.Chown(cfg.Workspace, tc.owner, tc.owner); err != nil {
					t.Fatal(err)
				}
			} else if tc.owner == 0 {
				t.Skip("an ordinary user cannot make a workspace of root's")
			} // else: the workspace is the user's own, as an ordinary user's is
			need(t)
			c, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if tc.piped {
				c.transport = pipeTransport
			}
			t.Cleanup(func() { c.Close(context.Background()) })
			a := agentFS(t, c)
			n := 0
			fsystest.Run(t, fsystest.Target{
				Open: func(t *testing.T) fsys.Root {
					n++
					dir := fmt.Sprintf("case%d", n)
					if err := a.Mkdir(dir, 0o755); err != nil {
						t.Fatal(err)
					}
					r, err := a.OpenRoot(dir)
					if err != nil {
						t.Fatal(err)
					}
					return r
				},
				EnforcesPermissions: tc.owner != 0,
			})
		})
	}
}

// The agent is root in the container; its file operations are the commands'
// user's: in a workspace of an unprivileged user, a file only root may read
// stays closed to them, as does a directory only root may write, and what
// they create belongs to the commands' user.
func TestAgentFSAsCommandsUser(t *testing.T) {
	for _, rt := range runtimes(t) {
		t.Run(rt, func(t *testing.T) { testAgentFSAsCommandsUser(t, rt) })
	}
}

// runtimes are the OCI runtimes to test under: the engine's default, and
// gVisor where it is registered.
func runtimes(t *testing.T) []string {
	rts := []string{"default"}
	if hasRuntime(t, "runsc") {
		rts = append(rts, "runsc")
	}
	return rts
}

func runtimeConfig(t *testing.T, rt string) sandbox.Config {
	cfg := testConfig(t)
	if rt != "default" {
		cfg.Runtime = rt
	}
	return cfg
}

func testAgentFSAsCommandsUser(t *testing.T, rt string) {
	cfg := runtimeConfig(t, rt)
	ws := cfg.Workspace
	// As root: the workspace is given to 1000, and a file and a directory
	// stay root's. As an ordinary user the workspace is already theirs, and
	// what the commands' user may not touch is what the user's own modes
	// forbid them (no DAC override either way).
	asRoot := os.Geteuid() == 0
	owner, group, secretMode, dirMode := 1000, 1000, fs.FileMode(0o600), fs.FileMode(0o755)
	if asRoot {
		if err := os.Chown(ws, owner, group); err != nil {
			t.Fatal(err)
		}
	} else {
		owner, group, secretMode, dirMode = os.Geteuid(), os.Getegid(), 0, 0o555
	}
	if err := os.WriteFile(filepath.Join(ws, "root-secret"), []byte("s"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(ws, "root-secret"), secretMode); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(ws, "root-dir"), dirMode); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(filepath.Join(ws, "root-dir"), 0o755) })
	c := newSandbox(t, cfg)
	a := agentFS(t, c)
	if _, err := a.OpenFile("root-secret", os.O_RDONLY, 0); !errors.Is(err, fs.ErrPermission) {
		t.Errorf("open a file only root may read: %v, want permission denied", err)
	}
	if _, err := a.OpenFile("root-dir/new", os.O_WRONLY|os.O_CREATE, 0o644); !errors.Is(err, fs.ErrPermission) {
		t.Errorf("create in a directory only root may write: %v, want permission denied", err)
	}
	if err := a.Chmod("root-secret", 0o644); asRoot && !errors.Is(err, fs.ErrPermission) {
		t.Errorf("chmod of root's file: %v, want permission denied", err)
	} else if !asRoot && err != nil {
		t.Errorf("chmod of the user's own file: %v", err)
	}
	if err := a.Rename("root-secret", "mine"); err != nil {
		t.Errorf("rename in the commands' own directory: %v", err) // the directory is theirs
	}
	f, err := a.OpenFile("made", os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Chown(0, 0); !errors.Is(err, fs.ErrPermission) {
		t.Errorf("give a file to root: %v, want permission denied", err)
	}
	f.Close()
	fi, err := os.Stat(filepath.Join(ws, "made"))
	if err != nil {
		t.Fatal(err)
	}
	if uid, gid, _ := fsys.Owner(fi); uid != owner || gid != group {
		t.Errorf("a file made through the agent belongs to %d:%d, want %d:%d", uid, gid, owner, group)
	}
}

// A command cannot signal or trace the agent's threads that act as its
// user: they keep root as their real and saved ids. The command sends
// SIGSTOP and SIGKILL to every thread of every process that is not its
// user's own, and tries to trace each; the agent, its file operations and
// the sandbox live on.
func TestAgentFSThreadsResistSignals(t *testing.T) {
	for _, rt := range runtimes(t) {
		t.Run(rt, func(t *testing.T) { testAgentFSThreadsResistSignals(t, rt) })
	}
}

func testAgentFSThreadsResistSignals(t *testing.T, rt string) {
	cfg := runtimeConfig(t, rt)
	if rt == "runsc" {
		gVisorWorkspace(t, cfg)
	}
	c := newSandbox(t, cfg)
	a := agentFS(t, c)
	// Every worker has taken the commands' credentials by now.
	if _, err := a.Stat("."); err != nil {
		t.Fatal(err)
	}
	script := `import os, signal, ctypes
me = {os.getpid(), os.getppid()}
hit, refused = [], 0
libc = ctypes.CDLL(None, use_errno=True)
for p in os.listdir('/proc'):
    if not p.isdigit() or int(p) in me:
        continue
    try:
        uids = [l for l in open('/proc/%s/status' % p) if l.startswith('Uid:')][0].split()[1:]
    except (OSError, IndexError):
        continue
    if int(uids[0]) == os.getuid():
        continue  # the commands' own processes (a spare shell)
    try:
        tasks = os.listdir('/proc/%s/task' % p)
    except OSError:
        tasks = [p]
    for tid in tasks:
        for sig in (signal.SIGSTOP, signal.SIGKILL):
            if libc.syscall(234, int(p), int(tid), int(sig)) == 0:  # tgkill
                hit.append((p, tid, int(sig)))
            else:
                refused += 1
        if libc.ptrace(16, int(tid), 0, 0) == 0:  # PTRACE_ATTACH
            hit.append((p, tid, 'ptrace'))
print('hit', hit, 'refused', refused)
`
	if err := os.WriteFile(filepath.Join(c.Workspace(), "kill.py"), []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	res, out := run(t, c, sandbox.ExecRequest{Command: "python3 kill.py"})
	if res.ExitCode != 0 {
		t.Fatalf("the script failed (%d): %s", res.ExitCode, out)
	}
	if !strings.Contains(out, "hit [] refused") || strings.Contains(out, "refused 0") {
		t.Errorf("a command reached the agent's threads: %s", out)
	}
	time.Sleep(proto.Silence + time.Second) // a stopped agent would be found silent by now
	if _, err := a.Stat("."); err != nil {
		t.Errorf("file operations after the attempts: %v", err)
	}
	res, out = run(t, c, sandbox.ExecRequest{Command: "true"})
	if res.Restarted {
		t.Errorf("the sandbox died: %s (%s)", res.RestartReason, out)
	}
}

// BenchmarkAgentFSStat is one round trip of a file operation through the
// agent (a stat), against the same stat on the host, in one run.
func BenchmarkAgentFSStat(b *testing.B) {
	c := shared(b)
	if err := os.WriteFile(filepath.Join(c.Workspace(), "f"), []byte("x"), 0o644); err != nil {
		b.Fatal(err)
	}
	a := agentFS(b, c)
	l, err := fsys.OpenLocal(c.Workspace())
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	for _, r := range []fsys.Root{l, a} {
		name := "local"
		if r == fsys.Root(a) {
			name = "agent"
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if _, err := r.Stat("f"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// AgentFS follows the sandbox: when its container dies, the roots and files
// opened on it fail with a *DiedError, and the next operation reaches the
// new container's agent.
func TestAgentFSFollowsRestart(t *testing.T) {
	c := newSandbox(t, testConfig(t))
	a := agentFS(t, c)
	if err := a.Mkdir("d", 0o755); err != nil {
		t.Fatal(err)
	}
	sub, err := a.OpenRoot("d")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	old := containerID(t, c)
	api, _ := engine()
	killer := api.(interface {
		ContainerKill(context.Context, string, string) error
	})
	if err := killer.ContainerKill(context.Background(), old, "KILL"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the client sees the death", func() bool {
		_, err := sub.Stat(".")
		var d *sandbox.DiedError
		return errors.As(err, &d)
	})
	if _, err := a.Stat("d"); err != nil {
		t.Fatalf("after the restart: %v", err)
	}
	if id := containerID(t, c); id == old {
		t.Errorf("still the old container %s", id)
	}
}

// A connection holds at most proto.FSMaxHandles open roots and files: past
// them an open fails with EMFILE, and closing one makes room.
func TestAgentFSHandleLimit(t *testing.T) {
	c := newSandbox(t, testConfig(t))
	a := agentFS(t, c)
	if err := os.WriteFile(filepath.Join(c.Workspace(), "f"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var open []fsys.File
	defer func() {
		for _, f := range open {
			f.Close()
		}
	}()
	for {
		f, err := a.OpenFile("f", os.O_RDONLY, 0)
		if err != nil {
			if !errors.Is(err, syscall.EMFILE) {
				t.Fatalf("after %d files: %v, want EMFILE", len(open), err)
			}
			break
		}
		open = append(open, f)
		if len(open) > proto.FSMaxHandles {
			t.Fatalf("%d files open at once", len(open))
		}
	}
	if len(open) != proto.FSMaxHandles-1 { // the workspace's root is one
		t.Errorf("%d files open at most, want %d", len(open), proto.FSMaxHandles-1)
	}
	open[0].Close()
	open = open[1:]
	f, err := a.OpenFile("f", os.O_RDONLY, 0)
	if err != nil {
		t.Fatalf("after a close: %v", err)
	}
	open = append(open, f)
}
