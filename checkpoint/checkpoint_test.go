package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// hostGit runs git the way a user would in dir, with the test's own empty
// global config.
func hostGit(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func writeFile(t testing.TB, name, content string, mode fs.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(name, mode); err != nil {
		t.Fatal(err)
	}
}

// newRepo makes a repository with a commit, an untracked file and an ignored one.
func newRepo(t testing.TB) string {
	t.Helper()
	ws := t.TempDir()
	hostGit(t, ws, "init", "-q", "-b", "main")
	writeFile(t, filepath.Join(ws, "README.md"), "hello\n", 0o644)
	writeFile(t, filepath.Join(ws, "src/main.go"), "package main\n\nfunc main() {}\n", 0o644)
	writeFile(t, filepath.Join(ws, "src/util/util.go"), "package util\n", 0o644)
	writeFile(t, filepath.Join(ws, "run.sh"), "#!/bin/sh\necho hi\n", 0o755)
	writeFile(t, filepath.Join(ws, ".gitignore"), "*.log\nbuild/\n", 0o644)
	if err := os.Symlink("src/main.go", filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	hostGit(t, ws, "add", "-A")
	hostGit(t, ws, "commit", "-q", "-m", "first")
	writeFile(t, filepath.Join(ws, "notes.txt"), "untracked before the session\n", 0o600)
	writeFile(t, filepath.Join(ws, "debug.log"), "ignored\n", 0o644)
	return ws
}

// entry is what a tree holds at a path.
type entry struct {
	kind    string // file, link, dir
	mode    fs.FileMode
	content string
}

// readTree returns every path under ws but .git.
func readTree(t testing.TB, ws string) map[string]entry {
	t.Helper()
	out := map[string]entry{}
	err := filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(ws, p)
		if rel == "." {
			return nil
		}
		if d.Name() == ".git" {
			return filepath.SkipDir
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			out[rel] = entry{kind: "link", content: target}
		case fi.IsDir():
			out[rel] = entry{kind: "dir"}
		default:
			b, _ := os.ReadFile(p)
			out[rel] = entry{kind: "file", mode: fi.Mode().Perm(), content: string(b)}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func compareTrees(t testing.TB, want, got map[string]entry) {
	t.Helper()
	var keys []string
	for k := range want {
		keys = append(keys, k)
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		w, wok := want[k]
		g, gok := got[k]
		switch {
		case !gok:
			t.Errorf("%s: missing after restore (want %+v)", k, w)
		case !wok:
			t.Errorf("%s: left after restore (%+v)", k, g)
		case w != g:
			t.Errorf("%s: got %+v, want %+v", k, g, w)
		}
	}
}

// gitState is what a checkpoint must not change.
func gitState(t testing.TB, ws string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString(hostGit(t, ws, "status", "--porcelain=v2", "--branch", "--untracked-files=all", "--ignored"))
	b.WriteString(hostGit(t, ws, "rev-parse", "HEAD"))
	b.WriteString(hostGit(t, ws, "symbolic-ref", "HEAD"))
	b.WriteString(hostGit(t, ws, "ls-files", "--stage", "--debug"))
	idx, err := os.ReadFile(filepath.Join(ws, ".git", "index"))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&b, "index %x\n", idx)
	filepath.WalkDir(filepath.Join(ws, ".git", "logs"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			c, _ := os.ReadFile(p)
			fmt.Fprintf(&b, "reflog %s\n%s", p, c)
		}
		return nil
	})
	b.WriteString(hostGit(t, ws, "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads", "refs/tags", "refs/remotes", "refs/stash"))
	return b.String()
}

func open(t testing.TB, ws string) *Store {
	t.Helper()
	s, err := Open(context.Background(), Options{Workspace: ws, StateDir: filepath.Join(t.TempDir(), "state")})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// mutate makes the changes an agent might: edits, deletions, renames, new
// files and directories, a mode change, links retargeted, a file where a
// directory was and the reverse.
func mutate(t testing.TB, ws string) {
	t.Helper()
	j := func(p string) string { return filepath.Join(ws, p) }
	writeFile(t, j("README.md"), "hello, changed\n", 0o644)
	must(t, os.Remove(j("src/util/util.go")))
	must(t, os.Rename(j("src/main.go"), j("src/app.go")))
	writeFile(t, j("new/deep/file.txt"), "new\n", 0o644)
	writeFile(t, j("notes.txt"), "changed by the agent\n", 0o600)
	must(t, os.Chmod(j("run.sh"), 0o644))
	must(t, os.Remove(j("link")))
	must(t, os.Symlink("elsewhere", j("link")))
	must(t, os.RemoveAll(j("src/util")))
	writeFile(t, j("src/util"), "now a file\n", 0o644)
	writeFile(t, j("trace.log"), "a new ignored file\n", 0o644)
	writeFile(t, j("bin.dat"), "\x00\x01\x02binary", 0o755)
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestRestoreExact(t *testing.T) {
	for _, inGit := range []bool{true, false} {
		t.Run(fmt.Sprintf("git=%v", inGit), func(t *testing.T) {
			ctx := context.Background()
			ws := newRepo(t)
			if !inGit {
				must(t, os.RemoveAll(filepath.Join(ws, ".git")))
			}
			s := open(t, ws)
			if s.Git() != inGit {
				t.Fatalf("Git() = %v", s.Git())
			}
			before := readTree(t, ws)
			r, err := s.Begin(ctx, "s1")
			must(t, err)
			c1, err := r.Checkpoint(ctx, Call{Call: "c1", Tool: "bash", Command: "make"})
			must(t, err)
			mutate(t, ws)
			c2, err := r.Checkpoint(ctx, Call{Call: "c2", Tool: "edit", Path: "README.md"})
			must(t, err)
			if c2.Files == 0 || c2.Unchanged {
				t.Errorf("checkpoint 2 lists no changes: %+v", c2)
			}
			if _, err := s.Restore(ctx, c1.ID, RestoreOptions{}); !errors.Is(err, ErrBusy) {
				t.Fatalf("Restore while a session runs: %v, want ErrBusy", err)
			}
			must(t, r.Close())
			res, err := s.Restore(ctx, c1.ID, RestoreOptions{})
			must(t, err)
			after := readTree(t, ws)
			// The ignored file made after the checkpoint stays, as ignored files do.
			want := before
			want["trace.log"] = entry{kind: "file", mode: 0o644, content: "a new ignored file\n"}
			if !inGit {
				// Outside git, .gitignore still applies.
			}
			compareTrees(t, want, after)
			// Restoring the checkpoint taken before the restore undoes it.
			if _, err := s.Restore(ctx, res.Before.ID, RestoreOptions{}); err != nil {
				t.Fatal(err)
			}
			mutated := readTree(t, ws)
			if mutated["README.md"].content != "hello, changed\n" || mutated["link"].content != "elsewhere" {
				t.Errorf("undoing the restore: %+v", mutated)
			}
		})
	}
}

func TestCheckpointLeavesGitAlone(t *testing.T) {
	ctx := context.Background()
	ws := newRepo(t)
	writeFile(t, filepath.Join(ws, "README.md"), "staged change\n", 0o644)
	hostGit(t, ws, "add", "README.md")
	writeFile(t, filepath.Join(ws, "src/main.go"), "unstaged change\n", 0o644)
	hostGit(t, ws, "status") // let git refresh its index first, as a user's would be
	state := gitState(t, ws)
	s := open(t, ws)
	r, err := s.Begin(ctx, "s1")
	must(t, err)
	defer r.Close()
	for i := range 3 {
		if i == 1 {
			writeFile(t, filepath.Join(ws, "new.txt"), "new\n", 0o644)
			state = gitState(t, ws)
		}
		if _, err := r.Checkpoint(ctx, Call{Call: fmt.Sprint(i), Tool: "bash"}); err != nil {
			t.Fatal(err)
		}
		if got := gitState(t, ws); got != state {
			t.Fatalf("checkpoint %d changed git's state:\n%s\nwas:\n%s", i, got, state)
		}
	}
	if refs := hostGit(t, ws, "for-each-ref", "--format=%(refname)", "refs/corral"); refs != "" {
		t.Errorf("refs in the workspace's repository: %q", refs)
	}
	refs := storeGit(t, s, "for-each-ref", "--format=%(refname)", "refs/corral")
	if strings.Count(refs, "\n") != 3 || !strings.Contains(refs, "refs/corral/s1/1\n") {
		t.Errorf("refs: %q", refs)
	}
	// The checkpoint holds the unstaged change, and new.txt.
	show := storeGit(t, s, "show", "refs/corral/s1/2:src/main.go")
	if show != "unstaged change\n" {
		t.Errorf("checkpoint's src/main.go: %q", show)
	}
	storeGit(t, s, "cat-file", "-e", "refs/corral/s1/2:new.txt")
}

// storeGit runs git in the store's own repository.
func storeGit(t testing.TB, s *Store, args ...string) string {
	t.Helper()
	return hostGit(t, s.git.shim, append([]string{"--git-dir=."}, args...)...)
}

func TestUnchangedAndSkipped(t *testing.T) {
	ctx := context.Background()
	ws := newRepo(t)
	s, err := Open(ctx, Options{Workspace: ws, StateDir: t.TempDir(), MaxFileSize: 100})
	must(t, err)
	r, err := s.Begin(ctx, "s")
	must(t, err)
	defer r.Close()
	writeFile(t, filepath.Join(ws, "big.bin"), strings.Repeat("x", 1000), 0o644)
	c1, err := r.Checkpoint(ctx, Call{Tool: "bash"})
	must(t, err)
	if len(c1.Skipped) != 1 || c1.Skipped[0].Path != "big.bin" || c1.Skipped[0].Reason != "too large" {
		t.Errorf("skipped: %+v", c1.Skipped)
	}
	c2, err := r.Checkpoint(ctx, Call{Tool: "bash"})
	must(t, err)
	if !c2.Unchanged || c2.Commit != c1.Commit {
		t.Errorf("an unchanged tree made a new commit: %+v", c2)
	}
	writeFile(t, filepath.Join(ws, "README.md"), "one\ntwo\n", 0o644)
	c3, err := r.Checkpoint(ctx, Call{Tool: "bash"})
	must(t, err)
	if c3.Unchanged || c3.Files != 1 || c3.Changed[0].Path != "README.md" || c3.Changed[0].Status != "M" || c3.Added != 2 || c3.Removed != 1 {
		t.Errorf("one file changed: %+v", c3)
	}
	// The big file is kept by a restore: the checkpoint did not record it.
	r.Close()
	p, err := s.PlanRestore(ctx, c1.ID, RestoreOptions{})
	must(t, err)
	var ops []string
	for _, a := range p.Actions {
		ops = append(ops, a.Op+" "+a.Path)
	}
	if strings.Join(ops, ",") != "write README.md" {
		t.Errorf("plan: %v", ops)
	}
}

func TestRestorePaths(t *testing.T) {
	ctx := context.Background()
	ws := newRepo(t)
	s := open(t, ws)
	r, err := s.Begin(ctx, "s")
	must(t, err)
	c1, err := r.Checkpoint(ctx, Call{Tool: "bash"})
	must(t, err)
	r.Close()
	mutate(t, ws)
	_, err = s.Restore(ctx, c1.ID, RestoreOptions{Paths: []string{"src", "README.md"}})
	must(t, err)
	got := readTree(t, ws)
	if got["README.md"].content != "hello\n" || got["src/main.go"].content == "" || got["src/util/util.go"].content != "package util\n" {
		t.Errorf("restored paths: %+v", got)
	}
	if _, ok := got["src/app.go"]; ok {
		t.Error("src/app.go, made after the checkpoint, is left")
	}
	if got["link"].content != "elsewhere" || got["new/deep/file.txt"].content != "new\n" {
		t.Errorf("paths not asked for were restored: %+v", got)
	}
}

// TestRestoreVerifiesObjects: an object of the checkpoint replaced in the
// repository (as a command in the sandbox could) is refused, not written.
func TestRestoreVerifiesObjects(t *testing.T) {
	ctx := context.Background()
	ws := newRepo(t)
	s := open(t, ws)
	r, err := s.Begin(ctx, "s")
	must(t, err)
	writeFile(t, filepath.Join(ws, "secret.txt"), "original content\n", 0o644)
	c1, err := r.Checkpoint(ctx, Call{Tool: "bash"})
	must(t, err)
	r.Close()
	oid := strings.TrimSpace(storeGit(t, s, "rev-parse", c1.Commit+":secret.txt"))
	// Forge the loose object in corral's store (a disk's fault, or anyone
	// who could write it): same name, other content.
	forged := filepath.Join(t.TempDir(), "forged")
	writeFile(t, forged, "evil content!!!!\n", 0o644)
	fake := strings.TrimSpace(storeGit(t, s, "hash-object", "-w", forged))
	obj := filepath.Join(s.git.objects, oid[:2], oid[2:])
	must(t, os.Chmod(obj, 0o644))
	b, err := os.ReadFile(filepath.Join(s.git.objects, fake[:2], fake[2:]))
	must(t, err)
	must(t, os.WriteFile(obj, b, 0o444))
	must(t, os.Remove(filepath.Join(ws, "secret.txt")))
	_, err = s.Restore(ctx, c1.ID, RestoreOptions{})
	if !errors.Is(err, ErrDamaged) {
		t.Fatalf("restore of a forged object: %v, want ErrDamaged", err)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "secret.txt")); err == nil {
		t.Errorf("the forged content was written: %q", b)
	}
}

func TestGC(t *testing.T) {
	ctx := context.Background()
	ws := newRepo(t)
	state := t.TempDir()
	s, err := Open(ctx, Options{Workspace: ws, StateDir: state})
	must(t, err)
	r, err := s.Begin(ctx, "s")
	must(t, err)
	for i := range 4 {
		writeFile(t, filepath.Join(ws, "f.txt"), fmt.Sprint(i), 0o644)
		_, err := r.Checkpoint(ctx, Call{Tool: "bash"})
		must(t, err)
	}
	r.Close()
	res, err := GC(ctx, GCOptions{StateDir: state, Keep: 2})
	must(t, err)
	if len(res) != 1 || res[0].Removed != 2 || res[0].Kept != 2 {
		t.Fatalf("gc: %+v", res)
	}
	all, err := s.List(ctx)
	must(t, err)
	if len(all) != 2 || all[0].ID != 3 {
		t.Fatalf("after gc: %+v", all)
	}
	refs := storeGit(t, s, "for-each-ref", "--format=%(refname)", "refs/corral")
	if refs != "refs/corral/s/3\nrefs/corral/s/4\n" {
		t.Errorf("refs after gc: %q", refs)
	}
	res, err = GC(ctx, GCOptions{StateDir: state, OlderThan: time.Hour, Now: time.Now().Add(2 * time.Hour)})
	must(t, err)
	if res[0].Removed != 2 {
		t.Fatalf("gc by age: %+v", res)
	}
	// IDs go on after a gc.
	r, err = s.Begin(ctx, "s2")
	must(t, err)
	defer r.Close()
	c, err := r.Checkpoint(ctx, Call{Tool: "bash"})
	must(t, err)
	if c.ID != 5 {
		t.Errorf("id after gc: %d", c.ID)
	}
}

func TestDiff(t *testing.T) {
	ctx := context.Background()
	ws := newRepo(t)
	s := open(t, ws)
	r, err := s.Begin(ctx, "s")
	must(t, err)
	defer r.Close()
	c1, err := r.Checkpoint(ctx, Call{Tool: "bash"})
	must(t, err)
	writeFile(t, filepath.Join(ws, "README.md"), "bye\n", 0o644)
	var b bytes.Buffer
	must(t, s.Diff(ctx, &b, c1.ID, Worktree))
	if !strings.Contains(b.String(), "-hello\n+bye\n") || !strings.Contains(b.String(), "a/README.md") && !strings.Contains(b.String(), "1/README.md") {
		t.Errorf("diff:\n%s", b.String())
	}
	usage, err := s.DiskUsage(ctx)
	must(t, err)
	if usage <= 0 {
		t.Errorf("disk usage %d", usage)
	}
}

// TestDiskUsage: what corral log reports is what the checkpoints take in
// corral's repository: at least the loose objects they wrote, at most all it
// holds.
func TestDiskUsage(t *testing.T) {
	ctx := context.Background()
	ws := newRepo(t)
	for i := range 200 {
		writeFile(t, filepath.Join(ws, fmt.Sprintf("pkg/f%03d.txt", i)), fmt.Sprintf("file %d with some text to take space\n", i), 0o644)
	}
	hostGit(t, ws, "add", "-A")
	hostGit(t, ws, "commit", "-q", "-m", "many")
	hostGit(t, ws, "gc", "-q")
	s := open(t, ws)
	r, err := s.Begin(ctx, "s")
	must(t, err)
	defer r.Close()
	for i := range 3 {
		writeFile(t, filepath.Join(ws, fmt.Sprintf("pkg/f%03d.txt", i)), fmt.Sprintf("changed %d\n", i), 0o644)
		_, err := r.Checkpoint(ctx, Call{Tool: "bash"})
		must(t, err)
	}
	var loose, all int64
	filepath.WalkDir(s.git.objects, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			fi, _ := d.Info()
			all += fi.Size()
			if len(filepath.Base(filepath.Dir(p))) == 2 {
				loose += fi.Size()
			}
		}
		return nil
	})
	usage, err := s.DiskUsage(ctx)
	must(t, err)
	if loose == 0 || usage < loose || usage > all {
		t.Errorf("disk usage %d; the loose objects take %d, all of corral's repository %d", usage, loose, all)
	}
}
