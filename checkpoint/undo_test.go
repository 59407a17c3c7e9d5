package checkpoint

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// sh runs a script in dir, as a command in the sandbox would, and fails the
// test when it fails.
func sh(t testing.TB, dir, script string) string {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
	return string(out)
}

// noticeOf is the notice a checkpoint carries (read through its JSON).
func noticeOf(c Checkpoint) string {
	b, _ := json.Marshal(c)
	var m map[string]any
	json.Unmarshal(b, &m)
	n, _ := m["notice"].(string)
	return n
}

// TestUndoSurvivesRepositoryDeleted: a command deletes every object and
// every ref of the workspace's repository, corral's refs included, after
// checkpoints were taken. The checkpoints are still restorable, and the
// next changes, of this session and of later ones (with a state directory
// that knew the workspace and with one that did not), are still recorded.
func TestUndoSurvivesRepositoryDeleted(t *testing.T) {
	ctx := context.Background()
	ws := newRepo(t)
	state := t.TempDir()
	s, err := Open(ctx, Options{Workspace: ws, StateDir: state})
	must(t, err)
	r, err := s.Begin(ctx, "s")
	must(t, err)
	want := readTree(t, ws)
	c1, err := r.Checkpoint(ctx, Call{Tool: "bash"})
	must(t, err)
	mutate(t, ws)
	_, err = r.Checkpoint(ctx, Call{Tool: "bash"})
	must(t, err)
	// The hostile command.
	sh(t, ws, `git gc -q 2>/dev/null; find .git/objects -type f -exec rm -f {} +; rm -rf .git/refs/corral .git/packed-refs .git/logs; find .git/objects -type f | wc -l`)
	writeFile(t, filepath.Join(ws, "after.txt"), "after the deletion\n", 0o644)
	c3, err := r.Checkpoint(ctx, Call{Tool: "bash"})
	if err != nil {
		t.Fatalf("a checkpoint after the repository's objects were deleted: %v", err)
	}
	must(t, r.Close())
	// A later session, and a state directory that never saw the workspace.
	s2, err := Open(ctx, Options{Workspace: ws, StateDir: state})
	must(t, err)
	r2, err := s2.Begin(ctx, "s2")
	must(t, err)
	writeFile(t, filepath.Join(ws, "later.txt"), "a later session\n", 0o644)
	_, err = r2.Checkpoint(ctx, Call{Tool: "bash"})
	if err != nil {
		t.Fatalf("a later session's checkpoint: %v", err)
	}
	must(t, r2.Close())
	fresh, err := Open(ctx, Options{Workspace: ws, StateDir: t.TempDir()})
	must(t, err)
	rf, err := fresh.Begin(ctx, "fresh")
	must(t, err)
	if _, err := rf.Checkpoint(ctx, Call{Tool: "bash"}); err != nil {
		t.Fatalf("a new state directory's first checkpoint: %v", err)
	}
	must(t, rf.Close())
	// The undo.
	if _, err := s2.Restore(ctx, c1.ID, RestoreOptions{}); err != nil {
		t.Fatalf("restore of a checkpoint taken before the deletion: %v", err)
	}
	want["trace.log"] = entry{kind: "file", mode: 0o644, content: "a new ignored file\n"} // ignored: left alone
	compareTrees(t, want, readTree(t, ws))
	if _, err := s2.Restore(ctx, c3.ID, RestoreOptions{}); err != nil {
		t.Fatalf("restore of the checkpoint taken after the deletion: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "after.txt")); err != nil || string(b) != "after the deletion\n" {
		t.Errorf("after.txt: %q, %v", b, err)
	}
}

// TestWorkspaceMadeAnew: the user deletes the project and makes it again
// at the same path (a new clone, a new repository). The next session's
// checkpoint is recorded, and says the record started anew; the earlier
// checkpoints stay restorable.
func TestWorkspaceMadeAnew(t *testing.T) {
	ctx := context.Background()
	ws := newRepo(t)
	origin := t.TempDir()
	sh(t, origin, `git init -q -b main && echo other > other.txt && mkdir -p src && echo 'package other' > src/main.go && git add -A && git commit -q -m other`)
	state := t.TempDir()
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	s, err := Open(ctx, Options{Workspace: ws, StateDir: state, Logger: log})
	must(t, err)
	r, err := s.Begin(ctx, "s")
	must(t, err)
	want := readTree(t, ws)
	c1, err := r.Checkpoint(ctx, Call{Tool: "bash"})
	must(t, err)
	writeFile(t, filepath.Join(ws, "README.md"), "changed\n", 0o644)
	_, err = r.Checkpoint(ctx, Call{Tool: "bash"})
	must(t, err)
	must(t, r.Close())

	// Deleted and cloned again, with another repository, at the same path.
	sh(t, filepath.Dir(ws), "rm -rf '"+ws+"' && git clone -q '"+origin+"' '"+ws+"'")
	for round := range 2 {
		s2, err := Open(ctx, Options{Workspace: ws, StateDir: state, Logger: log})
		must(t, err)
		r2, err := s2.Begin(ctx, fmt.Sprint("after", round))
		must(t, err)
		writeFile(t, filepath.Join(ws, "other.txt"), fmt.Sprintf("round %d\n", round), 0o644)
		c, err := r2.Checkpoint(ctx, Call{Tool: "bash"})
		if err != nil {
			t.Fatalf("session %d after the workspace was made anew: %v", round, err)
		}
		must(t, r2.Close())
		if n := noticeOf(c); round == 0 && !strings.Contains(n, "made anew") {
			t.Errorf("the first checkpoint does not say it started anew: notice %q", n)
		} else if round == 1 && n != "" {
			t.Errorf("the second session's checkpoint has a notice: %q", n)
		}
	}
	if !strings.Contains(logs.String(), "made anew") {
		t.Errorf("the log does not say the workspace was made anew:\n%s", logs.String())
	}
	s3, err := Open(ctx, Options{Workspace: ws, StateDir: state})
	must(t, err)
	if _, err := s3.Restore(ctx, c1.ID, RestoreOptions{}); err != nil {
		t.Fatalf("restore of a checkpoint of the old workspace: %v", err)
	}
	got := readTree(t, ws)
	for _, p := range []string{"README.md", "src/main.go", "run.sh", "link"} {
		if got[p] != want[p] {
			t.Errorf("%s restored as %+v, want %+v", p, got[p], want[p])
		}
	}

	// And a new repository made in place of the old one, inside the same
	// directory.
	sh(t, ws, "rm -rf .git && git init -q -b main && git add -A && git commit -q -m again")
	s4, err := Open(ctx, Options{Workspace: ws, StateDir: state})
	must(t, err)
	r4, err := s4.Begin(ctx, "reinit")
	must(t, err)
	defer r4.Close()
	c, err := r4.Checkpoint(ctx, Call{Tool: "bash"})
	if err != nil {
		t.Fatalf("after git init anew: %v", err)
	}
	if n := noticeOf(c); !strings.Contains(n, "made anew") {
		t.Errorf("after git init anew: notice %q", n)
	}
}

// TestObjectsLinkedOut: a command replaces the fan-out directories of the
// repository's object directory with links to a directory outside the
// workspace. A checkpoint writes nothing there.
func TestObjectsLinkedOut(t *testing.T) {
	ctx := context.Background()
	ws := newRepo(t)
	outside := t.TempDir()
	sh(t, ws, `git gc -q && cd .git/objects && for a in 0 1 2 3 4 5 6 7 8 9 a b c d e f; do for b in 0 1 2 3 4 5 6 7 8 9 a b c d e f; do rm -rf $a$b; ln -s '`+outside+`' $a$b; done; done`)
	s := open(t, ws)
	r, err := s.Begin(ctx, "s")
	must(t, err)
	defer r.Close()
	for i := range 3 {
		writeFile(t, filepath.Join(ws, fmt.Sprintf("new%d.txt", i)), fmt.Sprintf("new file %d\n", i), 0o644)
		writeFile(t, filepath.Join(ws, "README.md"), fmt.Sprintf("change %d\n", i), 0o644)
		if _, err := r.Checkpoint(ctx, Call{Tool: "bash"}); err != nil {
			t.Fatalf("checkpoint %d: %v", i, err)
		}
	}
	ents, err := os.ReadDir(outside)
	must(t, err)
	if len(ents) > 0 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Fatalf("the checkpoints wrote %d files through the links, outside the workspace: %s", len(ents), strings.Join(names, " "))
	}
}

