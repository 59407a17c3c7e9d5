package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// needGit fails the test when the host has no git.
func needGit(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("no git on the host")
	}
}

// swapRefDirsScript, run in a sandbox's workspace, makes the refs
// refs/heads/aK/precious (K < n) appear in the shadow's packed-refs, each
// naming an object that is nowhere (so the host refuses them and corral puts
// the shadow's refs back), with refs/heads/aK/precious a directory, and
// swaps each refs/heads/aK, atomically, with a symbolic link to the victim
// directory of the host, back and forth, until its time or count runs out.
const swapRefDirsScript = `
import ctypes, os, sys, time
victim, secs, n = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
libc = ctypes.CDLL(None, use_errno=True)
def xchg(a, b):
    if libc.renameat2(-100, a.encode(), -100, b.encode(), 2) != 0:
        raise OSError(ctypes.get_errno(), 'renameat2')
os.chdir('.git')
fake = '12' * 20
def plant():
    lines = ''.join('%s refs/heads/a%d/precious\n' % (fake, k) for k in range(n))
    with open('packed-refs.tmp', 'w') as f:
        f.write('# pack-refs with: peeled fully-peeled sorted \n' + lines)
    os.rename('packed-refs.tmp', 'packed-refs')
    for k in range(n):
        d, l = 'refs/heads/a%d' % k, 'refs/heads/a%d.link' % k
        for p in (d, l):
            if os.path.isdir(p) and not os.path.islink(p):
                os.makedirs(p + '/precious/x', exist_ok=True)
        if not os.path.lexists(d) and not os.path.lexists(l):
            os.makedirs(d + '/precious/x', exist_ok=True)
        if not os.path.lexists(l):
            os.symlink(victim, l)
        if not os.path.lexists(d):
            os.symlink(victim, d)
end = time.time() + secs
i = 0
while time.time() < end and i < 5000000:
    if i % 2000 == 0:
        try:
            plant()
        except OSError:
            pass
    i += 1
    k = i % n
    try:
        xchg('refs/heads/a%d' % k, 'refs/heads/a%d.link' % k)
    except OSError:
        pass
`

// Class 2: corral puts a shadow's refs back to the host's when it refuses
// them, removing what a command left in their place. A background process
// swaps the directories those refs are in for links to a directory of the
// host, as fast as it can: corral (often root) must remove nothing there.
func TestAttackRemoveThroughLink(t *testing.T) {
	needGit(t)
	cfg := testConfig(t)
	ws := cfg.Workspace
	hostGitT(t, ws, "init", "-q")
	hostGitT(t, ws, "commit", "-q", "--allow-empty", "-m", "one")
	victim := filepath.Join(t.TempDir(), "victim")
	keep := filepath.Join(victim, "precious", "keep")
	if err := os.MkdirAll(filepath.Dir(keep), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keep, []byte("the host's\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := newSandbox(t, cfg)
	if !hasTool(t, c, "python3") {
		t.Fatal("the test image has no python3")
	}
	if err := os.WriteFile(filepath.Join(ws, "swap.py"), []byte(swapRefDirsScript), 0o644); err != nil {
		t.Fatal(err)
	}
	sh(t, c, "(python3 swap.py "+victim+" 40 48 >/dev/null 2>&1 &)")
	for i := 0; i < 150; i++ {
		run(t, c, ExecRequest{Command: "sleep 0.05"})
		if _, err := os.Stat(keep); err != nil {
			t.Fatalf("after %d commands the host's %s is gone (%v): corral removed it through a link a command put in the shadow", i+1, keep, err)
		}
	}
	run(t, c, ExecRequest{Command: "pkill -f swap.py"})
	if out := hostGitT(t, ws, "for-each-ref", "refs/heads"); strings.Contains(out, "precious") {
		t.Errorf("the host took refs to objects it does not have:\n%s", out)
	}
}
