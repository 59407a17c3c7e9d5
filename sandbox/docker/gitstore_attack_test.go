package docker

import (
	"github.com/corralhq/corral/sandbox"

	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
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
		run(t, c, sandbox.ExecRequest{Command: "sleep 0.05"})
		if _, err := os.Stat(keep); err != nil {
			t.Fatalf("after %d commands the host's %s is gone (%v): corral removed it through a link a command put in the shadow", i+1, keep, err)
		}
	}
	run(t, c, sandbox.ExecRequest{Command: "pkill -f swap.py"})
	if out := hostGitT(t, ws, "for-each-ref", "refs/heads"); strings.Contains(out, "precious") {
		t.Errorf("the host took refs to objects it does not have:\n%s", out)
	}
}

// hostGitAs runs git on the host in dir, whoever owns it, and fails the
// test when it fails.
func hostGitAs(t testing.TB, dir string, args ...string) string {
	t.Helper()
	return hostGitT(t, dir, append([]string{"-c", "safe.directory=*"}, args...)...)
}

// userDir makes a directory outside the workspace that belongs to the
// workspace's owner uid, as the user's own files do.
func userDir(t *testing.T, uid int) string {
	t.Helper()
	base := t.TempDir()
	os.Chmod(base, 0o755)
	d := filepath.Join(base, "d")
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(d, uid, uid); err != nil && os.Geteuid() == 0 {
		t.Fatal(err)
	}
	return d
}

// Class 2: a repository a command made in the workspace during a session is
// not shadowed until the next one (the tool says so: git on the host would
// run its config and hooks). The next session shadows it, and corral itself
// then runs git on the host's repository — index-pack and update-ref — to
// take what commands made there: that git must run none of the command's
// hooks, nor write, through the command's commondir or links in objects,
// refs and logs, outside the repository.
func TestAttackEarlierRepository(t *testing.T) {
	needGit(t)
	cfg := testConfig(t)
	ws := cfg.Workspace
	uid := privateWorkspace(t, cfg)
	os.Chmod(filepath.Dir(ws), 0o755) // the owner reaches its workspace
	marks := userDir(t, uid)
	logsVictim, objectsVictim, refsVictim := userDir(t, uid), userDir(t, uid), userDir(t, uid)
	other := userDir(t, uid)
	hostGitAs(t, other, "init", "-q")
	hostGitAs(t, other, "commit", "-q", "--allow-empty", "-m", "the user's other project")
	if os.Geteuid() == 0 {
		exec.Command("chown", "-R", strconv.Itoa(uid)+":"+strconv.Itoa(uid), other).Run()
	}
	otherRefs := hostGitAs(t, other, "for-each-ref")
	otherObjects := countFiles(t, filepath.Join(other, ".git", "objects"))

	// Session one: a command makes repositories and plants what it will.
	c := newSandbox(t, cfg)
	hook := "#!/bin/sh\ntouch " + marks + "/$(basename $0) 2>/dev/null\nexit 0\n"
	if err := os.WriteFile(filepath.Join(ws, "hook.sh"), []byte(hook), 0o755); err != nil {
		t.Fatal(err)
	}
	sh(t, c, `set -e
for r in hook hookspath common logs objs refsdir; do
	mkdir $r && git -C $r init -q && git -C $r commit -q --allow-empty -m one
done
cp hook.sh hook/.git/hooks/reference-transaction
mkdir hookspath-dir && cp hook.sh hookspath-dir/reference-transaction
git -C hookspath config core.hooksPath $PWD/hookspath-dir
echo `+other+`/.git > common/.git/commondir
rm -rf logs/.git/logs && ln -s `+logsVictim+` logs/.git/logs
rm -rf objs/.git/objects && ln -s `+objectsVictim+` objs/.git/objects
rm -rf refsdir/.git/refs && ln -s `+refsVictim+` refsdir/.git/refs`)
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	// Session two: commands commit in each (removing, in the shadow, what
	// would break git there).
	cfg2 := cfg
	cfg2.Session += "-2"
	c2 := newSandbox(t, cfg2)
	for _, cmd := range []string{
		"cd hook && git commit -q --allow-empty -m two",
		"cd hookspath && git -c core.hooksPath=/nonexistent commit -q --allow-empty -m two",
		"cd common && rm .git/commondir && git checkout -q -b evil && git commit -q --allow-empty -m two",
		"cd logs && rm .git/logs && git commit -q --allow-empty -m two",
		"cd objs && git symbolic-ref HEAD refs/heads/evil && git read-tree --empty && git commit -q --allow-empty -m two",
		"cd refsdir && git commit -q --allow-empty -m two",
	} {
		res, out := run(t, c2, sandbox.ExecRequest{Command: "cd " + ws + " && " + cmd})
		t.Logf("%s: exit %d %s; not copied: %v", cmd, res.ExitCode, out, res.NotCopied)
	}
	// What has no link reaches the host, with no hook run.
	for _, r := range []string{"hook", "hookspath"} {
		if got := hostGitAs(t, filepath.Join(ws, r), "log", "--format=%s"); got != "two\none\n" {
			t.Errorf("%s: the commit made inside did not reach the host: %q", r, got)
		}
	}
	if ents, _ := os.ReadDir(marks); len(ents) > 0 {
		t.Errorf("git run by corral on the host ran the hooks a command planted: %v", names(ents))
	}
	if got := hostGitAs(t, other, "for-each-ref"); got != otherRefs {
		t.Errorf("the refs of a repository outside the workspace changed, through a commondir a command wrote:\n%s", got)
	}
	if n := countFiles(t, filepath.Join(other, ".git", "objects")); n != otherObjects {
		t.Errorf("the objects of a repository outside the workspace went from %d files to %d, through a commondir a command wrote", otherObjects, n)
	}
	for what, d := range map[string]string{"logs": logsVictim, "objects": objectsVictim, "refs": refsVictim} {
		if n := countFiles(t, d); n > 0 {
			t.Errorf("git run by corral wrote %d files outside the workspace, through the link a command made as a repository's %s", n, what)
		}
	}
}