// TestSwapRace: while checkpoints are taken, a process in the workspace
// swaps files, again and again, for links to a secret file outside it
// (mode 0600, readable by corral's user alone), for named pipes and back.
// No checkpoint reads the secret (it is nowhere in the workspace, its
// repository or corral's store), and none hangs: each ends within its
// context, and the loop ends.
func TestSwapRace(t *testing.T) {
	if testing.Short() {
		t.Skip("a race of some seconds")
	}
	ws := newRepo(t)
	private := t.TempDir()
	secret := filepath.Join(private, "id_secret")
	const mark = "SECRET-KEY" // the secret's first bytes: a read of a shorter file's size takes no more
	writeFile(t, secret, mark+"-MATERIAL-7f3a9c\n", 0o600)
	must(t, os.Chmod(private, 0o700))
	s := open(t, ws)
	r, err := s.Begin(context.Background(), "s")
	must(t, err)
	defer r.Close()
	// The racer: 16 files, each in turn a plain file and a link to the
	// secret (first) or a named pipe (then), and 16 directories, each in
	// turn a directory and a link to the secret's, as fast as it can; every
	// swap of a file a rename, so that the path is always one of them.
	// Bounded in count and in time.
	for _, mode := range []string{"link", "fifo"} {
		racer := exec.Command("python3", "-c", `
import os, sys, time
secret, mode, end = sys.argv[1], sys.argv[2], time.time() + 20
for i in range(100000):
    if time.time() > end:
        break
    for f in "0123456789abcdef":
        with open(".t" + f, "w") as w:
            w.write("plain-%06d\n" % i)  # shorter than the secret: git reads the size lstat said
        os.rename(".t" + f, "swap" + f)
        try: os.remove(".s" + f)
        except FileNotFoundError: pass
        if mode == "link":
            os.symlink(secret, ".s" + f)
        else:
            os.mkfifo(".s" + f)
        os.rename(".s" + f, "swap" + f)
        if mode == "link":
            # A directory of the workspace, with a file of the secret's
            # name in it, in turn a link to the secret's directory.
            d = "dir" + f
            if os.path.islink(d):
                os.remove(d)
            if os.path.isdir(".d" + f):
                os.rename(".d" + f, d)
            else:
                os.makedirs(d, exist_ok=True)
                with open(os.path.join(d, os.path.basename(secret)), "w") as w:
                    w.write("plain\n")
            os.rename(d, ".d" + f)
            os.symlink(os.path.dirname(secret), ".l" + f)
            os.rename(".l" + f, d)
`, secret, mode)
		racer.Dir = ws
		must(t, racer.Start())
		racerDone := make(chan struct{})
		go func() { racer.Wait(); close(racerDone) }()
		// The checkpoints, each bounded by its context; the loop bounded in
		// count and by the racer's end.
		done := make(chan []string, 1)
		go func() {
			var errs []string
			for range 300 {
				select {
				case <-racerDone:
					done <- errs
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				_, err := r.Checkpoint(ctx, Call{Tool: "bash"})
				cancel()
				if err != nil {
					errs = append(errs, err.Error())
				}
			}
			done <- errs
		}()
		select {
		case errs := <-done:
			if len(errs) > 0 {
				t.Errorf("%s race: %d checkpoints failed (a command could refuse every change so), the first: %.500s", mode, len(errs), errs[0])
			}
		case <-time.After(3 * time.Minute):
			racer.Process.Kill()
			t.Fatalf("%s race: a checkpoint hung past its context (a named pipe opened without O_NONBLOCK?)", mode)
		}
		racer.Process.Kill()
		<-racerDone
	}
	// Nowhere the workspace's owner, or the sandbox, can read.
	var found []string
	if out := sh(t, ws, "grep -rl '"+mark+"' . 2>/dev/null || true"); strings.TrimSpace(out) != "" {
		found = append(found, "the workspace: "+out)
	}
	scan := func(where, gitDir string) {
		cmd := exec.Command("git", "--git-dir="+gitDir, "cat-file", "--batch-all-objects", "--batch")
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("scanning %s: %v", where, err)
		}
		if bytes.Contains(out, []byte(mark)) {
			found = append(found, where)
		}
	}
	scan("the workspace's repository", filepath.Join(ws, ".git"))
	scan("corral's store", s.git.shim)
	if len(found) > 0 {
		t.Fatalf("the secret was read through a link into: %s", strings.Join(found, "; "))
	}
}

// TestPipesInRepository: a command puts named pipes where corral reads the
// repository's files (its index, its config, its objects' alternates) and
// in the working tree. A new state directory's first checkpoint, and the
// next, neither wait on them nor fail: each ends well within its context.
func TestPipesInRepository(t *testing.T) {
	ws := newRepo(t)
	sh(t, ws, `rm -f .git/index .git/config .git/objects/info/alternates && mkfifo .git/index .git/config .git/objects/info/alternates fifo`)
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		s, err := Open(ctx, Options{Workspace: ws, StateDir: t.TempDir()})
		if err != nil {
			done <- err
			return
		}
		r, err := s.Begin(ctx, "s")
		if err != nil {
			done <- err
			return
		}
		defer r.Close()
		for i := range 2 {
			writeFile(t, filepath.Join(ws, "README.md"), fmt.Sprint("change ", i), 0o644)
			if _, err := r.Checkpoint(ctx, Call{Tool: "bash"}); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("a checkpoint waited on a named pipe past its context")
	}
}
