package corral_test

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corralhq/corral"
	"github.com/corralhq/corral/checkpoint"
	"github.com/corralhq/corral/internal/testenv"
	"github.com/corralhq/corral/tools"
)

// TestUndoSurvivesSandbox: through the bash tool, after checkpoints were
// taken, a command deletes the objects of the workspace's repository and
// corral's refs in it, and leaves a process that swaps a file, again and
// again, for a link to a secret of the host's (by its host path) and for a
// named pipe. The next changes are still recorded, the secret is read into
// nothing the sandbox can reach, and the first checkpoint still restores.
func TestUndoSurvivesSandbox(t *testing.T) {
	testenv.NeedsDocker(t)
	ctx := context.Background()
	cfg := sandboxed(t)
	ws := cfg.Workspace
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	secretDir := t.TempDir()
	secret := filepath.Join(secretDir, "id_ed25519")
	const mark = "HOST-SECRET"
	must(os.WriteFile(secret, []byte(mark+" key material of the host's user\n"), 0o600))
	must(os.WriteFile(filepath.Join(ws, "README.md"), []byte("hello\n"), 0o644))
	gitRun(t, ws, "init", "-q", "-b", "main")
	gitRun(t, ws, "add", "-A")
	gitRun(t, ws, "commit", "-q", "-m", "first")
	if os.Geteuid() == 0 {
		// The workspace is an unprivileged user's, as a developer's is.
		must(filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			return os.Lchown(p, 4321, 4321)
		}))
	}
	state := filepath.Join(t.TempDir(), "state")
	cfg.Checkpoints = &checkpoint.Options{StateDir: state}
	h, err := corral.New(cfg)
	must(err)
	defer h.Close()
	s, err := h.Open(ctx, corral.SessionOptions{})
	must(err)
	bash := func(cmd string) tools.Result {
		t.Helper()
		r, err := s.Bash(ctx, tools.BashParams{Command: cmd, Timeout: 120})
		must(err)
		if r.IsError {
			t.Fatalf("%s:\n%s", cmd, r.Content)
		}
		return r
	}
	bash("echo one > a.txt")
	bash("echo two > b.txt")
	// The hostile command, a script (which the policy does not read): the
	// repository's objects and corral's refs gone, and a racer left
	// running, bounded in count.
	script := "rm -rf .git/objects/?? .git/objects/pack/* .git/refs/corral .git/packed-refs\n" +
		"(i=0; while [ $i -lt 3000 ]; do echo plain > .t && mv -f .t swap; ln -sfn " + secret + " .l && mv -f .l swap; " +
		"rm -f .p; mkfifo .p && mv -f .p swap; i=$((i+1)); done) >/dev/null 2>&1 &\necho started\n"
	wr, err := s.Write(ctx, tools.WriteParams{Path: "hostile.sh", Content: script})
	must(err)
	if wr.IsError {
		t.Fatalf("write: %s", wr.Content)
	}
	bash("sh hostile.sh")
	for _, c := range []string{"echo three > c.txt", "echo four > d.txt", "echo five > e.txt"} {
		bash(c) // fails the test if its checkpoint could not be taken
	}
	bash("sleep 1; rm -f swap .t .l .p; true")
	must(s.Close())
	// Nothing the sandbox can read holds the secret.
	if out, _ := exec.Command("grep", "-rl", mark, ws).Output(); len(out) > 0 {
		t.Errorf("the secret is in the workspace: %s", out)
	}
	cmd := exec.Command("git", "--git-dir="+filepath.Join(ws, ".git"), "cat-file", "--batch-all-objects", "--batch")
	if out, _ := cmd.Output(); bytes.Contains(out, []byte(mark)) {
		t.Error("the secret is in the workspace's repository")
	}
	// The undo.
	st, err := checkpoint.Open(ctx, checkpoint.Options{Workspace: ws, StateDir: state})
	must(err)
	all, err := st.List(ctx)
	must(err)
	if len(all) < 5 {
		t.Fatalf("checkpoints: %d, want 5 or more", len(all))
	}
	if _, err := st.Restore(ctx, all[0].ID, checkpoint.RestoreOptions{}); err != nil {
		t.Fatalf("restore of the first checkpoint: %v", err)
	}
	for _, name := range []string{"a.txt", "b.txt", "c.txt", "e.txt", "hostile.sh"} {
		if _, err := os.Lstat(filepath.Join(ws, name)); err == nil {
			t.Errorf("%s is left after the restore", name)
		}
	}
	if b, err := os.ReadFile(filepath.Join(ws, "README.md")); err != nil || !strings.HasPrefix(string(b), "hello") {
		t.Errorf("README.md after the restore: %q %v", b, err)
	}
}