// countFiles counts the files under dir (not following links).
func countFiles(t *testing.T, dir string) int {
	n := 0
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			n++
		}
		return nil
	})
	return n
}

func names(ents []fs.DirEntry) []string {
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// malformedScript, run in a sandbox's repository with a case as its
// argument, makes with git hash-object --literally objects git's fsck
// refuses, or that name objects that are nowhere, in a commit on the branch
// named after the case, and prints the object the host must not take.
const malformedScript = `set -e
export GIT_AUTHOR_NAME=a GIT_AUTHOR_EMAIL=a@x GIT_COMMITTER_NAME=a GIT_COMMITTER_EMAIL=a@x
bin() { printf "$(echo $1 | sed 's/../\\x&/g')"; }
tree() { git hash-object -t tree --literally -w --stdin; }
gitmodules() { printf '[submodule "%s"]\n\tpath = x\n\turl = --upload-pack=touch${IFS}/tmp/pwned\n' $1 | git hash-object $2 --stdin; }
packed() { # moves the objects named into a pack
	printf '%s\n' "$@" | git pack-objects -q .git/objects/pack/pack >/dev/null
	for o in "$@"; do rm -f .git/objects/${o:0:2}/${o:2}; done
}
case $1 in
dotgit)
	blob=$(echo hi | git hash-object -w --stdin)
	t=$( (printf '100644 .git\0'; bin $blob) | tree)
	git branch $1 $(git commit-tree $t -m $1); echo $t;;
gitmodules)
	gm=$(gitmodules $1 -w)
	t=$( (printf '100644 .gitmodules\0'; bin $gm) | tree)
	git branch $1 $(git commit-tree $t -m $1); echo $gm;;
split) # the tree in a pack, taken first, the blob loose
	gm=$(gitmodules $1 -w)
	t=$( (printf '100644 .gitmodules\0'; bin $gm) | tree)
	c=$(git commit-tree $t -m $1)
	packed $c $t
	git branch $1 $c; echo $t;;
later) # the tree now, the blob in a later command
	gm=$(gitmodules $1)
	t=$( (printf '100644 .gitmodules\0'; bin $gm) | tree)
	c=$(printf 'tree %s\nauthor a <a@x> 1 +0000\ncommitter a <a@x> 1 +0000\n\n%s\n' $t $1 | git hash-object -t commit --literally -w --stdin)
	echo $c > .git/refs/heads/$1; echo $t;;
blob) # the blob alone, which names nothing
	gitmodules later -w;;
noparent) # a commit whose parent is nowhere
	c=$(printf 'tree %s\nparent %040d\nauthor a <a@x> 1 +0000\ncommitter a <a@x> 1 +0000\n\n%s\n' $(git write-tree) 7 $1 | git hash-object -t commit --literally -w --stdin)
	echo $c > .git/refs/heads/$1; echo $c;;
notree) # a commit whose tree is nowhere
	c=$(printf 'tree %040d\nauthor a <a@x> 1 +0000\ncommitter a <a@x> 1 +0000\n\n%s\n' 7 $1 | git hash-object -t commit --literally -w --stdin)
	echo $c > .git/refs/heads/$1; echo $c;;
esac
`

// Class 2: objects git's fsck refuses — a tree with a .git entry, a
// .gitmodules with a url that is an option, whole or split between a pack
// and a loose object — and a commit whose parent is nowhere are refused:
// the model is told, the host's repository has none of them, no branch
// names them, and git fsck finds nothing wrong there.
func TestAttackMalformedObjects(t *testing.T) {
	needGit(t)
	cfg := testConfig(t)
	ws := cfg.Workspace
	hostGitT(t, ws, "init", "-q")
	hostGitT(t, ws, "commit", "-q", "--allow-empty", "-m", "one")
	c := newSandbox(t, cfg)
	if err := os.WriteFile(filepath.Join(ws, ".malformed.sh"), []byte(malformedScript), 0o644); err != nil {
		t.Fatal(err)
	}
	// "later" again once its .gitmodules blob, alone, is in the host's
	// store.
	for _, cs := range []string{"dotgit", "gitmodules", "split", "later", "blob", "later", "noparent", "notree"} {
		res, out := run(t, c, sandbox.ExecRequest{Command: "bash .malformed.sh " + cs})
		if res.ExitCode != 0 {
			t.Fatalf("%s: the script failed: %s", cs, out)
		}
		if cs == "blob" {
			continue
		}
		obj := clean(out)
		t.Logf("%s: made %s; not copied: %v", cs, obj, res.NotCopied)
		if !slices.ContainsFunc(res.NotCopied, func(s string) bool { return strings.Contains(s, "refused") }) {
			t.Errorf("%s: the model is not told its objects or refs were refused: %v", cs, res.NotCopied)
		}
		if out, err := exec.Command("git", "-C", ws, "cat-file", "-e", obj).CombinedOutput(); err == nil {
			t.Errorf("%s: the host's repository has the object %s: %s", cs, obj, out)
		}
		if out, err := exec.Command("git", "-C", ws, "rev-parse", "-q", "--verify", "refs/heads/"+cs).CombinedOutput(); err == nil {
			t.Errorf("the host's repository has the branch %s: %s", cs, out)
		}
	}
	// Nothing refused is left in the host's store either.
	filepath.WalkDir(filepath.Join(ws, ".git", "objects"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), "tmp_") {
			t.Errorf("left in the host's store: %s", p)
		}
		return nil
	})
	if out, err := exec.Command("git", "-C", ws, "fsck", "--no-dangling").CombinedOutput(); err != nil {
		t.Errorf("git fsck on the host: %v\n%s", err, out)
	}
	// Made right, the same reaches the host.
	sh(t, c, "git -c user.name=a -c user.email=a@x commit -q --allow-empty -m two")
	if got := hostGitT(t, ws, "log", "--format=%s"); got != "two\none\n" {
		t.Errorf("host log after a good commit:\n%s", got)
	}
}

