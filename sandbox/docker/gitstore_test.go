package docker

import (
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/corralhq/corral/sandbox"
)

// forgeScript, run in a sandbox, overwrites the loose object of the blob
// named by argv[1] with other content under the same name, the way a
// command would replace the repository's history behind the user's back.
const forgeScript = `
import os, sys, zlib
oid = sys.argv[1]
p = '.git/objects/%s/%s' % (oid[:2], oid[2:])
body = b'FORGED CONTENT\n'
os.makedirs(os.path.dirname(p), exist_ok=True)
try:
    os.chmod(p, 0o644)
    os.unlink(p)
except OSError:
    pass
open(p, 'wb').write(zlib.compress(b'blob %d\0' % len(body) + body))
`

// Class 4 and 1: a command cannot forge, delete or redirect the host's
// objects, refs or reflogs; what it makes with git reaches the host checked.
func TestGitStoreHostile(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("no git on the host")
	}
	cfg := testConfig(t)
	ws := cfg.Workspace
	hostGitT(t, ws, "init", "-q", "-b", "main")
	os.WriteFile(filepath.Join(ws, "f"), []byte("original\n"), 0o644)
	hostGitT(t, ws, "add", "f")
	hostGitT(t, ws, "commit", "-q", "-m", "one")
	hostGitT(t, ws, "branch", "keep")
	hostGitT(t, ws, "tag", "v1")
	// The object is loose on the host, as after most commits.
	blob := strings.TrimSpace(hostGitT(t, ws, "rev-parse", "HEAD:f"))
	victim := filepath.Join(t.TempDir(), "victim")
	const want = "a file of the host\n"
	os.WriteFile(victim, []byte(want), 0o644)

	c := newSandbox(t, cfg)
	if !hasTool(t, c, "git") || !hasTool(t, c, "python3") {
		t.Fatal("the test image has no git or python3")
	}
	os.WriteFile(filepath.Join(ws, "forge.py"), []byte(forgeScript), 0o644)
	// Hostile steps, written where the policy does not look.
	sh(t, c, "python3 forge.py "+blob)
	run(t, c, sandbox.ExecRequest{Command: "rm -rf .git/refs/heads .git/packed-refs; rm -rf .git/logs && mkdir -p .git/logs && ln -s " + victim + " .git/logs/HEAD"})
	run(t, c, sandbox.ExecRequest{Command: "find .git/objects -type f ! -path '*/info/*' -delete"})

	// The host's history is whole and its own.
	if got := hostGitT(t, ws, "cat-file", "-p", blob); got != "original\n" {
		t.Errorf("the host's blob %s now reads %q: a command replaced it", blob, got)
	}
	// Removing a ref's file is what git branch -D does, and reaches the
	// host as that, but for the branch HEAD names, which git never deletes;
	// the last value of each deleted ref is kept where commands cannot go.
	if got := hostGitT(t, ws, "for-each-ref", "--format=%(refname)"); got != "refs/corral/deleted/refs/heads/keep\nrefs/corral/deleted/refs/tags/v1\nrefs/heads/main\n" {
		t.Errorf("the host's refs are now:\n%s", got)
	}
	if out := sh(t, c, "git for-each-ref refs/corral | wc -l"); out != "0" {
		t.Errorf("commands see corral's refs: %s", out)
	}
	hostGitT(t, ws, "fsck", "--no-dangling")
	// The user's next commit writes its reflog where the host's repository
	// keeps it, not through a link a command made.
	os.WriteFile(filepath.Join(ws, "g"), []byte("g\n"), 0o644)
	hostGitT(t, ws, "add", "g")
	hostGitT(t, ws, "commit", "-q", "-m", "by the user")
	if b, _ := os.ReadFile(victim); string(b) != want {
		t.Errorf("the host's file %s now holds %q: git on the host wrote through a link a command made", victim, b)
	}

	// The shadow's alternate cannot be taken away: git inside keeps seeing
	// the host's objects within the command that tries.
	sh(t, c, "rm -f .git/objects/info/alternates; echo /tmp > .git/objects/info/alternates; git cat-file -e HEAD")

	// What git in the sandbox makes reaches the host, loose and packed,
	// and the user's commit reaches the sandbox.
	sh(t, c, "rm .git/logs/HEAD && git checkout -q main && git reset -q --hard && git log -1 --format=%s | grep -qx 'by the user'")
	sh(t, c, "git -c user.name=a -c user.email=a@x commit -q --allow-empty -m two && git tag v2 && git tag v1 && git tag -d v1")
	sh(t, c, "echo x >> f && git stash -q && echo y >> f && git stash -q && git gc -q")
	sh(t, c, "git -c user.name=a -c user.email=a@x commit -q --allow-empty -m three")
	if got := hostGitT(t, ws, "log", "--format=%s"); got != "three\ntwo\nby the user\none\n" {
		t.Errorf("host log:\n%s", got)
	}
	if got := hostGitT(t, ws, "for-each-ref", "--format=%(refname)", "refs/heads", "refs/tags", "refs/stash"); got != "refs/heads/main\nrefs/stash\nrefs/tags/v2\n" {
		t.Errorf("the host's refs are now:\n%s", got)
	}
	if got := hostGitT(t, ws, "stash", "list", "--format=%gd"); got != "stash@{0}\nstash@{1}\n" {
		t.Errorf("the host's stash list:\n%s", got)
	}
	hostGitT(t, ws, "fsck", "--no-dangling")

	// An object under a name that is not its content's hash, and a ref to
	// an object that is nowhere, are refused; the host's ref stays.
	fake := strings.Repeat("ab", 20)
	sh(t, c, "python3 forge.py "+fake+" && echo "+strings.Repeat("cd", 20)+" > .git/refs/heads/main")
	if out, err := exec.Command("git", "-C", ws, "cat-file", "-e", fake).CombinedOutput(); err == nil {
		t.Errorf("the host has an object %s whose content hashes otherwise: %s", fake, out)
	}
	if got := hostGitT(t, ws, "log", "-1", "--format=%s"); got != "three\n" {
		t.Errorf("host main is now %q", got)
	}
	if out := sh(t, c, "git log -1 --format=%s"); out != "three" {
		t.Errorf("the refused ref was not put back in the sandbox: %q", out)
	}
}

