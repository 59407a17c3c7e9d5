package pool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/testenv"
	"github.com/corralhq/corral/sandbox"
	"github.com/corralhq/corral/sandbox/docker"
)

func TestMain(m *testing.M) {
	code := testenv.Main(m)
	// Whatever a failed test left of this process's sandboxes goes.
	if ids, err := exec.Command("docker", "ps", "-aq", "--filter", "label="+sandbox.LabelPID+"="+strconv.Itoa(os.Getpid())).Output(); err == nil && len(strings.TrimSpace(string(ids))) > 0 {
		_ = exec.Command("docker", append([]string{"rm", "-f"}, strings.Fields(string(ids))...)...).Run()
	}
	os.Exit(code)
}

// testConfig is the configuration of the tests' pooled sandboxes.
func testConfig(t testing.TB) sandbox.Config {
	return sandbox.Config{Image: testenv.Image, Agent: testenv.Agent(t), Memory: 256 << 20}
}

func newPool(t testing.TB, opts Options) *Pool {
	t.Helper()
	testenv.NeedsDocker(t)
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	if opts.Backend == nil {
		opts.Backend = docker.Backend
	}
	p, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("pool close: %v", err)
		}
	})
	return p
}

func claim(t testing.TB, ctx context.Context, p *Pool, cfg sandbox.Config) *Sandbox {
	t.Helper()
	s, err := p.Claim(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

// waitReady waits until the pool holds n ready sandboxes.
func waitReady(t testing.TB, p *Pool, n int) {
	t.Helper()
	ok := false
	defer func() {
		if !ok {
			t.Logf("the pool has %+v", p.Stats())
		}
	}()
	testenv.WaitFor(t, 2*time.Minute, fmt.Sprintf("%d ready sandboxes in the pool", n), func() bool { return p.Stats().Ready >= n })
	ok = true
}

// sh runs a command in s's sandbox through the shell and returns its output;
// a failed command fails the test.
func sh(t testing.TB, s sandbox.Sandbox, command string) string {
	t.Helper()
	var out strings.Builder
	res, err := s.Exec(context.Background(), sandbox.ExecRequest{Command: command, Output: &out, Timeout: time.Minute})
	if err != nil {
		t.Fatalf("%s: %v", command, err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("%s: exit %d: %s", command, res.ExitCode, out.String())
	}
	return strings.TrimSpace(out.String())
}

// TestClaimedWorkspaceAtItsPath: a sandbox started ahead of need gets its
// workspace after it started: the slot, filled on the host, is there inside
// at the same path, and what commands write there is on the host.
func TestClaimedWorkspaceAtItsPath(t *testing.T) {
	p := newPool(t, Options{})
	cfg := testConfig(t)
	if err := p.Warm(cfg, 1); err != nil {
		t.Fatal(err)
	}
	waitReady(t, p, 1)
	s := claim(t, context.Background(), p, cfg)
	if !s.Warm() {
		t.Error("the claim did not get the ready sandbox")
	}
	if s.Dir() != s.Workspace() || !strings.HasPrefix(s.Dir(), p.Dir()+"/") {
		t.Errorf("Dir %q, Workspace %q, pool %q: want the slot's path for both", s.Dir(), s.Workspace(), p.Dir())
	}
	if ents, err := os.ReadDir(s.Dir()); err != nil || len(ents) != 0 {
		t.Fatalf("the slot holds %v (%v), want nothing", ents, err)
	}
	// Filled after the start, on the host.
	if err := os.MkdirAll(filepath.Join(s.Dir(), "src"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.Dir(), "src", "task.txt"), []byte("filled after start\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := sh(t, s, "pwd; cat src/task.txt; cd src && pwd"); got != s.Dir()+"\nfilled after start\n"+s.Dir()+"/src" {
		t.Errorf("in the sandbox:\n%s", got)
	}
	sh(t, s, "cd "+s.Dir()+" && echo made inside > out.txt")
	if b, err := os.ReadFile(filepath.Join(s.Dir(), "out.txt")); err != nil || string(b) != "made inside\n" {
		t.Errorf("out.txt on the host: %q, %v", b, err)
	}
	// The log directory is outside the workspace, read-only inside.
	if strings.HasPrefix(s.LogDir(), s.Dir()+"/") {
		t.Errorf("log dir %s is in the workspace", s.LogDir())
	}
	if got := sh(t, s, "touch "+s.LogDir()+"/x 2>&1 || echo refused"); !strings.HasSuffix(got, "refused") {
		t.Errorf("writing the log dir: %s", got)
	}
	// The pool makes another ready one to replace it.
	waitReady(t, p, 1)
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Dir(s.Dir())); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the slot is still there after Close: %v", err)
	}
}

// TestOwnSlots: with OwnSlots, as root, a slot's workspace is its commands'
// user's, as a directory of theirs, and they work there without overriding
// file permissions (a file they made unreadable stays so to them); without
// it, a slot is root's, and they keep CAP_DAC_OVERRIDE to write it.
func TestOwnSlots(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root gives slots away")
	}
	for _, own := range []bool{false, true} {
		p := newPool(t, Options{OwnSlots: own})
		for _, user := range []string{"", "1234:1235"} {
			cfg := testConfig(t)
			cfg.User = user
			s := claim(t, context.Background(), p, cfg)
			got := sh(t, s, "stat -c %u:%g .; id -u; printf s > secret; chmod 000 secret; cat secret 2>/dev/null || echo refused")
			uid := "65532"
			if user != "" {
				uid = "1234"
			}
			want := "0:0\n" + uid + "\ns"
			if own {
				want = map[string]string{"": "65532:65532", "1234:1235": "1234:1235"}[user] + "\n" + uid + "\nrefused"
			}
			if got != want {
				t.Errorf("OwnSlots %v, user %q: %q, want %q", own, user, got, want)
			}
		}
	}
}

// TestNothingLeaks: a task's sandbox is never the next task's. A hostile
// script in the first one tries to leave files (in the workspace, /tmp,
// HOME, /var/tmp, beside its slot), a process running in the background, a
// variable in the shells' start-up files; the next claim of the same
// configuration finds none of it.
func TestNothingLeaks(t *testing.T) {
	p := newPool(t, Options{})
	cfg := testConfig(t)
	if err := p.Warm(cfg, 2); err != nil {
		t.Fatal(err)
	}
	waitReady(t, p, 2)
	a := claim(t, context.Background(), p, cfg)
	script := `import os, subprocess
ws = os.getcwd()
def plant(path):
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f: f.write("planted\n")
        print("planted", path)
    except OSError as e:
        print("refused", path, e)
for p in [ws + "/planted", "/tmp/planted", os.environ["HOME"] + "/planted", "/var/tmp/planted",
          os.path.dirname(os.path.dirname(ws)) + "/planted", os.path.dirname(ws) + "/../planted-slot/ws/planted"]:
    plant(p)
for rc in [os.environ["HOME"] + "/.bashrc", "/etc/bash.bashrc", "/etc/profile", "/etc/environment"]:
    try:
        with open(rc, "a") as f: f.write("\nexport LEAKED=yes\nLEAKED=yes\n")
        print("appended", rc)
    except OSError as e:
        print("refused", rc, e)
subprocess.Popen(["setsid", "sleep", "1000"], start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
subprocess.Popen(["nohup", "sleep", "1001"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print("done")
`
	if err := os.WriteFile(filepath.Join(a.Dir(), "x.py"), []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	out := sh(t, a, "python3 x.py")
	if !strings.HasSuffix(out, "done") || !strings.Contains(out, "planted /var/tmp/planted") {
		t.Fatalf("the hostile script did not run as meant:\n%s", out)
	}
	t.Logf("the first task:\n%s", out)
	if got := sh(t, a, "pgrep -c sleep || true"); got != "2" {
		t.Errorf("the first task's background processes: %s, want 2", got)
	}
	b := claim(t, context.Background(), p, cfg)
	if !b.Warm() || b.Session() == a.Session() || b.Dir() == a.Dir() {
		t.Fatalf("second claim: warm %v, session %s (first %s), dir %s (first %s)", b.Warm(), b.Session(), a.Session(), b.Dir(), a.Dir())
	}
	if err := a.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	check := `for f in "$PWD/planted" /tmp/planted "$HOME/planted" /var/tmp/planted "$(dirname "$(dirname "$PWD")")/planted"; do test -e "$f" && echo "found $f"; done
ls -A "$PWD"
pgrep -a sleep
grep -l LEAKED "$HOME/.bashrc" /etc/bash.bashrc /etc/profile /etc/environment 2>/dev/null
bash -ic 'echo "LEAKED=$LEAKED"' 2>/dev/null; bash -lc 'echo "LEAKED=$LEAKED"'
true`
	if got := sh(t, b, check); got != "LEAKED=\nLEAKED=" {
		t.Errorf("the next task found what the first left:\n%s", got)
	}
}

// TestMaxAndEviction: Max bounds the sandboxes alive; a claim waits for
// room, and takes the room of a ready sandbox of another configuration.
func TestMaxAndEviction(t *testing.T) {
	p := newPool(t, Options{Max: 2})
	cfg := testConfig(t)
	other := cfg
	other.Env = []string{"OTHER=1"}
	if err := p.Warm(other, 1); err != nil {
		t.Fatal(err)
	}
	waitReady(t, p, 1)
	a := claim(t, context.Background(), p, cfg) // made now: there is room
	if a.Warm() {
		t.Error("a claim of another configuration got the ready sandbox")
	}
	// The pool is full (one ready of other, one claimed): the next claim
	// takes the ready one's room.
	b := claim(t, context.Background(), p, cfg)
	if st := p.Stats(); st.Live != 2 || st.Ready != 0 {
		t.Errorf("after eviction: %+v, want 2 live, none ready", st)
	}
	if got := sh(t, b, `echo "OTHER=$OTHER"`); got != "OTHER=" {
		t.Errorf("the claim got the other configuration's sandbox: %s", got)
	}
	// Full of claimed sandboxes: a claim waits, and gives up with its context.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	_, err := p.Claim(ctx, cfg)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a claim over Max: %v, want it to wait until its deadline", err)
	}
	// Room comes back when a claimed one closes; a waiting claim gets it.
	got := make(chan error, 1)
	go func() {
		c, err := p.Claim(context.Background(), cfg)
		if err == nil {
			c.Close(context.Background())
		}
		got <- err
	}()
	if err := a.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	// The refill of other waits for room too: never past Max.
	if st := p.Stats(); st.Live > 2 {
		t.Errorf("%+v: more alive than Max", st)
	}
}

// TestHold: a sandbox made outside the pool counts against Max.
func TestHold(t *testing.T) {
	p := newPool(t, Options{Max: 1})
	release, err := p.Hold(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	_, err = p.Hold(ctx)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a second Hold with Max 1: %v", err)
	}
	release()
	release() // once only
	r2, err := p.Hold(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	r2()
	if st := p.Stats(); st.Live != 0 {
		t.Errorf("%+v after releases", st)
	}
}

// TestCloseRemovesEverything: Close removes the ready sandboxes and those
// being made; a claimed one stays its claimer's, and the pool's directory
// goes with it.
func TestCloseRemovesEverything(t *testing.T) {
	testenv.NeedsDocker(t)
	p, err := New(Options{Backend: docker.Backend, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t)
	s, err := p.Claim(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Warm(cfg, 2); err != nil {
		t.Fatal(err)
	}
	waitReady(t, p, 1) // one ready, one perhaps still starting
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if ids := poolContainers(t); len(ids) != 1 {
		t.Errorf("after Close, %d sandboxes of the pool remain, want the claimed one: %v", len(ids), ids)
	}
	if _, err := p.Claim(context.Background(), cfg); !errors.Is(err, ErrClosed) {
		t.Errorf("Claim after Close: %v", err)
	}
	sh(t, s, "true")
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if ids := poolContainers(t); len(ids) != 0 {
		t.Errorf("after the last Close, sandboxes remain: %v", ids)
	}
	if _, err := os.Stat(p.Dir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the pool's directory stays: %v", err)
	}
}

// poolContainers lists this process's sandbox containers.
func poolContainers(t testing.TB) []string {
	t.Helper()
	out, err := exec.Command("docker", "ps", "-aq", "--filter", "label="+sandbox.LabelPID+"="+strconv.Itoa(os.Getpid())).Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(out))
}

// TestWarmFailure: a configuration that cannot start is not retried without
// end; the claim gets the error.
func TestWarmFailure(t *testing.T) {
	p := newPool(t, Options{})
	cfg := testConfig(t)
	cfg.Image = "corral-test/no-such-image:missing"
	if err := p.Warm(cfg, 1); err != nil {
		t.Fatal(err)
	}
	_, err := p.Claim(context.Background(), cfg)
	var missing *sandbox.ImageNotFoundError
	if !errors.As(err, &missing) {
		t.Fatalf("claim of a missing image: %v", err)
	}
	if st := p.Stats(); st.Live != 0 || st.Starting != 0 {
		t.Errorf("%+v after the failure", st)
	}
}

// TestGC: the directory of a pool whose owner is gone is removed, with the
// slots in it; a live owner's is kept.
func TestGC(t *testing.T) {
	parent := t.TempDir()
	live, err := New(Options{Backend: docker.Backend, Dir: parent})
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	dead := filepath.Join(parent, dirPrefix+"dead")
	if err := os.MkdirAll(filepath.Join(dead, "slot", "ws", "ro"), 0o755); err != nil {
		t.Fatal(err)
	}
	// A directory a command made read-only does not stop it.
	if err := os.Chmod(filepath.Join(dead, "slot", "ws", "ro"), 0o555); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	labels := sandbox.OwnerLabels("", dead)
	labels[sandbox.LabelPID] = strconv.Itoa(cmd.Process.Pid)
	b, err := json.Marshal(labels)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dead, ownerFile), []byte(b), 0o644); err != nil {
		t.Fatal(err)
	}
	removed, err := GC(context.Background(), parent)
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 1 || removed[0] != dead {
		t.Errorf("GC removed %v, want %s", removed, dead)
	}
	if _, err := os.Stat(dead); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the dead pool's directory stays: %v", err)
	}
	if _, err := os.Stat(live.Dir()); err != nil {
		t.Errorf("the live pool's directory: %v", err)
	}
}

