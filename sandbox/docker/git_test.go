package docker

import (
	"context"
	"encoding/json"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corralhq/corral/sandbox"
)

// What a command leaves in the repository for the next container's start to
// look at — a submodule whose config is a named pipe — does not block it.
func TestShadowDoesNotBlock(t *testing.T) {
	ws := t.TempDir()
	mod := filepath.Join(ws, ".git", "modules", "x")
	if err := os.MkdirAll(mod, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mod, "HEAD"), []byte("ref: refs/heads/main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(mod, "config"), 0o644); err != nil {
		t.Skip("no mkfifo:", err)
	}
	done := make(chan *gitShadow, 1)
	go func() {
		s, err := newGitShadow(ws, "t", os.Getuid(), os.Getgid(), nil, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Error(err)
		}
		done <- s
	}()
	select {
	case s := <-done:
		if s == nil || len(s.st.Repos) != 2 {
			t.Fatalf("shadow %+v, want .git and its submodule", s)
		}
		s.close()
	case <-time.After(time.Minute): // only a hang fails
		t.Fatal("newGitShadow blocked on a named pipe")
	}
}

// hostGitT runs git on the host in dir, as the user would, and fails the
// test when it fails.
func hostGitT(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=u", "-c", "user.email=u@x", "-c", "core.fsmonitor=false"}, args...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v on the host: %v\n%s", args, err, out)
	}
	return string(out)
}

// raceScript swaps the shadow's synced files, and the names corral might
// write them through, for symbolic links to a file of the host and for named
// pipes, as fast as it can, until its time or count runs out. What it
// creates it never removes, so that a pipe some writer waits on can still be
// opened to let it go.
const raceScript = `
import os, sys, time
victim, secs = sys.argv[1], float(sys.argv[2])
end = time.time() + secs
names = ['index', 'HEAD', 'packed-refs', 'ORIG_HEAD']
n = 0
while time.time() < end and n < 500000:
    n += 1
    for nm in names:
        for p in ('.git/' + nm + '.corral-tmp', '.git/.' + nm + '.corral-tmp'):
            try:
                if n % 2:
                    os.symlink(victim, p)
                else:
                    os.mkfifo(p)
            except OSError:
                pass
        tmp = '.git/race-%d' % os.getpid()
        try:
            if n % 2:
                os.symlink(victim, tmp)
            else:
                os.mkfifo(tmp)
            os.rename(tmp, '.git/' + nm)
        except OSError:
            pass
`

// A background process of the sandbox swaps the shadow's index, HEAD,
// packed-refs and ORIG_HEAD (and the names a copy could go through) for
// links to a file of the host outside the workspace and for named pipes,
// while commands run and corral copies these files between the shadow and
// the host. corral (often root) neither writes nor reads the host's file,
// and no command hangs.
func TestGitShadowRace(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git on the host")
	}
	cfg := testConfig(t)
	ws := cfg.Workspace
	victim := filepath.Join(t.TempDir(), "victim")
	const want = "the host's file, not the sandbox's\n"
	if err := os.WriteFile(victim, []byte(want), 0o644); err != nil {
		t.Fatal(err)
	}
	hostGitT(t, ws, "init", "-q")
	os.WriteFile(filepath.Join(ws, "f"), []byte("f\n"), 0o644)
	hostGitT(t, ws, "add", "f")
	hostGitT(t, ws, "commit", "-q", "-m", "one")
	hostGitT(t, ws, "pack-refs", "--all")
	hostGitT(t, ws, "commit-graph", "write", "--reachable")
	c := newSandbox(t, cfg)
	sh(t, c, "git cat-file -e HEAD:f") // the host's objects, through the alternate
	if !hasTool(t, c, "python3") {
		t.Skip("no python3 in the image")
	}
	if err := os.WriteFile(filepath.Join(ws, "race.py"), []byte(raceScript), 0o644); err != nil {
		t.Fatal(err)
	}
	sh(t, c, "(python3 race.py "+victim+" 30 >/dev/null 2>&1 &)")
	// If an old corral blocks on a pipe, the pipe is opened so that the test
	// ends, and fails.
	rescue := func() {
		ents, _ := os.ReadDir(c.shadow().st.Repos[0].Shadow)
		for _, e := range ents {
			if e.Type()&fs.ModeNamedPipe != 0 {
				if f, err := os.OpenFile(filepath.Join(c.shadow().st.Repos[0].Shadow, e.Name()), os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
					defer f.Close()
				}
			}
		}
	}
	for i := 0; i < 40; i++ {
		done := make(chan struct{})
		go func() {
			defer close(done)
			c.Exec(context.Background(), sandbox.ExecRequest{Command: "sleep 0.2"})
		}()
		select {
		case <-done:
		case <-time.After(time.Minute):
			t.Errorf("command %d hung (on a named pipe?)", i)
			rescue()
			<-done
		}
		if b, err := os.ReadFile(victim); err != nil || string(b) != want {
			t.Fatalf("after %d commands the host's file %s holds %q (%v): corral wrote through a link in the shadow", i+1, victim, b, err)
		}
		if t.Failed() {
			return
		}
	}
	if fi, err := os.Lstat(victim); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o644 {
		t.Errorf("the host's file is now %v (%v)", fi.Mode(), err)
	}
	// The host's repository is still one git reads.
	if got := hostGitT(t, ws, "log", "--format=%s"); got != "one\n" {
		t.Errorf("host log %q", got)
	}
}

