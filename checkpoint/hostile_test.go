package checkpoint

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestHostileRepository: a workspace whose repository names programs
// everywhere git looks for one — a clean and smudge filter through
// .gitattributes, core.fsmonitor, hooks, an included config file inside the
// workspace (which a command in the sandbox could write), gpg signing, an
// external diff, a pager — must not make corral's git run any of them, in a
// checkpoint, a diff, a restore, the disk usage or a gc.
func TestHostileRepository(t *testing.T) {
	ctx := context.Background()
	ws := newRepo(t)
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	prog := filepath.Join(dir, "evil.sh")
	writeFile(t, prog, "#!/bin/sh\necho \"$0 $*\" >> "+marker+"\ncat\n", 0o755)
	gitDir := filepath.Join(ws, ".git")
	// Hooks, in .git/hooks and in a hooks directory inside the workspace.
	for _, hooks := range []string{filepath.Join(gitDir, "hooks"), filepath.Join(ws, "myhooks")} {
		for _, h := range []string{"reference-transaction", "post-index-change", "pre-commit", "post-commit", "pre-auto-gc", "post-checkout"} {
			writeFile(t, filepath.Join(hooks, h), "#!/bin/sh\necho hook "+h+" >> "+marker+"\n", 0o755)
		}
	}
	// Config the sandbox could write: a file in the workspace the repository's
	// config includes.
	writeFile(t, filepath.Join(ws, "evil.gitconfig"), `[core]
	fsmonitor = `+prog+`
	hooksPath = `+filepath.Join(ws, "myhooks")+`
	pager = `+prog+`
[filter "evil"]
	clean = `+prog+` clean
	smudge = `+prog+` smudge
	process = `+prog+` process
	required = true
[diff]
	external = `+prog+`
[gpg]
	program = `+prog+`
[commit]
	gpgSign = true
`, 0o644)
	f, err := os.OpenFile(filepath.Join(gitDir, "config"), os.O_APPEND|os.O_WRONLY, 0)
	must(t, err)
	_, err = f.WriteString("[include]\n\tpath = ../evil.gitconfig\n")
	must(t, err)
	must(t, f.Close())
	writeFile(t, filepath.Join(ws, ".gitattributes"), "* filter=evil diff=evil\n", 0o644)
	writeFile(t, filepath.Join(gitDir, "info", "attributes"), "* filter=evil\n", 0o644)

	// The trap is armed: the user's own git runs the programs.
	cmd := exec.Command("git", "status")
	cmd.Dir = ws
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	_ = cmd.Run()
	writeFile(t, filepath.Join(ws, "README.md"), "armed\n", 0o644)
	cmd = exec.Command("git", "stash", "create")
	cmd.Dir = ws
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	_ = cmd.Run()
	if _, err := os.Stat(marker); err != nil {
		t.Fatal("the hostile repository does not make plain git run its programs; the test proves nothing")
	}
	must(t, os.Remove(marker))
	writeFile(t, filepath.Join(ws, "README.md"), "armed, then checkpointed\n", 0o644)

	s := open(t, ws)
	r, err := s.Begin(ctx, "s")
	must(t, err)
	c1, err := r.Checkpoint(ctx, Call{Tool: "bash"})
	must(t, err)
	writeFile(t, filepath.Join(ws, "README.md"), "changed\n", 0o644)
	writeFile(t, filepath.Join(ws, "new.txt"), "new\n", 0o644)
	_, err = r.Checkpoint(ctx, Call{Tool: "bash"})
	must(t, err)
	var b bytes.Buffer
	must(t, s.Diff(ctx, &b, c1.ID, Worktree))
	_, err = s.DiskUsage(ctx)
	must(t, err)
	must(t, r.Close())
	_, err = s.Restore(ctx, c1.ID, RestoreOptions{})
	must(t, err)
	_, err = GC(ctx, GCOptions{StateDir: filepath.Dir(s.dir), Keep: 1})
	must(t, err)
	if got, err := os.ReadFile(marker); err == nil {
		t.Fatalf("corral's git ran the repository's programs:\n%s", got)
	}
	// Recorded as on disk, not through the clean filter.
	if got, _ := os.ReadFile(filepath.Join(ws, "README.md")); string(got) != "armed, then checkpointed\n" {
		t.Errorf("restored README.md: %q", got)
	}
	if !strings.Contains(b.String(), "+changed") {
		t.Errorf("diff:\n%s", b.String())
	}
}

// TestFilteredRepository: where the user's git stores what a filter or a
// line-ending conversion makes of a file (as Git LFS or text=auto do), the
// repository's index holds another content than the file's under matching
// stat data. A checkpoint records the bytes on disk all the same, and a
// restore gives them back.
func TestFilteredRepository(t *testing.T) {
	ctx := context.Background()
	ws := t.TempDir()
	hostGit(t, ws, "init", "-q")
	writeFile(t, filepath.Join(ws, ".gitattributes"), "*.up filter=up\n*.txt text eol=lf\n", 0o644)
	writeFile(t, filepath.Join(ws, "a.up"), "lower case\n", 0o644)
	writeFile(t, filepath.Join(ws, "b.txt"), "crlf\r\nlines\r\n", 0o644)
	hostGit(t, ws, "-c", "filter.up.clean=tr a-z A-Z", "add", "-A")
	hostGit(t, ws, "-c", "filter.up.clean=tr a-z A-Z", "commit", "-q", "-m", "x")
	if got := hostGit(t, ws, "show", "HEAD:a.up"); got != "LOWER CASE\n" {
		t.Fatalf("the filter did not run: %q", got)
	}
	want := readTree(t, ws)
	s := open(t, ws)
	r, err := s.Begin(ctx, "s")
	must(t, err)
	c1, err := r.Checkpoint(ctx, Call{Tool: "bash"})
	must(t, err)
	must(t, r.Close())
	for _, f := range []string{"a.up", "b.txt"} {
		must(t, os.Remove(filepath.Join(ws, f)))
	}
	_, err = s.Restore(ctx, c1.ID, RestoreOptions{})
	must(t, err)
	compareTrees(t, want, readTree(t, ws))
}