// storeRaceScript, run in a sandbox, turns a loose object file and a pack
// of the shadow's store back and forth between a regular file and a link
// to a file of the host (a loose object and a pack of a private repository
// there), or a named pipe, until its time or count runs out.
const storeRaceScript = `
import os, sys, time, random
loose, pack, secs = sys.argv[1], sys.argv[2], float(sys.argv[3])
os.makedirs('.git/objects/' + os.path.basename(os.path.dirname(loose)), exist_ok=True)
mine = '.git/objects/%s/%s' % (os.path.basename(os.path.dirname(loose)), os.path.basename(loose))
os.makedirs('.git/objects/pack', exist_ok=True)
mypack = '.git/objects/pack/' + os.path.basename(pack)
end = time.time() + secs
n = 0
while time.time() < end and n < 1000000:
    n += 1
    for p, target in ((mine, loose), (mypack, pack)):
        try:
            os.unlink(p)
        except OSError:
            pass
        try:
            if random.random() < 0.2:
                os.mkfifo(p)
            else:
                os.symlink(target, p)
        except OSError:
            pass
    time.sleep(random.random() / 2000)
`

// Class 2: a command that swaps the objects it made for links to a
// repository of the host only corral's user may read (or for named pipes)
// while corral takes them in gets none of that repository's objects into
// the workspace's, where it could read them, and corral never hangs.
func TestGitStoreRace(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("no git on the host")
	}
	private := filepath.Join(t.TempDir(), "private")
	os.Mkdir(private, 0o700)
	hostGitT(t, private, "init", "-q")
	os.WriteFile(filepath.Join(private, "secret"), []byte("a secret of the host\n"), 0o600)
	hostGitT(t, private, "add", "secret")
	hostGitT(t, private, "commit", "-q", "-m", "secret")
	secret := strings.TrimSpace(hostGitT(t, private, "rev-parse", "HEAD:secret"))
	loose := filepath.Join(private, ".git", "objects", secret[:2], secret[2:])
	// A pack of the same objects, beside the loose ones.
	packName := strings.TrimSpace(hostGitT(t, private, "pack-objects", "-q", "--all", filepath.Join(private, ".git", "objects", "pack", "pack")))
	pack := filepath.Join(private, ".git", "objects", "pack", "pack-"+packName+".pack")
	if _, err := os.Stat(pack); err != nil {
		t.Fatal(err)
	}

	cfg := testConfig(t)
	ws := cfg.Workspace
	hostGitT(t, ws, "init", "-q")
	hostGitT(t, ws, "commit", "-q", "--allow-empty", "-m", "one")
	c := newSandbox(t, cfg)
	if !hasTool(t, c, "python3") {
		t.Fatal("the test image has no python3")
	}
	os.WriteFile(filepath.Join(ws, "race.py"), []byte(storeRaceScript), 0o644)
	sh(t, c, "(python3 race.py "+loose+" "+pack+" 20 >/dev/null 2>&1 &)")
	for i := 0; i < 30; i++ {
		res, _ := run(t, c, sandbox.ExecRequest{Command: "sleep 0.1"})
		if res.TimedOut {
			t.Fatalf("command %d timed out", i)
		}
		if out, err := exec.Command("git", "-C", ws, "cat-file", "-e", secret).CombinedOutput(); err == nil {
			t.Fatalf("after %d commands the workspace's repository has the host's private object %s: corral or git on the host read it through a link (%s)", i+1, secret, out)
		}
	}
	run(t, c, sandbox.ExecRequest{Command: "pkill -f race.py"})
	hostGitT(t, ws, "fsck", "--no-dangling")
}