// A command cannot hide its change to a tracked file from the user's git
// status and git diff: skip-worktree and assume-unchanged it sets are
// cleared, and stat data it forged to match a changed file is not trusted.
// A flag the user set on the host stays.
func TestGitShadowHidesNoChange(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git on the host")
	}
	cfg := testConfig(t)
	ws := cfg.Workspace
	hostGitT(t, ws, "init", "-q")
	for _, n := range []string{"f", "g", "h", "k", "m"} {
		os.WriteFile(filepath.Join(ws, n), []byte(n+"\n"), 0o644)
	}
	hostGitT(t, ws, "add", ".")
	hostGitT(t, ws, "commit", "-q", "-m", "one")
	hostGitT(t, ws, "update-index", "--assume-unchanged", "k") // the user's own
	c := newSandbox(t, cfg)
	if !hasTool(t, c, "git") || !hasTool(t, c, "python3") {
		t.Skip("no git or python3 in the image")
	}
	// forge gives h's entry the stat data of h as changed, keeping the
	// object id of what was committed.
	forge := `
import os, struct, hashlib, time
b = bytearray(open('.git/index', 'rb').read())
n = struct.unpack_from('>I', b, 8)[0]
off = 12
for i in range(n):
    flags = struct.unpack_from('>H', b, off + 60)[0]
    fixed = 64 if flags & 0x4000 else 62
    name = bytes(b[off + fixed: off + fixed + (flags & 0xfff)])
    if name == b'h':
        st = os.stat('h')
        mode = struct.unpack_from('>I', b, off + 24)[0]
        struct.pack_into('>IIIIIIIIII', b, off, int(st.st_ctime), st.st_ctime_ns % 10**9,
            int(st.st_mtime), st.st_mtime_ns % 10**9, st.st_dev & 0xffffffff, st.st_ino & 0xffffffff,
            mode, st.st_uid, st.st_gid, st.st_size)
    off += (fixed + (flags & 0xfff) + 8) & ~7
b[-20:] = hashlib.sha1(bytes(b[:-20])).digest()
time.sleep(0.1)  # the index newer than h, so that git does not look again
open('.git/index', 'wb').write(b)
`
	if err := os.WriteFile(filepath.Join(ws, "forge.py"), []byte(forge), 0o644); err != nil {
		t.Fatal(err)
	}
	// skip-worktree makes the index one of version 3, with extended flags.
	t.Logf("in the sandbox:\n%s", sh(t, c, "git add forge.py && "+
		"echo changed >> f && git update-index --skip-worktree f && "+
		"echo changed >> g && git update-index --assume-unchanged g && "+
		"echo changed >> m && git update-index --skip-worktree m && "+
		"printf 'h!\\n' > h && python3 forge.py && git ls-files -v && git status --porcelain"))
	status := hostGitT(t, ws, "status", "--porcelain")
	for _, p := range []string{"f", "g", "h", "m"} {
		if !strings.Contains(status, " M "+p+"\n") {
			t.Errorf("the host's git status does not show %s changed:\n%s", p, status)
		}
	}
	if !strings.Contains(status, "A  forge.py\n") {
		t.Errorf("the command's git add is lost:\n%s", status)
	}
	if d := hostGitT(t, ws, "diff", "--stat"); !strings.Contains(d, "4 files changed") {
		t.Errorf("the host's git diff: %s", d)
	}
	flags := hostGitT(t, ws, "ls-files", "-v")
	for _, p := range []string{"f", "g", "h", "m"} {
		if !strings.Contains(flags, "H "+p+"\n") {
			t.Errorf("the host's index flags %s:\n%s", p, flags)
		}
	}
	if !strings.Contains(flags, "h k\n") {
		t.Errorf("the user's assume-unchanged on k is gone:\n%s", flags)
	}
}

