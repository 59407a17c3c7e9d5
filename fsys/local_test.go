package fsys

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
)

// Local implements Root, and *os.File implements File.
var (
	_ Root = (*Local)(nil)
	_ File = (*os.File)(nil)
)

func TestLocalConfined(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := OpenLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, name := range []string{"../x", "out/secret", "sub/../../x", "/etc/passwd"} {
		_, err := l.OpenFile(name, os.O_RDONLY, 0)
		var pe *fs.PathError
		var errno syscall.Errno
		if err == nil || !errors.As(err, &pe) || errors.As(pe.Err, &errno) {
			t.Errorf("open %s: %v, want an escape error", name, err)
		}
	}
	if _, err := l.Stat("missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("stat missing: %v", err)
	}
	if _, err := l.Readlink("sub"); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("readlink of a directory: %v, want EINVAL", err)
	}
}

func TestLocalFileAndWhere(t *testing.T) {
	dir := t.TempDir()
	l, err := OpenLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.MkdirAll("a/b", 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := l.OpenFile("a/b/f", os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	sub, err := l.OpenRoot("a/b")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if got, want := sub.Name(), filepath.Join(l.Name(), "a", "b"); got != want {
		t.Errorf("Name = %q, want %q", got, want)
	}
	if runtime.GOOS == "linux" {
		if abs, ok := sub.Where(); !ok || abs != filepath.Join(l.Name(), "a", "b") {
			t.Errorf("Where = %q %v, want a/b", abs, ok)
		}
		// Moved: Where follows the directory, not its old name.
		if err := l.Rename("a", "c"); err != nil {
			t.Fatal(err)
		}
		if abs, ok := sub.Where(); !ok || abs != filepath.Join(l.Name(), "c", "b") {
			t.Errorf("Where after a rename = %q %v, want c/b", abs, ok)
		}
		if abs, ok := l.Where(); !ok || abs != l.Name() {
			t.Errorf("Where of the top = %q %v", abs, ok)
		}
	}
	g, err := sub.OpenFile("f", os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	b, err := io.ReadAll(g)
	if err != nil || string(b) != "hello" {
		t.Fatalf("read %q %v", b, err)
	}
	a, err := g.Stat()
	if err != nil {
		t.Fatal(err)
	}
	c, err := sub.Lstat("f")
	if err != nil {
		t.Fatal(err)
	}
	if !SameFile(a, c) {
		t.Error("SameFile of a file and itself is false")
	}
	d, err := sub.Stat(".")
	if err != nil {
		t.Fatal(err)
	}
	if SameFile(a, d) {
		t.Error("SameFile of a file and its directory is true")
	}
	if _, _, ok := Inode(a); !ok && runtime.GOOS != "windows" {
		t.Error("no inode in a local FileInfo")
	}
	if m := Umask(l); m&^fs.ModePerm != 0 {
		t.Errorf("Umask = %v", m)
	}
}

func TestOpenLocalNotDir(t *testing.T) {
	f := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenLocal(f); err == nil {
		t.Fatal("OpenLocal of a file succeeded")
	}
	if _, err := OpenLocal(filepath.Join(f, "missing")); err == nil {
		t.Fatal("OpenLocal of a missing directory succeeded")
	}
}