// What git makes in one command reaches the host whatever order corral
// finds it in, now that each pack must name only objects that are there:
// packs that name each other (repack after repack), loose objects that
// name a pack's, a pack that names loose objects. (Not both at once: a
// pack and loose objects that name each other's are refused.)
func TestGitStorePackOrder(t *testing.T) {
	needGit(t)
	cfg := testConfig(t)
	ws := cfg.Workspace
	hostGitT(t, ws, "init", "-q")
	hostGitT(t, ws, "commit", "-q", "--allow-empty", "-m", "one")
	c := newSandbox(t, cfg)
	for i := 0; i < 3; i++ {
		res, out := run(t, c, sandbox.ExecRequest{Command: `set -e
ci() { git -c user.name=a -c user.email=a@x commit -q --allow-empty -m "$1"; }
ci a; ci b; git repack -q -d
ci c; git repack -q -d
ci d; ci e
e=$(git rev-parse HEAD)
echo $e | git pack-objects -q .git/objects/pack/pack >/dev/null
rm -f .git/objects/${e:0:2}/${e:2}`})
		if res.ExitCode != 0 || len(res.NotCopied) > 0 {
			t.Errorf("exit %d: %s; not copied: %v", res.ExitCode, out, res.NotCopied)
		}
	}
	want := strings.Repeat("e\nd\nc\nb\na\n", 3) + "one\n"
	if got := hostGitT(t, ws, "log", "--format=%s"); got != want {
		t.Errorf("host log:\n%s", got)
	}
	hostGitT(t, ws, "fsck", "--no-dangling")
}