// A shadow directory with a state.json planted in the shared temporary
// directory by anyone is not acted on: corral gc neither copies its files
// into a workspace nor removes what it names.
func TestGCIgnoresPlantedShadow(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git on the host")
	}
	ws, keep, tmp, state := t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir()
	t.Setenv("TMPDIR", tmp)
	t.Setenv("XDG_STATE_HOME", state)
	hostGitT(t, ws, "init", "-q")
	hostGitT(t, ws, "commit", "-q", "--allow-empty", "-m", "one")
	headBefore, _ := os.ReadFile(filepath.Join(ws, ".git", "HEAD"))
	precious := filepath.Join(keep, "precious")
	os.WriteFile(precious, []byte("mine\n"), 0o644)

	planted := filepath.Join(tmp, shadowPrefix+"planted-1")
	shadow := filepath.Join(planted, "r0")
	os.MkdirAll(shadow, 0o755)
	os.WriteFile(filepath.Join(shadow, "HEAD"), []byte("ref: refs/heads/planted\n"), 0o644)
	owner := sandbox.OwnerLabels("planted", ws)
	owner[sandbox.LabelPID] = "0" // a dead session of this host
	st := shadowState{Workspace: ws, Owner: owner, UID: os.Getuid(), GID: os.Getgid(), Made: []string{precious},
		Repos: []*shadowRepo{{Host: filepath.Join(ws, ".git"), Shadow: shadow, HashLen: 20, Base: map[string]syncKey{}}}}
	b, _ := json.Marshal(&st)
	if err := os.WriteFile(filepath.Join(planted, "state.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	repaired, err := repairShadows(slog.New(slog.DiscardHandler))
	if len(repaired) > 0 || err != nil {
		t.Errorf("repairShadows = %v, %v; want nothing", repaired, err)
	}
	if after, _ := os.ReadFile(filepath.Join(ws, ".git", "HEAD")); string(after) != string(headBefore) {
		t.Errorf("the planted HEAD reached the workspace: %q", after)
	}
	if _, err := os.Stat(precious); err != nil {
		t.Errorf("gc removed a file a planted state named: %v", err)
	}
	if _, err := os.Stat(planted); err != nil {
		t.Errorf("gc removed the planted directory: %v", err)
	}
}

// Repositories elsewhere in the workspace than its .git — here a workspace
// with none of its own, holding a clone and a deeper one — are shadowed as
// well: a config or a hook a command plants in them never reaches the host,
// they cannot be moved aside, and a commit made in them does reach it.
func TestGitShadowNested(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git on the host")
	}
	cfg := testConfig(t)
	ws := cfg.Workspace
	marks := t.TempDir()
	var configs []string
	for _, d := range []string{"proj", "a/b/deep"} {
		dir := filepath.Join(ws, filepath.FromSlash(d))
		os.MkdirAll(dir, 0o755)
		hostGitT(t, dir, "init", "-q")
		hostGitT(t, dir, "commit", "-q", "--allow-empty", "-m", "one")
		b, _ := os.ReadFile(filepath.Join(dir, ".git", "config"))
		configs = append(configs, string(b))
	}
	c := newSandbox(t, cfg)
	if !hasTool(t, c, "git") {
		t.Skip("no git in the image")
	}
	for _, d := range []string{"proj", "a/b/deep"} {
		for _, a := range []string{
			"git -C " + d + " config core.fsmonitor 'touch " + marks + "/fsmonitor; false'",
			"mkdir -p " + d + "/.git/hooks && printf '#!/bin/sh\\ntouch " + marks + "/hook\\n' > " + d + "/.git/hooks/post-commit && chmod +x " + d + "/.git/hooks/post-commit",
			"printf '#!/bin/sh\\ntouch " + marks + "/hook\\n' > " + d + "/.git/hooks/pre-commit; chmod +x " + d + "/.git/hooks/pre-commit",
		} {
			run(t, c, sandbox.ExecRequest{Command: a})
		}
	}
	sh(t, c, "git -C proj -c user.name=a -c user.email=a@x -c core.hooksPath=/nonexistent -c core.fsmonitor=false commit -q --allow-empty -m inside")
	for i, d := range []string{"proj", "a/b/deep"} {
		dir := filepath.Join(ws, filepath.FromSlash(d))
		if b, _ := os.ReadFile(filepath.Join(dir, ".git", "config")); string(b) != configs[i] {
			t.Errorf("%s/.git/config changed on the host:\n%s", d, b)
		}
		for _, h := range []string{"post-commit", "pre-commit"} {
			if _, err := os.Lstat(filepath.Join(dir, ".git", "hooks", h)); err == nil {
				t.Errorf("the hook %s reached %s on the host", h, d)
			}
		}
		// The user's git in it runs nothing of the command's.
		cmd := exec.Command("git", "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-q", "--allow-empty", "-m", "user")
		cmd.Dir = dir
		cmd.CombinedOutput()
		exec.Command("git", "-C", dir, "status").CombinedOutput()
	}
	if ents, _ := os.ReadDir(marks); len(ents) > 0 {
		t.Errorf("git on the host ran what a command planted: %v", ents)
	}
	if got := hostGitT(t, filepath.Join(ws, "proj"), "log", "--format=%s"); !strings.Contains(got, "inside\none") {
		t.Errorf("the commit made inside did not reach the host: %q", got)
	}
	for _, d := range []string{"proj", "a/b/deep", "a"} {
		if res, out := run(t, c, sandbox.ExecRequest{Command: "mv " + d + " moved"}); res.ExitCode == 0 {
			t.Errorf("%s could be moved aside (and replaced by one with a hook): %s", d, out)
		}
	}
}