// TestCopyHostile: an isolated session's copy is written by the sandbox,
// its repository included. Whatever a command plants there — hooks, a
// config naming programs (directly and through an included file), a
// commondir sending git to the user's repository, alternates, an index, a
// .gitattributes naming a filter, links leading out of the copy — corral's
// diff and apply run none of it, read nothing through the links, and leave
// the user's repository as it was but for the changes brought.
func TestCopyHostile(t *testing.T) {
	ctx := context.Background()
	ws := newRepo(t)
	must(t, os.Remove(filepath.Join(ws, "notes.txt")))
	s := open(t, ws)
	c, err := s.NewCopy(ctx, CopyOptions{Session: "evil"})
	must(t, err)
	dir := c.Info().Dir
	outside := t.TempDir()
	writeFile(t, filepath.Join(outside, "secret"), "the user's secret\n", 0o600)
	marker := filepath.Join(outside, "ran")
	// The programs are in the copy, at its host path, which is predictable.
	prog := filepath.Join(dir, "evil.sh")
	writeFile(t, prog, "#!/bin/sh\necho \"$0 $*\" >> "+marker+"\ncat\n", 0o755)
	dotgit := filepath.Join(dir, ".git")
	for _, h := range []string{"reference-transaction", "post-index-change", "pre-commit", "post-commit", "pre-auto-gc", "post-checkout"} {
		writeFile(t, filepath.Join(dotgit, "hooks", h), "#!/bin/sh\necho hook "+h+" >> "+marker+"\n", 0o755)
	}
	writeFile(t, filepath.Join(dir, "evil.gitconfig"), `[core]
	fsmonitor = `+prog+`
	hooksPath = `+filepath.Join(dotgit, "hooks")+`
	pager = `+prog+`
[filter "evil"]
	clean = `+prog+` clean
	smudge = `+prog+` smudge
	required = true
[diff]
	external = `+prog+`
`, 0o644)
	f, err := os.OpenFile(filepath.Join(dotgit, "config"), os.O_APPEND|os.O_WRONLY, 0)
	must(t, err)
	_, err = f.WriteString("[include]\n\tpath = ../evil.gitconfig\n")
	must(t, err)
	must(t, f.Close())
	writeFile(t, filepath.Join(dir, ".gitattributes"), "* filter=evil diff=evil\n", 0o644)
	writeFile(t, filepath.Join(dotgit, "info", "attributes"), "* filter=evil\n", 0o644)
	writeFile(t, filepath.Join(dir, "README.md"), "the session's\n", 0o644)
	must(t, os.Symlink(filepath.Join(outside, "secret"), filepath.Join(dir, "leak")))
	must(t, os.Symlink(outside, filepath.Join(dir, "leakdir")))

	// The trap is armed: git in the copy runs the programs.
	cmd := exec.Command("git", "status")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	_ = cmd.Run()
	if _, err := os.Stat(marker); err != nil {
		t.Fatal("the hostile copy does not make plain git run its programs; the test proves nothing")
	}
	must(t, os.Remove(marker))
	// And git would take the user's repository for the copy's.
	writeFile(t, filepath.Join(dotgit, "commondir"), filepath.Join(ws, ".git")+"\n", 0o644)
	writeFile(t, filepath.Join(dotgit, "objects", "info", "alternates"), filepath.Join(outside, "objects")+"\n", 0o644)
	userConfig, err := os.ReadFile(filepath.Join(ws, ".git", "config"))
	must(t, err)
	refs := hostGit(t, ws, "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads", "refs/tags", "refs/stash")

	var b bytes.Buffer
	must(t, c.Diff(ctx, &b))
	if _, err := c.Changes(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := c.Apply(ctx, ApplyOptions{})
	must(t, err)
	if got, err := os.ReadFile(marker); err == nil {
		t.Fatalf("corral's git ran the copy's programs:\n%s", got)
	}
	if strings.Contains(b.String(), "the user's secret") {
		t.Errorf("the diff read through a link out of the copy:\n%s", b.String())
	}
	for _, p := range []string{"leak", "leakdir"} {
		if fi, err := os.Lstat(filepath.Join(ws, p)); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Errorf("%s was not brought as a link: %v", p, err)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(ws, "README.md")); string(got) != "the session's\n" {
		t.Errorf("README.md: %q (recorded through a filter?)", got)
	}
	if got, _ := os.ReadFile(filepath.Join(ws, ".git", "config")); !bytes.Equal(got, userConfig) {
		t.Errorf("the user's config changed:\n%s", got)
	}
	if got := hostGit(t, ws, "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads", "refs/tags", "refs/stash"); got != refs {
		t.Errorf("the user's refs changed:\n%s\nwas\n%s", got, refs)
	}
	if !res.Applied {
		t.Errorf("not applied: %+v", res)
	}
}