// Class 3: refs/corral/ on the host is corral's (the last value of each
// ref deleted): commands neither see it, nor write, overwrite or delete
// there, nor make HEAD name a ref there (the user's commits would go where
// no command sees them, and the next deletion's copy would overwrite them),
// nor take the name refs/corral itself (every later deletion's copy would
// then fail, and with it every change of the same command).
func TestAttackCorralRefs(t *testing.T) {
	needGit(t)
	cfg := testConfig(t)
	ws := cfg.Workspace
	hostGitT(t, ws, "init", "-q", "-b", "main")
	hostGitT(t, ws, "commit", "-q", "--allow-empty", "-m", "one")
	hostGitT(t, ws, "branch", "keep")
	hostGitT(t, ws, "branch", "gone")
	c := newSandbox(t, cfg)
	one := strings.TrimSpace(hostGitT(t, ws, "rev-parse", "main"))
	// Before any deletion (no refs/corral on the host yet), then after.
	for i := 0; i < 2; i++ {
		for _, cmd := range []string{
			"git update-ref refs/corral HEAD",
			"git update-ref -d refs/corral; echo " + one + " refs/corral >> .git/packed-refs",
			"git update-ref refs/corral/deleted/refs/heads/keep HEAD",
			"git update-ref refs/corral/x HEAD",
			"echo " + one + " refs/corral/deleted/refs/heads/packed >> .git/packed-refs",
			"echo 'ref: refs/corral/deleted/refs/heads/keep' > .git/HEAD",
			"echo 'ref: refs/corral/x' > .git/HEAD",
		} {
			res, out := run(t, c, sandbox.ExecRequest{Command: cmd})
			t.Logf("%s: exit %d %s; not copied %v", cmd, res.ExitCode, out, res.NotCopied)
			if got := strings.TrimSpace(hostGitT(t, ws, "symbolic-ref", "HEAD")); got != "refs/heads/main" {
				t.Errorf("after %q the host's HEAD names %s", cmd, got)
				hostGitT(t, ws, "symbolic-ref", "HEAD", "refs/heads/main")
			}
			run(t, c, sandbox.ExecRequest{Command: "git symbolic-ref HEAD refs/heads/main"})
		}
		if i == 0 {
			if got := hostGitT(t, ws, "for-each-ref", "refs/corral"); got != "" {
				t.Errorf("the host's refs/corral:\n%s", got)
			}
			sh(t, c, "git branch -D keep")
		}
	}
	backup := one
	if got := hostGitT(t, ws, "for-each-ref", "--format=%(refname) %(objectname)", "refs/corral"); got != "refs/corral/deleted/refs/heads/keep "+backup+"\n" {
		t.Errorf("the host's refs/corral:\n%s", got)
	}
	// Deleting still works, with its copy.
	sh(t, c, "git branch -D gone")
	if out, err := exec.Command("git", "-C", ws, "rev-parse", "-q", "--verify", "refs/corral/deleted/refs/heads/gone").CombinedOutput(); err != nil {
		t.Errorf("a deletion after those has no copy: %v %s", err, out)
	}
}

