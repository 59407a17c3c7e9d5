package statedir

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestPrivate(t *testing.T) {
	root := t.TempDir()
	t.Setenv("XDG_STATE_HOME", root)
	dir, err := Dir("checkpoints")
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(root, "corral", "checkpoints"); dir != want {
		t.Fatalf("Dir = %s, want %s", dir, want)
	}
	fi, err := os.Stat(dir)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("mode %v, %v; want 0700", fi.Mode(), err)
	}

	// A directory open to others is closed.
	open := filepath.Join(root, "open")
	if err := os.Mkdir(open, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(open, 0o777)
	if _, err := Private(open); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(open); fi.Mode().Perm() != 0o700 {
		t.Fatalf("open dir left %v", fi.Mode().Perm())
	}

	// A link planted where the directory goes is refused, not followed.
	target := t.TempDir()
	link := filepath.Join(root, "planted")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if _, err := Private(link); !errors.Is(err, ErrUnsafe) {
		t.Fatalf("Private(link) = %v, want ErrUnsafe", err)
	}
}

func TestNotOwned(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a directory of another user")
	}
	dir := filepath.Join(t.TempDir(), "other")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 1234, 1234); err != nil {
		t.Fatal(err)
	}
	if _, err := Private(dir); !errors.Is(err, ErrUnsafe) {
		t.Fatalf("Private(other's dir) = %v, want ErrUnsafe", err)
	}
}