// checkIndex reads and rewrites every index version git writes: with
// extended flags (version 3) and with compressed paths (version 4), the
// flags it clears are cleared on the right entries, the rest kept, and git
// reads the result.
func TestCheckIndexVersions(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git on the host")
	}
	for _, version := range []string{"2", "3", "4"} {
		t.Run("v"+version, func(t *testing.T) {
			ws := t.TempDir()
			hostGitT(t, ws, "init", "-q")
			for _, n := range []string{"a/one", "a/two", "b", "c/deep/three"} {
				os.MkdirAll(filepath.Join(ws, filepath.Dir(n)), 0o755)
				os.WriteFile(filepath.Join(ws, n), []byte(n), 0o644)
			}
			hostGitT(t, ws, "add", ".")
			hostGitT(t, ws, "update-index", "--index-version", version)
			hostGitT(t, ws, "update-index", "--assume-unchanged", "b")
			hostIndex, err := os.ReadFile(filepath.Join(ws, ".git", "index"))
			if err != nil {
				t.Fatal(err)
			}
			hostGitT(t, ws, "update-index", "--assume-unchanged", "a/two")
			os.WriteFile(filepath.Join(ws, "a/one"), []byte("changed"), 0o644)
			hostGitT(t, ws, "add", "a/one")
			if version != "2" {
				hostGitT(t, ws, "update-index", "--skip-worktree", "a/one", "c/deep/three")
			}
			b, _ := os.ReadFile(filepath.Join(ws, ".git", "index"))
			out, err := checkIndex(b, 20, nil, hostIndex)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(ws, ".git", "index"), out, 0o644); err != nil {
				t.Fatal(err)
			}
			got := hostGitT(t, ws, "ls-files", "-v")
			if want := "H a/one\nH a/two\nh b\nH c/deep/three\n"; got != want {
				t.Errorf("ls-files -v:\n%s\nwant\n%s", got, want)
			}
			// The stat data of a/one, changed, is not trusted; that of the
			// others, the same as the host's once the flags are cleared, is
			// kept.
			entries, _, _, err := parseIndex(out, 20)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				zero := allZero(out[e.off : e.off+24])
				if (e.path == "a/one") != zero {
					t.Errorf("%s: stat data zeroed %v", e.path, zero)
				}
			}
		})
	}
}