// Class 4: what a command leaves in the shadow's store and refs for corral
// to read after it — named pipes where a loose object, a pack, packed-refs,
// the stash list, the alternates file or a ref would be; a pack that is
// not one; a loose object that is not zlib, or that says it is far larger
// than it is; hundreds of packs — neither blocks corral nor stops it from
// taking the next command's work.
func TestAttackStoreDenial(t *testing.T) {
	needGit(t)
	cfg := testConfig(t)
	ws := cfg.Workspace
	hostGitT(t, ws, "init", "-q", "-b", "main")
	hostGitT(t, ws, "commit", "-q", "--allow-empty", "-m", "one")
	c := newSandbox(t, cfg)
	if !hasTool(t, c, "python3") {
		t.Fatal("the test image has no python3")
	}
	id := strings.Repeat("ab", 20)
	n := 1
	commit := func(after string) {
		t.Helper()
		n++
		msg := "c" + strconv.Itoa(n)
		res, out := run(t, c, sandbox.ExecRequest{Command: "git -c user.name=a -c user.email=a@x commit -q --allow-empty -m " + msg})
		if res.ExitCode != 0 {
			t.Fatalf("after %s, a commit fails inside: %s", after, out)
		}
		if got := hostGitT(t, ws, "log", "-1", "--format=%s"); got != msg+"\n" {
			t.Errorf("after %s, the next commit did not reach the host (%q; not copied %v)", after, got, res.NotCopied)
		}
	}
	for _, step := range []struct{ what, make, undo string }{
		{"a named pipe as a loose object", "mkdir -p .git/objects/ab && mkfifo .git/objects/ab/" + id[2:], ""},
		{"a named pipe as a pack", "mkfifo .git/objects/pack/pack-" + id + ".pack", ""},
		// The alternates file is mounted read-only: the step cannot be taken.
		{"a named pipe as the alternates", "! rm .git/objects/info/alternates 2>/dev/null && ! mkfifo .git/objects/info/alternates 2>/dev/null", ""},
		{"a named pipe as packed-refs", "rm -f .git/packed-refs && mkfifo .git/packed-refs", "rm .git/packed-refs; git update-ref refs/heads/main $(git rev-parse main)"},
		{"a named pipe as the stash list", "mkdir -p .git/logs/refs && rm -f .git/logs/refs/stash && mkfifo .git/logs/refs/stash", "rm .git/logs/refs/stash"},
		{"a named pipe as a ref", "mkfifo .git/refs/heads/pipe", "rm .git/refs/heads/pipe"},
		{"a pack that is not one", "head -c 100000 /dev/urandom > .git/objects/pack/pack-" + id + ".pack", ""},
		{"a loose object that is not zlib", "mkdir -p .git/objects/ab && head -c 1000 /dev/urandom > .git/objects/ab/" + id[2:], ""},
		{"a loose object far shorter than it says", `python3 -c "import zlib,os; os.makedirs('.git/objects/ab', exist_ok=True); open('.git/objects/ab/` + id[2:] + `','wb').write(zlib.compress(b'blob 1000000000000000\0short'))"`, ""},
		{"600 packs that are not", "for i in $(seq 1000 1599); do echo x > .git/objects/pack/pack-" + id[:36] + "$i.pack; done", ""},
	} {
		res, out := run(t, c, sandbox.ExecRequest{Command: step.make})
		if res.ExitCode != 0 {
			t.Fatalf("%s: %s", step.what, out)
		}
		t.Logf("%s: not copied %v", step.what, res.NotCopied)
		if step.undo != "" {
			// The command's own git cannot read what it broke: it mends it.
			sh(t, c, step.undo)
		}
		commit(step.what)
	}
	hostGitT(t, ws, "fsck", "--no-dangling")
}