// BenchmarkShadowSync: what the shadow costs after a command that changed
// nothing in the repository (every command), for a repository of a few refs
// and one of 10,000 (tags, loose on the host), against the part that was
// there before the shadow had its own store (HEAD, ORIG_HEAD, index).
//
//	go test ./sandbox -run XXX -bench ShadowSync -benchtime 2000x
func BenchmarkShadowSync(b *testing.B) {
	if _, err := exec.LookPath("git"); err != nil {
		b.Fatal("no git on the host")
	}
	for _, n := range []int{10, 10_000} {
		ws := b.TempDir()
		b.Setenv("XDG_STATE_HOME", b.TempDir())
		hostGitT(b, ws, "init", "-q")
		hostGitT(b, ws, "commit", "-q", "--allow-empty", "-m", "one")
		head := strings.TrimSpace(hostGitT(b, ws, "rev-parse", "HEAD"))
		os.MkdirAll(filepath.Join(ws, ".git", "refs", "tags"), 0o755)
		for i := range n {
			os.WriteFile(filepath.Join(ws, ".git", "refs", "tags", "t"+strconv.Itoa(i)), []byte(head+"\n"), 0o644)
		}
		s, err := newGitShadow(ws, "bench", os.Getuid(), os.Getgid(), nil, slog.New(slog.DiscardHandler))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("refs=%d/files", n), func(b *testing.B) {
			r := s.st.Repos[0]
			for b.Loop() {
				hd, sd, _ := s.openRepo(r)
				for _, name := range gitSynced {
					s.push(r, hd, sd, name)
				}
				hd.close()
				sd.close()
			}
		})
		b.Run(fmt.Sprintf("refs=%d/all", n), func(b *testing.B) {
			for b.Loop() {
				s.syncIn()
				s.syncOut()
			}
		})
		s.close()
	}
}