// A command leaves a repository in the workspace whose objects is a
// symbolic link to a directory of the host outside it (here one like
// /var/lib/dpkg, whose info/ holds scripts root runs). The next session,
// corral run as root on the user's workspace, shadows that repository: it
// must not give the host's objects/info (or anything else through the
// link) to the workspace's owner, nor make directories there.
func TestGitShadowNestedObjectsLink(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root gives files away: as the user corral chowns nothing")
	}
	cfg := testConfig(t)
	ws := cfg.Workspace
	if err := os.Chown(ws, 1001, 1001); err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(t.TempDir(), "dpkg")
	if err := os.MkdirAll(filepath.Join(victim, "info"), 0o755); err != nil {
		t.Fatal(err)
	}
	c := newSandbox(t, cfg)
	// The hostile steps, as a command writes them.
	sh(t, c, "mkdir -p sub/.git other/.git && printf 'ref: refs/heads/main\\n' | tee sub/.git/HEAD > other/.git/HEAD && "+
		"ln -s "+victim+" sub/.git/objects && ln -s "+victim+" other/.git/refs && ln -s "+victim+" other/.git/logs")
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The next session on the workspace.
	cfg2 := cfg
	cfg2.Session += "-2"
	c2, err := New(cfg2)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	startErr := c2.Start(ctx)
	for _, p := range []string{victim, filepath.Join(victim, "info")} {
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != 0 || st.Gid != 0 {
			t.Errorf("%s now belongs to %d:%d: corral (root) gave it away through a link a command made in the workspace", p, st.Uid, st.Gid)
		}
	}
	if ents, _ := os.ReadDir(victim); len(ents) != 1 {
		t.Errorf("corral made %v in the host's directory through a link", ents)
	}
	if startErr != nil {
		t.Fatalf("the next session does not start: %v", startErr)
	}
	// The repository still works as one inside, its objects a link.
	sh(t, c2, "test -L sub/.git/objects || test -d sub/.git/objects")
}

// copyRaceScript, run in a sandbox, turns sub/.git/d back and forth
// between a directory and a symbolic link to a directory of the host,
// until its time or count runs out.
const copyRaceScript = `
import os, sys, time, random
target, secs = sys.argv[1], float(sys.argv[2])
os.chdir('sub/.git')
end = time.time() + secs
n = 0
while time.time() < end and n < 1000000:
    n += 1
    try:
        os.rename('d', 'd.real')
        os.symlink(target, 'd')
        time.sleep(random.random() / 2000)
        os.unlink('d')
        os.rename('d.real', 'd')
        time.sleep(random.random() / 2000)
    except OSError:
        pass
`

// A command of a session still running on the workspace turns a directory
// of a repository it made there back and forth into a link to a directory
// of the host, while another session starts and copies that repository into
// its shadow (which its commands read). corral never copies what is behind
// the link.
func TestGitShadowCopyRace(t *testing.T) {
	cfg := testConfig(t)
	ws := cfg.Workspace
	uid, gid := os.Getuid(), os.Getgid()
	if uid == 0 {
		uid, gid = 1001, 1001
		if err := os.Chown(ws, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	secret := filepath.Join(t.TempDir(), "secret")
	const word = "the host's secret"
	if err := os.MkdirAll(secret, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(secret, "key"), []byte(word), 0o600); err != nil {
		t.Fatal(err)
	}
	c := newSandbox(t, cfg)
	if !hasTool(t, c, "python3") {
		t.Skip("no python3 in the image")
	}
	sh(t, c, "mkdir -p sub/.git/d && printf 'ref: refs/heads/main\\n' > sub/.git/HEAD && echo x > sub/.git/d/f")
	if err := os.WriteFile(filepath.Join(ws, "race.py"), []byte(copyRaceScript), 0o644); err != nil {
		t.Fatal(err)
	}
	sh(t, c, "(python3 race.py "+secret+" 25 >/dev/null 2>&1 &)")
	log := slog.New(slog.DiscardHandler)
	end := time.Now().Add(20 * time.Second)
	for i := 0; i < 3000 && time.Now().Before(end); i++ {
		s, err := newGitShadow(ws, "race", uid, gid, nil, log)
		if err != nil {
			continue
		}
		var leaked []string
		filepath.WalkDir(s.dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				if b, _ := os.ReadFile(p); strings.Contains(string(b), word) {
					leaked = append(leaked, p)
				}
			}
			return nil
		})
		s.close()
		if len(leaked) > 0 {
			t.Fatalf("start %d copied the host's file into the shadow, where commands read it: %v", i+1, leaked)
		}
	}
}