// inPlaceScript rewrites a file in place, same size, and gives it back its
// modification time: its inode, size, mode and mtime are what they were.
const inPlaceScript = `
import os, sys
p, content = sys.argv[1], sys.argv[2].encode() + b'\n'
st = os.stat(p)
assert len(content) == st.st_size, (len(content), st.st_size)
with open(p, 'r+b') as f:
    f.write(content)
os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
`

// Class 5: corral reads a shadow's refs, HEAD and index again only when
// their stat keys changed. A command that rewrites one in place and puts
// its mtime back (touch does) changes only its ctime: corral must still
// see the change after that command, not at a later one's (where it would
// be taken as that one's).
func TestAttackCacheInPlace(t *testing.T) {
	needGit(t)
	cfg := testConfig(t)
	ws := cfg.Workspace
	hostGitT(t, ws, "init", "-q", "-b", "main")
	hostGitT(t, ws, "commit", "-q", "--allow-empty", "-m", "one")
	c := newSandbox(t, cfg)
	if !hasTool(t, c, "python3") {
		t.Fatal("the test image has no python3")
	}
	if err := os.WriteFile(filepath.Join(ws, ".inplace.py"), []byte(inPlaceScript), 0o644); err != nil {
		t.Fatal(err)
	}
	sh(t, c, "git branch x && git -c user.name=a -c user.email=a@x commit -q --allow-empty -m two")
	two := strings.TrimSpace(hostGitT(t, ws, "rev-parse", "main"))
	// refs/heads/x, loose in the shadow, from one to two in place.
	sh(t, c, "python3 .inplace.py .git/refs/heads/x "+two)
	if got := strings.TrimSpace(hostGitT(t, ws, "rev-parse", "x")); got != two {
		t.Errorf("a ref rewritten in place with its mtime put back did not reach the host after its command: x is %s, want %s", got, two)
	}
	// HEAD, the same size, to another branch.
	sh(t, c, "git branch feat && python3 .inplace.py .git/HEAD 'ref: refs/heads/feat'")
	if got := strings.TrimSpace(hostGitT(t, ws, "symbolic-ref", "HEAD")); got != "refs/heads/feat" {
		t.Errorf("HEAD rewritten in place with its mtime put back did not reach the host after its command: it names %s", got)
	}
}

// Class 4: a repository a command made during an earlier session has the
// config that command wrote, here one that includes a named pipe of the
// workspace. The git corral runs there on the host must not block it
// (every later command, and the end of the session, would wait forever):
// it is bounded, and that repository is left alone after, while the
// others are still taken.
func TestAttackEarlierRepositoryPipe(t *testing.T) {
	needGit(t)
	old := gitLimit
	gitLimit = 5 * time.Second
	t.Cleanup(func() { gitLimit = old })
	cfg := testConfig(t)
	ws := cfg.Workspace
	os.Chmod(filepath.Dir(ws), 0o755) // the owner of what commands make reaches it
	hostGitT(t, ws, "init", "-q")
	hostGitT(t, ws, "commit", "-q", "--allow-empty", "-m", "one")
	c := newSandbox(t, cfg)
	sh(t, c, "mkdir inc && cd inc && git init -q && git commit -q --allow-empty -m one && mkfifo ../pipe && git config include.path ../../pipe")
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	cfg2 := cfg
	cfg2.Session += "-2"
	c2 := newSandbox(t, cfg2)
	// Should corral block on the pipe, the pipe is opened (after run's
	// bound has failed the test) so that the test ends.
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		select {
		case <-stop:
		case <-time.After(50 * time.Second):
			if f, err := os.OpenFile(filepath.Join(ws, "pipe"), os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				f.Close()
			}
		}
	}()
	res, out := run(t, c2, sandbox.ExecRequest{Command: "cd " + ws + "/inc && sed -i '/include/,$d' .git/config && git commit -q --allow-empty -m two"})
	t.Logf("exit %d %s; not copied %v", res.ExitCode, out, res.NotCopied)
	if !slices.ContainsFunc(res.NotCopied, func(s string) bool { return strings.Contains(s, "did not end") }) {
		t.Errorf("the model is not told: %v", res.NotCopied)
	}
	for i := 0; i < 3; i++ {
		res, out := run(t, c2, sandbox.ExecRequest{Command: "cd " + ws + " && git commit -q --allow-empty -m c" + strconv.Itoa(i)})
		t.Logf("exit %d %s; not copied %v", res.ExitCode, out, res.NotCopied)
	}
	if got := hostGitT(t, ws, "log", "--format=%s"); got != "c2\nc1\nc0\none\n" {
		t.Errorf("the other repository's commits did not reach the host:\n%s", got)
	}
}

