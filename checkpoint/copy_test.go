package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// newCopy makes a copy of ws for session "s1".
func newCopy(t testing.TB, s *Store, opts CopyOptions) *Copy {
	t.Helper()
	if opts.Session == "" {
		opts.Session = "s1"
	}
	c, err := s.NewCopy(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// without returns tree without the given paths.
func without(tree map[string]entry, paths ...string) map[string]entry {
	out := map[string]entry{}
	for k, v := range tree {
		out[k] = v
	}
	for _, p := range paths {
		delete(out, p)
	}
	return out
}

// TestCopyGit: a git workspace's copy holds HEAD's tree (tracked files with
// their modes and links; neither untracked nor ignored ones), a repository
// of its own on the same branch and commit, with the user's refs, borrowing
// the user's objects through CopyReference; the user's repository is left
// exactly as it was.
func TestCopyGit(t *testing.T) {
	ws := newRepo(t)
	hostGit(t, ws, "tag", "v1")
	hostGit(t, ws, "branch", "other")
	before := gitState(t, ws)
	s := open(t, ws)
	c := newCopy(t, s, CopyOptions{})
	info := c.Info()
	if !info.Git || info.Branch != "main" || info.Commit != strings.TrimSpace(hostGit(t, ws, "rev-parse", "HEAD")) {
		t.Errorf("info = %+v", info)
	}
	compareTrees(t, without(readTree(t, ws), "notes.txt", "debug.log"), readTree(t, info.Dir))
	if got := gitState(t, ws); got != before {
		t.Errorf("making a copy changed the repository:\n%s\nwas\n%s", got, before)
	}
	dotgit := filepath.Join(info.Dir, ".git")
	b, err := os.ReadFile(filepath.Join(dotgit, "objects", "info", "alternates"))
	must(t, err)
	if string(b) != CopyReference+"\n" {
		t.Errorf("alternates = %q", b)
	}
	// The copy's repository, its reference where the sandbox mounts it.
	cmd := []string{"-c", "core.hooksPath=/dev/null", "--git-dir", dotgit}
	env := "GIT_ALTERNATE_OBJECT_DIRECTORIES=" + info.Reference
	refs := gitIn(t, info.Dir, env, append(cmd, "for-each-ref", "--format=%(refname)")...)
	for _, want := range []string{"refs/heads/main", "refs/heads/other", "refs/tags/v1"} {
		if !strings.Contains(refs, want) {
			t.Errorf("the copy lacks %s: %s", want, refs)
		}
	}
	if st := gitIn(t, info.Dir, env, append(cmd, "status", "--porcelain")...); st != "" {
		t.Errorf("the copy is not clean: %q", st)
	}
	if _, err := os.Stat(filepath.Join(dotgit, "hooks")); err == nil {
		t.Error("the copy's repository has a hooks directory")
	}
	// Listed, found by a prefix, held by one session at a time.
	all, err := s.Copies(context.Background())
	if err != nil || len(all) != 1 || all[0].Session != "s1" {
		t.Fatalf("Copies = %+v, %v", all, err)
	}
	c2, err := s.OpenCopy(context.Background(), "s")
	if err != nil || c2.Info().BaseTree != info.BaseTree {
		t.Fatalf("OpenCopy: %+v, %v", c2, err)
	}
	release, err := c.Hold(context.Background())
	must(t, err)
	if _, err := c2.Hold(context.Background()); !errors.Is(err, ErrBusy) {
		t.Errorf("a second hold: %v, want ErrBusy", err)
	}
	if _, err := c2.Apply(context.Background(), ApplyOptions{}); !errors.Is(err, ErrBusy) {
		t.Errorf("apply while held: %v, want ErrBusy", err)
	}
	release()
}

// execGit is git in dir with the test's own empty global config.
func execGit(dir string, args ...string) *exec.Cmd {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
	return cmd
}

// gitIn runs git in dir with one more environment variable.
func gitIn(t testing.TB, dir, env string, args ...string) string {
	t.Helper()
	cmd := execGit(dir, args...)
	cmd.Env = append(cmd.Env, env)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestApplyExact: every kind of change a session makes in its copy —
// edits, deletions, renames, new files and directories, a mode change, links
// retargeted, a directory become a file, a binary file — reaches the
// workspace exactly, as unstaged changes (the index, HEAD and the branches
// untouched); ignored files stay as they are on both sides; the copy is gone
// after, and restoring the checkpoint taken before undoes it.
func TestApplyExact(t *testing.T) {
	for _, inGit := range []bool{true, false} {
		t.Run(fmt.Sprintf("git=%v", inGit), func(t *testing.T) {
			ctx := context.Background()
			ws := newRepo(t)
			must(t, os.Remove(filepath.Join(ws, "notes.txt"))) // a clean tree
			if !inGit {
				must(t, os.RemoveAll(filepath.Join(ws, ".git")))
			}
			s := open(t, ws)
			c := newCopy(t, s, CopyOptions{})
			orig := readTree(t, ws)
			var stage string
			if inGit {
				stage = hostGit(t, ws, "ls-files", "--stage") + hostGit(t, ws, "rev-parse", "HEAD", "main")
			}
			mutate(t, c.Info().Dir)
			want := readTree(t, c.Info().Dir)
			delete(want, "trace.log") // ignored: not the session's change to bring
			want["debug.log"] = orig["debug.log"]
			// A new file gets git's modes: executable or not.
			want["notes.txt"] = entry{kind: "file", mode: 0o644, content: want["notes.txt"].content}
			ch, err := c.Changes(ctx)
			must(t, err)
			if len(ch) == 0 {
				t.Fatal("no changes seen in the copy")
			}
			res, err := c.Apply(ctx, ApplyOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !res.Applied || res.Before.ID == 0 {
				t.Errorf("result: %+v", res)
			}
			compareTrees(t, want, readTree(t, ws))
			if inGit {
				if got := hostGit(t, ws, "ls-files", "--stage") + hostGit(t, ws, "rev-parse", "HEAD", "main"); got != stage {
					t.Errorf("the index or HEAD changed:\n%s\nwas\n%s", got, stage)
				}
				st := hostGit(t, ws, "status", "--porcelain")
				for _, want := range []string{" M README.md", " D src/main.go", "?? src/app.go", " M link", " M run.sh", "?? bin.dat", "?? src/util"} {
					if !strings.Contains(st, want) {
						t.Errorf("git status lacks %q:\n%s", want, st)
					}
				}
			}
			if _, err := os.Stat(c.dir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the applied copy is still there: %v", err)
			}
			if all, _ := s.Copies(ctx); len(all) != 0 {
				t.Errorf("copies after apply: %+v", all)
			}
			if _, err := s.Restore(ctx, res.Before.ID, RestoreOptions{}); err != nil {
				t.Fatal(err)
			}
			compareTrees(t, orig, readTree(t, ws))
		})
	}
}

// TestApplyDirty: uncommitted changes in the workspace refuse an apply, which
// then writes nothing; --stash sets them aside with git stash, applies, and
// git stash pop brings them back beside the session's changes.
func TestApplyDirty(t *testing.T) {
	ctx := context.Background()
	ws := newRepo(t) // notes.txt is untracked
	writeFile(t, filepath.Join(ws, "src/main.go"), "package main // the user's\n", 0o644)
	s := open(t, ws)
	c := newCopy(t, s, CopyOptions{})
	writeFile(t, filepath.Join(c.Info().Dir, "README.md"), "the session's\n", 0o644)
	before := readTree(t, ws)
	_, err := c.Apply(ctx, ApplyOptions{})
	var de *DirtyError
	if !errors.As(err, &de) || !errors.Is(err, ErrDirty) || strings.Join(de.Paths, ",") != "notes.txt,src/main.go" {
		t.Fatalf("apply on a dirty tree: %v", err)
	}
	compareTrees(t, before, readTree(t, ws))
	if _, err := c.Apply(ctx, ApplyOptions{DryRun: true}); !errors.Is(err, ErrDirty) {
		t.Errorf("dry run: %v, want ErrDirty", err)
	}
	res, err := c.Apply(ctx, ApplyOptions{Stash: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Stashed == "" || !res.Applied {
		t.Errorf("result: %+v", res)
	}
	if got := hostGit(t, ws, "stash", "list"); !strings.Contains(got, "corral apply s1") {
		t.Errorf("stash list: %q", got)
	}
	if _, err := os.Stat(filepath.Join(ws, "notes.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Error("notes.txt was not stashed")
	}
	hostGit(t, ws, "stash", "pop")
	want := before
	want["notes.txt"] = entry{kind: "file", mode: 0o644, content: want["notes.txt"].content} // as git stash keeps it
	want["README.md"] = entry{kind: "file", mode: 0o644, content: "the session's\n"}
	compareTrees(t, want, readTree(t, ws))
}

// TestApplyConflict: a file the session changed and the user changed too
// (here in a commit, so the tree is clean) refuses the apply, and so does a
// new file of the session where the user has an ignored one; a change of the
// user's elsewhere does not.
func TestApplyConflict(t *testing.T) {
	ctx := context.Background()
	ws := newRepo(t)
	must(t, os.Remove(filepath.Join(ws, "notes.txt")))
	s := open(t, ws)
	c := newCopy(t, s, CopyOptions{})
	dir := c.Info().Dir
	writeFile(t, filepath.Join(dir, "README.md"), "the session's\n", 0o644)
	writeFile(t, filepath.Join(ws, "README.md"), "the user's\n", 0o644)
	writeFile(t, filepath.Join(ws, "src/main.go"), "package main // the user's\n", 0o644)
	hostGit(t, ws, "commit", "-q", "-am", "the user's")
	before := readTree(t, ws)
	_, err := c.Apply(ctx, ApplyOptions{})
	var ce *ConflictError
	if !errors.As(err, &ce) || strings.Join(ce.Paths, ",") != "README.md" {
		t.Fatalf("apply over a change of the user's: %v", err)
	}
	compareTrees(t, before, readTree(t, ws))

	// The session un-ignores and makes debug.log, an ignored file of the user's.
	writeFile(t, filepath.Join(dir, "README.md"), "hello\n", 0o644) // back as copied
	writeFile(t, filepath.Join(dir, ".gitignore"), "build/\n", 0o644)
	writeFile(t, filepath.Join(dir, "debug.log"), "the session's log\n", 0o644)
	_, err = c.Apply(ctx, ApplyOptions{})
	if !errors.As(err, &ce) || strings.Join(ce.Paths, ",") != "debug.log" {
		t.Fatalf("a new file over an ignored one: %v", err)
	}
	compareTrees(t, before, readTree(t, ws))

	must(t, os.Remove(filepath.Join(dir, "debug.log")))
	writeFile(t, filepath.Join(dir, "run.sh"), "#!/bin/sh\necho the session\n", 0o755)
	if _, err := c.Apply(ctx, ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	want := before
	want["run.sh"] = entry{kind: "file", mode: 0o755, content: "#!/bin/sh\necho the session\n"}
	want[".gitignore"] = entry{kind: "file", mode: 0o644, content: "build/\n"}
	compareTrees(t, want, readTree(t, ws))
}

// TestCopyWithUncommitted: the copy holds the user's uncommitted changes and
// untracked files, not the ignored ones; they are not the session's, so an
// apply brings only the session's and does not count them as dirt — unless
// the user changed them again since.
func TestCopyWithUncommitted(t *testing.T) {
	ctx := context.Background()
	ws := newRepo(t)
	writeFile(t, filepath.Join(ws, "README.md"), "the user's, uncommitted\n", 0o644)
	must(t, os.RemoveAll(filepath.Join(ws, "src/util")))
	s := open(t, ws)
	c := newCopy(t, s, CopyOptions{WithUncommitted: true})
	dir := c.Info().Dir
	want := without(readTree(t, ws), "debug.log")
	want["notes.txt"] = entry{kind: "file", mode: 0o644, content: want["notes.txt"].content} // git's modes: executable or not
	compareTrees(t, want, readTree(t, dir))
	if ch, err := c.Changes(ctx); err != nil || len(ch) != 0 {
		t.Fatalf("changes of a fresh copy: %+v, %v", ch, err)
	}
	// In the copy's repository they are uncommitted changes too.
	st := gitIn(t, dir, "GIT_ALTERNATE_OBJECT_DIRECTORIES="+c.Info().Reference, "-c", "core.hooksPath=/dev/null", "--git-dir", filepath.Join(dir, ".git"), "status", "--porcelain")
	for _, want := range []string{" M README.md", " D src/util/util.go", "?? notes.txt"} {
		if !strings.Contains(st, want) {
			t.Errorf("status in the copy lacks %q:\n%s", want, st)
		}
	}
	writeFile(t, filepath.Join(dir, "src/main.go"), "package main // the session's\n", 0o644)
	before := readTree(t, ws)

	writeFile(t, filepath.Join(ws, "notes.txt"), "changed again by the user\n", 0o600)
	if _, err := c.Apply(ctx, ApplyOptions{}); !errors.Is(err, ErrDirty) {
		t.Fatalf("apply after the user changed an uncommitted file again: %v", err)
	}
	writeFile(t, filepath.Join(ws, "notes.txt"), before["notes.txt"].content, 0o600)
	res, err := c.Apply(ctx, ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Changes) != 1 || res.Changes[0].Path != "src/main.go" {
		t.Errorf("changes: %+v", res.Changes)
	}
	want = before
	want["src/main.go"] = entry{kind: "file", mode: 0o644, content: "package main // the session's\n"}
	compareTrees(t, want, readTree(t, ws))
}

// TestCopyPlain: a workspace outside git is copied file by file — modes,
// links as links (never followed), empty directories — leaving out named
// pipes; an apply refuses a workspace changed since, unless --stash, which
// there records the tree as a checkpoint and applies where nothing
// conflicts.
func TestCopyPlain(t *testing.T) {
	ctx := context.Background()
	ws := t.TempDir()
	outside := t.TempDir()
	writeFile(t, filepath.Join(outside, "secret"), "secret\n", 0o600)
	writeFile(t, filepath.Join(ws, "a.txt"), "a\n", 0o644)
	writeFile(t, filepath.Join(ws, "bin/run"), "#!/bin/sh\n", 0o755)
	writeFile(t, filepath.Join(ws, "ro/file"), "read-only dir\n", 0o444)
	must(t, os.Chmod(filepath.Join(ws, "ro"), 0o555))
	t.Cleanup(func() { os.Chmod(filepath.Join(ws, "ro"), 0o755) })
	must(t, os.Mkdir(filepath.Join(ws, "empty"), 0o750))
	must(t, os.Symlink(outside, filepath.Join(ws, "out")))
	must(t, os.Symlink("a.txt", filepath.Join(ws, "link")))
	must(t, syscall.Mkfifo(filepath.Join(ws, "fifo"), 0o644))
	s := open(t, ws)
	c := newCopy(t, s, CopyOptions{})
	dir := c.Info().Dir
	t.Cleanup(func() { os.Chmod(filepath.Join(dir, "ro"), 0o755) })
	must(t, os.Remove(filepath.Join(ws, "fifo"))) // readTree would block on it
	want := readTree(t, ws)
	compareTrees(t, want, readTree(t, dir))
	if fi, err := os.Lstat(filepath.Join(dir, "out")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("a link to a directory was not copied as a link: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "empty")); err != nil || fi.Mode().Perm() != 0o750 {
		t.Errorf("empty directory: %v %v", fi, err)
	}
	if len(c.Info().NotCopied) != 1 || c.Info().NotCopied[0].Path != "fifo" {
		t.Errorf("not copied: %+v", c.Info().NotCopied)
	}

	writeFile(t, filepath.Join(dir, "a.txt"), "the session's\n", 0o644)
	writeFile(t, filepath.Join(ws, "b.txt"), "the user's\n", 0o644)
	if _, err := c.Apply(ctx, ApplyOptions{}); !errors.Is(err, ErrDirty) {
		t.Fatalf("apply over a change of the user's: %v", err)
	}
	res, err := c.Apply(ctx, ApplyOptions{Stash: true})
	if err != nil {
		t.Fatal(err)
	}
	want = readTree(t, ws)
	want["a.txt"] = entry{kind: "file", mode: 0o644, content: "the session's\n"}
	if res.Stashed != "" || res.Before.ID == 0 {
		t.Errorf("result: %+v", res)
	}
	compareTrees(t, want, readTree(t, ws))
}

// TestCopyStateOutsideWorkspace: copies live in the state directory, which
// may not be inside the workspace.
func TestCopyStateOutsideWorkspace(t *testing.T) {
	ws := newRepo(t)
	if _, err := Open(context.Background(), Options{Workspace: ws, StateDir: filepath.Join(ws, "state")}); err == nil {
		t.Fatal("a state directory inside the workspace was taken")
	}
	s := open(t, ws)
	c := newCopy(t, s, CopyOptions{})
	if rel, err := filepath.Rel(ws, c.Info().Dir); err == nil && !strings.HasPrefix(rel, "..") {
		t.Errorf("the copy %s is inside the workspace", c.Info().Dir)
	}
}

// TestCopyOwner: when corral runs as root on a workspace that is another
// user's, the copy is that user's (so commands run as them), and what an
// apply writes is theirs too, not root's.
func TestCopyOwner(t *testing.T) {
	if !asRoot() {
		t.Skip("needs root")
	}
	ctx := context.Background()
	ws := newRepo(t)
	must(t, os.Remove(filepath.Join(ws, "notes.txt")))
	must(t, chownTree(ws, 4321, 4321))
	s := open(t, ws)
	c := newCopy(t, s, CopyOptions{})
	owned := func(p string) {
		t.Helper()
		fi, err := os.Lstat(p)
		must(t, err)
		if uid, gid, _ := fileOwner(fi); uid != 4321 || gid != 4321 {
			t.Errorf("%s belongs to %d:%d", p, uid, gid)
		}
	}
	for _, p := range []string{"", "README.md", "src/main.go", "link", ".git/HEAD"} {
		owned(filepath.Join(c.Info().Dir, p))
	}
	writeFile(t, filepath.Join(c.Info().Dir, "README.md"), "changed\n", 0o644)
	writeFile(t, filepath.Join(c.Info().Dir, "new/dir/file"), "new\n", 0o644)
	must(t, os.Symlink("README.md", filepath.Join(c.Info().Dir, "new/link")))
	if _, err := c.Apply(ctx, ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"README.md", "new", "new/dir", "new/dir/file", "new/link"} {
		owned(filepath.Join(ws, p))
	}
}

// TestCopyReflink: on a filesystem with reflinks (btrfs, XFS made with
// reflink=1), a copy shares its files' blocks: copying 128 MiB takes next to
// no space. It needs such a directory, named by $CORRAL_REFLINK_DIR (e.g. an
// XFS image mounted on a loop device); other filesystems copy the bytes,
// which the other tests cover.
func TestCopyReflink(t *testing.T) {
	base := os.Getenv("CORRAL_REFLINK_DIR")
	if base == "" {
		t.Skip("set CORRAL_REFLINK_DIR to a directory on a filesystem with reflinks")
	}
	dir, err := os.MkdirTemp(base, "reflink-")
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	must(t, os.Mkdir(src, 0o755))
	data := make([]byte, 128<<20)
	for i := range data {
		data[i] = byte(i * 7 % 251)
	}
	writeFile(t, filepath.Join(src, "big.bin"), string(data), 0o644)
	free := func() int64 {
		var st syscall.Statfs_t
		syscall.Sync()
		must(t, syscall.Statfs(dir, &st))
		return int64(st.Bfree) * int64(st.Bsize)
	}
	before := free()
	must(t, os.Mkdir(dst, 0o755))
	must(t, os.Remove(dst)) // copyTree makes it
	if _, err := copyTree(context.Background(), src, dst); err != nil {
		t.Fatal(err)
	}
	used := before - free()
	got, err := os.ReadFile(filepath.Join(dst, "big.bin"))
	must(t, err)
	if string(got) != string(data) {
		t.Fatal("the copy differs")
	}
	if used > 8<<20 {
		t.Errorf("copying 128 MiB took %d MiB: no reflink", used>>20)
	}
	t.Logf("copying 128 MiB took %d KiB", used>>10)
}