// forgeTreeScript rewrites .git/index with its own entries but the cache
// tree (the TREE extension) of /tmp/evil.idx.
const forgeTreeScript = `
import struct, hashlib
def split(b):
    n = struct.unpack('>I', b[8:12])[0]
    off = 12
    for _ in range(n):
        nl = struct.unpack('>H', b[off+60:off+62])[0] & 0xfff
        off += (62 + nl + 8) & ~7
    return b[:off], b[off:-20]
good, _ = split(open('.git/index', 'rb').read())
_, exts = split(open('/tmp/evil.idx', 'rb').read())
out, i = good, 0
while i < len(exts):
    ln = struct.unpack('>I', exts[i+4:i+8])[0]
    if exts[i:i+4] == b'TREE':
        out += exts[i:i+8+ln]
    i += 8 + ln
open('.git/index', 'wb').write(out + hashlib.sha1(out).digest())
`

// A command writes an index whose entries are the host's but whose cache
// tree says src/ is a tree of its own (another src/a.txt). git status shows
// nothing; the user's next commit of another change writes the trees from
// the cache tree, so it would carry the command's src/a.txt, unseen. The
// cache tree does not reach the host.
func TestGitShadowForgedCacheTree(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git on the host")
	}
	cfg := testConfig(t)
	ws := cfg.Workspace
	hostGitT(t, ws, "init", "-q")
	for n, body := range map[string]string{"src/a.txt": "good\n", "docs/d.txt": "doc\n"} {
		os.MkdirAll(filepath.Join(ws, filepath.Dir(n)), 0o755)
		os.WriteFile(filepath.Join(ws, n), []byte(body), 0o644)
	}
	hostGitT(t, ws, "add", ".")
	hostGitT(t, ws, "commit", "-q", "-m", "one")
	c := newSandbox(t, cfg)
	if !hasTool(t, c, "git") || !hasTool(t, c, "python3") {
		t.Skip("no git or python3 in the image")
	}
	if err := os.WriteFile(filepath.Join(ws, ".forge.py"), []byte(forgeTreeScript), 0o644); err != nil {
		t.Fatal(err)
	}
	sh(t, c, `set -e
export GIT_INDEX_FILE=/tmp/evil.idx
git read-tree HEAD
blob=$(echo evil | git hash-object -w --stdin)
git update-index --cacheinfo 100644,$blob,src/a.txt
git write-tree >/dev/null
unset GIT_INDEX_FILE
python3 .forge.py
rm .forge.py`)
	if st := hostGitT(t, ws, "status", "--porcelain"); st != "" {
		t.Fatalf("the host's status is not clean: %q", st)
	}
	// The user changes docs/ and commits.
	os.WriteFile(filepath.Join(ws, "docs", "d.txt"), []byte("doc 2\n"), 0o644)
	hostGitT(t, ws, "add", "docs/d.txt")
	hostGitT(t, ws, "commit", "-q", "-m", "user")
	if got := hostGitT(t, ws, "show", "HEAD:src/a.txt"); got != "good\n" {
		t.Errorf("the user's commit holds src/a.txt %q, the command's, that no status or diff showed", got)
	}
}

// A command leaves a repository 300 directories deep in the workspace (and
// could list submodules as deep in its index). The next session must not
// make a mount of every directory down to it: the mounts of every later
// session's container would have no bound.
func TestGitShadowPinBounded(t *testing.T) {
	ws := t.TempDir()
	deep := filepath.Join(ws, strings.Repeat("d"+string(filepath.Separator), 300))
	if err := os.MkdirAll(filepath.Join(deep, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(deep, ".git", "HEAD"), []byte("ref: refs/heads/main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := newGitShadow(ws, "deep", os.Getuid(), os.Getgid(), nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	if n := len(s.mounts); n > 100 {
		t.Errorf("%d mounts for one repository deep in the workspace", n)
	}
}
