package main

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/creack/pty"
)

// hostile is a file's content that would drive a terminal: erase the line
// and move up over the diff's own lines, set the window title, return the
// carriage mid-line to overwrite what was printed.
const hostile = "line one\n\x1b[2K\x1b[1A\x1b[2Kerased\n\x1b]0;pwned\x07title\nsafe\rFORGED\n\x9b2Kc1\nindent\tkept\r\n"

// TestDiffEscapesOnTerminal: corral diff on a terminal shows a file's
// control characters escaped, line by line; piped, it writes git's bytes,
// which git apply takes.
func TestDiffEscapesOnTerminal(t *testing.T) {
	needsDocker(t)
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A write takes checkpoint 1; the hostile file comes after it.
	run := exec.Command("corral", "run", "--workspace", ws, "--confirm", "deny", "-")
	run.Stdin = strings.NewReader(`{"id":"w","tool":"write","args":{"path":"new.txt","content":"b\n"}}` + "\n")
	if out, err := run.CombinedOutput(); err != nil {
		t.Fatalf("corral run: %v: %s", err, out)
	}
	if err := os.WriteFile(filepath.Join(ws, "evil.txt"), []byte(hostile), 0o644); err != nil {
		t.Fatal(err)
	}

	// On a terminal.
	cmd := exec.Command("corral", "diff", "--workspace", ws, "1")
	tty, err := pty.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	io.Copy(&got, tty) // until the child is gone (EIO)
	tty.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("corral diff: %v: %q", err, got.String())
	}
	// The pty turns each \n into \r\n: take those back.
	out := strings.ReplaceAll(got.String(), "\r\n", "\n")
	if !strings.Contains(out, "+++ worktree/evil.txt\n") {
		t.Fatalf("diff on a terminal lacks the file: %q", out)
	}
	for _, raw := range []string{"\x1b", "\x07", "\x9b", "safe\rFORGED"} {
		if strings.Contains(out, raw) {
			t.Errorf("diff on a terminal holds %q raw: %q", raw, out)
		}
	}
	for _, line := range []string{`+\x1b[2K\x1b[1A\x1b[2Kerased`, `+\x1b]0;pwned\x07title`, `+safe\rFORGED`, `+\x9b2Kc1`, "+indent\tkept\r"} {
		if !strings.Contains(out, "\n"+line+"\n") {
			t.Errorf("diff on a terminal lacks the line %q: %q", line, out)
		}
	}

	// Piped, the bytes are git's, and git apply takes them back.
	pipe := exec.Command("corral", "diff", "--workspace", ws, "1")
	patch, err := pipe.Output()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(patch, []byte("+\x1b[2K\x1b[1A\x1b[2Kerased\n")) {
		t.Fatalf("piped diff is not git's bytes: %q", patch)
	}
}