// Class 3: a command cannot hide its change to a tracked file from the
// user's git status and git diff by replacing the commit HEAD names (git
// replace): with refs/replace/HEAD's-id on the host, the user's git would
// show HEAD as holding the command's file, the change nowhere.
func TestAttackReplaceRef(t *testing.T) {
	needGit(t)
	cfg := testConfig(t)
	ws := cfg.Workspace
	hostGitT(t, ws, "init", "-q", "-b", "main")
	os.WriteFile(filepath.Join(ws, "auth.go"), []byte("check()\n"), 0o644)
	hostGitT(t, ws, "add", "auth.go")
	hostGitT(t, ws, "commit", "-q", "-m", "one")
	c := newSandbox(t, cfg)
	res, out := run(t, c, sandbox.ExecRequest{Command: `set -e
echo 'skip()' > auth.go
git add auth.go
r=$(git commit-tree $(git write-tree) -m one)
git replace HEAD $r
git status --porcelain`})
	t.Logf("exit %d %q; not copied %v", res.ExitCode, out, res.NotCopied)
	if out, err := exec.Command("git", "-C", ws, "for-each-ref", "refs/replace").CombinedOutput(); err != nil || len(out) > 0 {
		t.Errorf("the host has a replace ref: %s %v", out, err)
	}
	if st := hostGitT(t, ws, "status", "--porcelain"); !strings.Contains(st, "auth.go") {
		t.Errorf("the command's change to auth.go is hidden from the host's git status: %q", st)
	}
	if !slices.ContainsFunc(res.NotCopied, func(s string) bool { return strings.Contains(s, "refs/replace") }) {
		t.Errorf("the model is not told its replace ref was refused: %v", res.NotCopied)
	}
}

// swapReadDirsScript, run in a sandbox's workspace, swaps .git/refs/heads
// and .git/logs/refs, atomically and back and forth, with links to
// directories of the host that hold a ref file and a stash list naming a
// secret object id, rewriting packed-refs now and then so that corral
// reads the refs again, until its time or count runs out.
const swapReadDirsScript = `
import ctypes, os, sys, time
heads, logs, secs = sys.argv[1], sys.argv[2], float(sys.argv[3])
libc = ctypes.CDLL(None, use_errno=True)
def xchg(a, b):
    libc.renameat2(-100, a.encode(), -100, b.encode(), 2)
os.chdir('.git')
os.makedirs('logs/refs', exist_ok=True)
for d, target in (('refs/heads', heads), ('logs/refs', logs)):
    if not os.path.lexists(d + '.link'):
        os.symlink(target, d + '.link')
packed = open('packed-refs').read()
end = time.time() + secs
i = 0
while time.time() < end and i < 5000000:
    i += 1
    if i % 500 == 0:
        with open('packed-refs.tmp', 'w') as f:
            f.write(packed + '%s refs/tags/t%d\n' % (packed.split()[0] if packed.strip() else '', i))
        os.rename('packed-refs.tmp', 'packed-refs')
    xchg('refs/heads', 'refs/heads.link')
    xchg('logs/refs', 'logs/refs.link')
`

