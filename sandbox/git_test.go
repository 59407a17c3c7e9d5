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
