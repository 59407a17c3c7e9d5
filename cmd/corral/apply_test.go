package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestShellIsolate: corral shell --isolate works on a private copy: what the
// shell does stays out of the workspace, and corral apply brings it in.
func TestShellIsolate(t *testing.T) {
	needsDocker(t)
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("corral", "shell", "--workspace", ws, "--isolate")
	cmd.Stdin = strings.NewReader("pwd > where.txt; echo two >> a.txt; exit\n")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if out, err := cmd.Output(); err != nil {
		t.Fatalf("corral shell: %v\n%s\n%s", err, out, stderr.String())
	}
	if !strings.Contains(stderr.String(), "corral: this shell works on a private copy of "+ws) || !strings.Contains(stderr.String(), "corral apply --workspace "+ws) {
		t.Errorf("stderr:\n%s", stderr.String())
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "a.txt")); string(b) != "one\n" {
		t.Errorf("the shell changed the workspace: %q", b)
	}
	out, err := exec.Command("corral", "apply", "--workspace", ws).CombinedOutput()
	if err != nil {
		t.Fatalf("corral apply: %v\n%s", err, out)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "a.txt")); string(b) != "one\ntwo\n" {
		t.Errorf("a.txt after apply: %q\n%s", b, out)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "where.txt")); strings.TrimSpace(string(b)) != ws {
		t.Errorf("the shell's directory was %q, not the workspace's path", b)
	}
}