// Class 1: a background process swaps the shadow's refs/heads and
// logs/refs for links to directories of the host holding a ref and a stash
// list that name a secret object id, while corral reads the shadow's refs
// and stash list after each command: the secret must reach neither the
// host's repository nor the shadow.
func TestAttackReadThroughLink(t *testing.T) {
	needGit(t)
	cfg := testConfig(t)
	ws := cfg.Workspace
	hostGitT(t, ws, "init", "-q", "-b", "main")
	hostGitT(t, ws, "commit", "-q", "--allow-empty", "-m", "one")
	hostGitT(t, ws, "pack-refs", "--all")
	head := strings.TrimSpace(hostGitT(t, ws, "rev-parse", "HEAD"))
	secret := "5ec2e7" + strings.Repeat("0", 34)
	heads, logs := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(heads, "main"), []byte(secret+"\n"), 0o600)
	os.WriteFile(filepath.Join(heads, "leak"), []byte(secret+"\n"), 0o600)
	os.WriteFile(filepath.Join(logs, "stash"), []byte(head+" "+secret+" u <u@x> 1 +0000\tsecret\n"), 0o600)
	c := newSandbox(t, cfg)
	if !hasTool(t, c, "python3") {
		t.Fatal("the test image has no python3")
	}
	if err := os.WriteFile(filepath.Join(ws, "swap.py"), []byte(swapReadDirsScript), 0o644); err != nil {
		t.Fatal(err)
	}
	sh(t, c, "(python3 swap.py "+heads+" "+logs+" 30 >/dev/null 2>&1 &)")
	for i := 0; i < 60; i++ {
		run(t, c, sandbox.ExecRequest{Command: "sleep 0.1"})
		if out, err := exec.Command("grep", "-r", "-l", secret[:12], filepath.Join(ws, ".git"), c.shadow().st.Repos[0].Shadow).CombinedOutput(); err == nil {
			t.Fatalf("after %d commands the secret is in %s", i+1, out)
		}
	}
	// The swapping ran all along.
	if out := sh(t, c, "pgrep -f swap.py >/dev/null && ls .git/refs .git/logs"); !strings.Contains(out, "heads.link") || !strings.Contains(out, "refs.link") {
		t.Errorf("the swapping did not run:\n%s", out)
	}
	run(t, c, sandbox.ExecRequest{Command: "pkill -f swap.py"})
}

// Deleting refs/heads/a, then refs/heads/a/b (or the other way round)
// keeps both last values, though their copies' names are in each other's
// way; and the other changes of the same command are taken with them.
func TestGitStoreDeleteNested(t *testing.T) {
	needGit(t)
	cfg := testConfig(t)
	ws := cfg.Workspace
	hostGitT(t, ws, "init", "-q", "-b", "main")
	hostGitT(t, ws, "commit", "-q", "--allow-empty", "-m", "one")
	c := newSandbox(t, cfg)
	ci := "git -c user.name=a -c user.email=a@x commit -q --allow-empty -m "
	for i, cmd := range []string{
		"git branch a", "git branch -D a && " + ci + "two",
		"git branch a/b", "git branch -D a/b && " + ci + "three",
		"git branch c/d", "git branch -D c/d",
		"git branch c", "git branch -D c && " + ci + "four",
	} {
		res, out := run(t, c, sandbox.ExecRequest{Command: cmd})
		if res.ExitCode != 0 || len(res.NotCopied) > 0 {
			t.Errorf("%d %q: exit %d %s; not copied %v", i, cmd, res.ExitCode, out, res.NotCopied)
		}
	}
	if got := hostGitT(t, ws, "log", "--format=%s"); got != "four\nthree\ntwo\none\n" {
		t.Errorf("host log:\n%s", got)
	}
	refs := hostGitT(t, ws, "for-each-ref", "--format=%(refname)", "refs/heads", "refs/corral")
	for _, want := range []string{"refs/heads/a/b", "refs/heads/a\n", "refs/heads/c/d", "refs/heads/c\n"} {
		if !strings.Contains(refs, "/deleted/") || !strings.Contains(refs, want) {
			t.Errorf("no copy of %s:\n%s", strings.TrimSpace(want), refs)
		}
	}
	if strings.Contains(refs, "\nrefs/heads/a") || strings.Contains(refs, "\nrefs/heads/c") {
		t.Errorf("a deleted branch is still on the host:\n%s", refs)
	}
}