// TestKey: sandboxes of configurations that differ only in what belongs to
// one session are interchangeable; any other difference is another key.
func TestKey(t *testing.T) {
	base := sandbox.Config{Image: "img", Memory: 1 << 30}
	_, k := Key(base)
	same := base
	same.Workspace, same.Session, same.Protect = "/w", "s", []string{"x"}
	if _, k2 := Key(same); k2 != k {
		t.Errorf("workspace, session and protect changed the key")
	}
	for name, c := range map[string]sandbox.Config{
		"image":  {Image: "other", Memory: 1 << 30},
		"memory": {Image: "img", Memory: 2 << 30},
		"env":    {Image: "img", Memory: 1 << 30, Env: []string{"A=1"}},
		"user":   {Image: "img", Memory: 1 << 30, User: "1000:1000"},
		"mounts": {Image: "img", Memory: 1 << 30, ReadOnlyMounts: []string{"/x"}},
	} {
		if _, k2 := Key(c); k2 == k {
			t.Errorf("%s did not change the key", name)
		}
	}
	if _, k2 := Key(sandbox.Config{Image: sandbox.DefaultImage}); k2 != func() string { _, k := Key(sandbox.Config{}); return k }() {
		t.Error("the default image and an empty one are different keys")
	}
}

// TestChecks: what a slot cannot have is refused, and a backend whose
// sandboxes do not mount the workspace from this machine has no pool.
func TestChecks(t *testing.T) {
	p, err := New(Options{Backend: docker.Backend, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := p.Claim(context.Background(), sandbox.Config{Workspace: "/x"}); err == nil || !strings.Contains(err.Error(), "leave Workspace and Source empty") {
		t.Errorf("claim with a workspace: %v", err)
	}
	if err := p.Warm(sandbox.Config{Session: "x"}, 1); err == nil {
		t.Error("warm with a session: no error")
	}
	if _, err := New(Options{Backend: remoteBackend{}}); err == nil || !strings.Contains(err.Error(), "remote backend") {
		t.Errorf("a pool of a backend without host mounts: %v", err)
	}
}

// remoteBackend is a backend whose sandboxes keep their workspace
// elsewhere: only its name is asked.
type remoteBackend struct{ sandbox.Backend }

func (remoteBackend) Name() string { return "remote" }

// TestPacer: waits leave one by one, never closer than 1/rate, and a
// cancelled wait returns its context's error.
func TestPacer(t *testing.T) {
	p := NewPacer(20) // every 50ms
	begin := time.Now()
	for range 4 {
		if err := p.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if d := time.Since(begin); d < 150*time.Millisecond {
		t.Errorf("4 turns at 20/s took %v, want at least 150ms", d)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p.next = time.Now().Add(time.Hour)
	if err := p.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled wait: %v", err)
	}
	if err := NewPacer(0).Wait(context.Background()); err != nil {
		t.Errorf("no limit: %v", err)
	}
}

// deadOwner writes into dir the owner file of a process that is gone.
func deadOwner(t *testing.T, dir string) {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	labels := sandbox.OwnerLabels("", dir)
	labels[sandbox.LabelPID] = strconv.Itoa(cmd.Process.Pid)
	b, err := json.Marshal(labels)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ownerFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestGCPlanted: in a shared directory (world-writable, sticky, as /tmp), a
// pool's directory another user planted — with the owner file of a dead
// process — and a link named as a pool's are neither read nor removed; the
// running user's own dead pool is.
func TestGCPlanted(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to plant a directory as another user")
	}
	parent := t.TempDir()
	if err := os.Chmod(parent, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	planted := filepath.Join(parent, dirPrefix+"planted")
	if err := os.MkdirAll(filepath.Join(planted, "victim"), 0o755); err != nil {
		t.Fatal(err)
	}
	deadOwner(t, planted)
	for _, p := range []string{planted, filepath.Join(planted, "victim"), filepath.Join(planted, ownerFile)} {
		if err := os.Lchown(p, 1001, 1001); err != nil {
			t.Fatal(err)
		}
	}
	target := t.TempDir()
	deadOwner(t, target)
	link := filepath.Join(parent, dirPrefix+"link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	mine := filepath.Join(parent, dirPrefix+"mine")
	if err := os.Mkdir(mine, 0o700); err != nil {
		t.Fatal(err)
	}
	deadOwner(t, mine)

	removed, err := GC(context.Background(), parent)
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 1 || removed[0] != mine {
		t.Errorf("GC removed %v, want only %s", removed, mine)
	}
	for _, p := range []string{filepath.Join(planted, "victim"), filepath.Join(target, ownerFile), link} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("GC touched what another user planted: %v", err)
		}
	}
}

// TestDefaultParent: with no parent given, pools are made in corral's
// private state directory (0700, the running user's), not in the system's
// temporary directory; a parent others may write to without the sticky bit
// is refused.
func TestDefaultParent(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	dir, err := NewDir("")
	if err != nil {
		t.Fatal(err)
	}
	defer RemoveDir(dir)
	want, err := DefaultParent()
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(dir) != want {
		t.Fatalf("NewDir(\"\") = %s, want a directory in %s", dir, want)
	}
	for _, d := range []string{want, dir} {
		fi, err := os.Lstat(d)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o700 || int(fi.Sys().(*syscall.Stat_t).Uid) != os.Geteuid() {
			t.Errorf("%s: mode %v, uid %d; want 0700 and uid %d", d, fi.Mode().Perm(), fi.Sys().(*syscall.Stat_t).Uid, os.Geteuid())
		}
	}
	open := t.TempDir()
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := NewDir(open); err == nil || !strings.Contains(err.Error(), "chmod go-w") {
		t.Errorf("NewDir in a directory anyone may write to: %v, want a refusal that says what to do", err)
	}
	if _, err := GC(context.Background(), open); err == nil {
		t.Error("GC in a directory anyone may write to: no error")
	}
}
