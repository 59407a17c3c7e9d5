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
