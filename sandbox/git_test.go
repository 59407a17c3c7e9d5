package sandbox

import (
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// What a command leaves in the repository for the next container's start to
// look at — a submodule whose config is a named pipe — does not block it.
func TestGuardGitDoesNotBlock(t *testing.T) {
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
	done := make(chan gitGuard, 1)
	go func() { done <- guardGit(ws, slog.New(slog.DiscardHandler)) }()
	select {
	case g := <-done:
		if len(g.self) != 2 {
			t.Errorf("repositories %q, want .git and its submodule", g.self)
		}
	case <-time.After(time.Minute): // only a hang fails
		t.Fatal("guardGit blocked on a named pipe")
	}
}
