// Package fsystest is the file half of the conformance suite a sandbox
// backend runs: what harnesses and the file tools rely on of a workspace
// filesystem (an fsys.Root) — UTF-8 and binary bytes round trips, large and
// empty files, errors for missing files, directories, permissions and
// names that leave the root, any name's bytes kept — as subtests any Root
// can be run against.
package fsystest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"slices"
	"syscall"
	"testing"

	"github.com/corralhq/corral/fsys"
)

// Target is a filesystem under test.
type Target struct {
	// Open returns a fresh, empty, writable directory as a Root; the test
	// closes it.
	Open func(t *testing.T) fsys.Root
	// EnforcesPermissions says the Root's user is held by file permissions
	// (not root, no capability to override them), so that a file without
	// read permission cannot be opened: the permission cases run only then.
	EnforcesPermissions bool
}

// Run runs every case against target, each a subtest with a fresh root.
func Run(t *testing.T, target Target) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := target.Open(t)
			t.Cleanup(func() { r.Close() })
			if c.needsPermissions && !target.EnforcesPermissions {
				t.Skip("the filesystem's user overrides permissions")
			}
			c.run(t, r)
		})
	}
}

type testCase struct {
	name             string
	needsPermissions bool
	run              func(t *testing.T, r fsys.Root)
}

var cases = []testCase{
	{name: "UTF8RoundTrip", run: func(t *testing.T, r fsys.Root) {
		data := []byte("\ufeffpremière ligne\r\nzweite Zeile — «ünïcödé» 日本語 🙂\r\n\tlast line without newline")
		roundTrip(t, r, "text.txt", data)
	}},
	{name: "BinaryRoundTrip", run: func(t *testing.T, r fsys.Root) {
		data := make([]byte, 0, 256*64)
		for range 64 {
			for b := range 256 {
				data = append(data, byte(b))
			}
		}
		roundTrip(t, r, "all-bytes.bin", data)
	}},
	{name: "LargeRoundTrip", run: func(t *testing.T, r fsys.Root) {
		data := randomBytes(9<<20 + 12345) // many windows, not a multiple of any chunk
		roundTrip(t, r, "large.bin", data)
	}},
	{name: "EmptyFile", run: func(t *testing.T, r fsys.Root) {
		roundTrip(t, r, "empty", nil)
		fi, err := r.Stat("empty")
		if err != nil || fi.Size() != 0 || !fi.Mode().IsRegular() {
			t.Fatalf("stat of an empty file: %v %v", fi, err)
		}
	}},
	{name: "PartialReadThenClose", run: func(t *testing.T, r fsys.Root) {
		data := randomBytes(4 << 20)
		writeFile(t, r, "big", data)
		f, err := r.OpenFile("big", os.O_RDONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		head := make([]byte, 100)
		if _, err := io.ReadFull(f, head); err != nil || !bytes.Equal(head, data[:100]) {
			t.Fatalf("the first 100 bytes: %v", err)
		}
		if err := f.Close(); err != nil {
			t.Fatalf("close in the middle of a read: %v", err)
		}
		if _, err := f.Read(head); !errors.Is(err, fs.ErrClosed) {
			t.Errorf("read after close: %v, want fs.ErrClosed", err)
		}
		// The root still works.
		if got := readFile(t, r, "big"); !bytes.Equal(got, data) {
			t.Errorf("a second read differs")
		}
	}},
	{name: "Truncate", run: func(t *testing.T, r fsys.Root) {
		writeFile(t, r, "f", []byte("a long first content\n"))
		f, err := r.OpenFile("f", os.O_WRONLY|os.O_TRUNC, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write([]byte("short\n")); err != nil {
			t.Fatal(err)
		}
		f.Close()
		if got := readFile(t, r, "f"); string(got) != "short\n" {
			t.Errorf("after O_TRUNC: %q", got)
		}
		f, err = r.OpenFile("f", os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write([]byte("more\n")); err != nil {
			t.Fatal(err)
		}
		f.Close()
		if got := readFile(t, r, "f"); string(got) != "short\nmore\n" {
			t.Errorf("after O_APPEND: %q", got)
		}
	}},
	{name: "Missing", run: func(t *testing.T, r fsys.Root) {
		if _, err := r.OpenFile("missing.txt", os.O_RDONLY, 0); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("open: %v, want fs.ErrNotExist", err)
		}
		if _, err := r.Stat("missing/deeper"); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("stat: %v, want fs.ErrNotExist", err)
		}
		if err := r.Remove("missing.txt"); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("remove: %v, want fs.ErrNotExist", err)
		}
		var pe *fs.PathError
		if _, err := r.Lstat("missing.txt"); !errors.As(err, &pe) || pe.Path != "missing.txt" {
			t.Errorf("lstat: %v, want a *fs.PathError naming missing.txt", err)
		}
	}},
	{name: "IsADirectory", run: func(t *testing.T, r fsys.Root) {
		if err := r.Mkdir("dir", 0o755); err != nil {
			t.Fatal(err)
		}
		if _, err := r.OpenFile("dir", os.O_WRONLY, 0); !errors.Is(err, syscall.EISDIR) {
			t.Errorf("open a directory to write: %v, want EISDIR", err)
		}
		d, err := r.OpenFile("dir", os.O_RDONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		if _, err := d.Read(make([]byte, 10)); !errors.Is(err, syscall.EISDIR) {
			t.Errorf("read a directory: %v, want EISDIR", err)
		}
		if err := r.Mkdir("dir", 0o755); !errors.Is(err, fs.ErrExist) {
			t.Errorf("mkdir of an existing directory: %v, want fs.ErrExist", err)
		}
		writeFile(t, r, "file", []byte("x"))
		if _, err := r.Stat("file/below"); !errors.Is(err, syscall.ENOTDIR) {
			t.Errorf("stat below a file: %v, want ENOTDIR", err)
		}
		if _, err := r.OpenFile("file", os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644); !errors.Is(err, fs.ErrExist) {
			t.Errorf("O_EXCL on an existing file: %v, want fs.ErrExist", err)
		}
	}},
	{name: "Permission", needsPermissions: true, run: func(t *testing.T, r fsys.Root) {
		writeFile(t, r, "secret", []byte("s"))
		if err := r.Chmod("secret", 0); err != nil {
			t.Fatal(err)
		}
		if _, err := r.OpenFile("secret", os.O_RDONLY, 0); !errors.Is(err, fs.ErrPermission) {
			t.Errorf("open a file without read permission: %v, want fs.ErrPermission", err)
		}
		if err := r.Mkdir("locked", 0o500); err != nil {
			t.Fatal(err)
		}
		if _, err := r.OpenFile("locked/new", os.O_WRONLY|os.O_CREATE, 0o644); !errors.Is(err, fs.ErrPermission) {
			t.Errorf("create in a read-only directory: %v, want fs.ErrPermission", err)
		}
		if err := r.Chown("secret", 0, 0); !errors.Is(err, fs.ErrPermission) {
			t.Errorf("give a file to root: %v, want fs.ErrPermission", err)
		}
	}},
	{name: "Escape", run: func(t *testing.T, r fsys.Root) {
		if err := r.Mkdir("a", 0o755); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"../outside", "a/../../outside", "/etc/passwd"} {
			_, err := r.OpenFile(name, os.O_RDONLY, 0)
			var pe *fs.PathError
			var errno syscall.Errno
			if err == nil || !errors.As(err, &pe) || errors.As(pe.Err, &errno) {
				t.Errorf("open %s: %v, want a *fs.PathError that is no system error", name, err)
			}
		}
	}},
	{name: "NamesKeptAsBytes", run: func(t *testing.T, r fsys.Root) {
		names := []string{"new\nline", "tab\there", "\x1b]0;title\x07", "not-utf8-\xff\xfe", " spaced ", "ünï"}
		for _, n := range names {
			writeFile(t, r, n, []byte(n))
		}
		d, err := r.OpenFile(".", os.O_RDONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		got, err := d.Readdirnames(-1)
		d.Close()
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(got)
		want := slices.Clone(names)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("names %q, want %q", got, want)
		}
		for _, n := range names {
			if b := readFile(t, r, n); string(b) != n {
				t.Errorf("%q holds %q", n, b)
			}
		}
	}},
	{name: "ReadDirInBatches", run: func(t *testing.T, r fsys.Root) {
		if err := r.Mkdir("many", 0o755); err != nil {
			t.Fatal(err)
		}
		const n = 700
		for i := range n {
			f, err := r.OpenFile(fmt.Sprintf("many/f%04d", i), os.O_WRONLY|os.O_CREATE, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			f.Close()
		}
		if err := r.Mkdir("many/sub", 0o755); err != nil {
			t.Fatal(err)
		}
		d, err := r.OpenFile("many", os.O_RDONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		seen, dirs := 0, 0
		for {
			ents, err := d.ReadDir(64)
			if len(ents) > 64 {
				t.Fatalf("ReadDir(64) gave %d entries", len(ents))
			}
			for _, e := range ents {
				seen++
				if e.IsDir() {
					dirs++
					if e.Name() != "sub" {
						t.Errorf("%s is a directory", e.Name())
					}
				}
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if seen != n+1 || dirs != 1 {
			t.Errorf("saw %d entries (%d directories), want %d (1)", seen, dirs, n+1)
		}
	}},
	{name: "RenameReplaces", run: func(t *testing.T, r fsys.Root) {
		writeFile(t, r, "old", []byte("old"))
		writeFile(t, r, "new", []byte("new"))
		before, err := r.Lstat("new")
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Rename("new", "old"); err != nil {
			t.Fatal(err)
		}
		if got := readFile(t, r, "old"); string(got) != "new" {
			t.Errorf("old holds %q", got)
		}
		after, err := r.Lstat("old")
		if err != nil || !fsys.SameFile(before, after) {
			t.Errorf("the renamed file is another one: %v", err)
		}
		if _, err := r.Lstat("new"); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the old name still exists: %v", err)
		}
	}},
	{name: "ModesAndIdentity", run: func(t *testing.T, r fsys.Root) {
		f, err := r.OpenFile("m", os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666)
		if err != nil {
			t.Fatal(err)
		}
		fi, err := f.Stat()
		if err != nil {
			t.Fatal(err)
		}
		if want := 0o666 &^ fsys.Umask(r); fi.Mode().Perm() != want {
			t.Errorf("new file's mode %v, want %v (0666 less the umask)", fi.Mode().Perm(), want)
		}
		if err := f.Chmod(0o751); err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		f.Close()
		li, err := r.Lstat("m")
		if err != nil {
			t.Fatal(err)
		}
		if li.Mode().Perm() != 0o751 || li.Name() != "m" {
			t.Errorf("after chmod: %v %q", li.Mode(), li.Name())
		}
		if _, _, ok := fsys.Inode(li); !ok {
			t.Fatalf("no inode in Sys (%T)", li.Sys())
		}
		if !fsys.SameFile(fi, li) {
			t.Errorf("the open file and its name are not the same file")
		}
		if err := r.Chmod("m", 0o600); err != nil {
			t.Fatal(err)
		}
		if li, _ := r.Stat("m"); li.Mode().Perm() != 0o600 {
			t.Errorf("after Root.Chmod: %v", li.Mode())
		}
		uid, gid, ok := fsys.Owner(li)
		if !ok {
			t.Fatal("no owner in Sys")
		}
		if err := r.Chown("m", uid, gid); err != nil {
			t.Errorf("chown to its own owner: %v", err)
		}
	}},
	{name: "SubRoot", run: func(t *testing.T, r fsys.Root) {
		if err := r.MkdirAll("a/b/c", 0o755); err != nil {
			t.Fatal(err)
		}
		sub, err := r.OpenRoot("a/b")
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
		writeFile(t, sub, "c/f", []byte("in sub"))
		if got := readFile(t, r, "a/b/c/f"); string(got) != "in sub" {
			t.Errorf("through the parent: %q", got)
		}
		if _, err := sub.OpenFile("../x", os.O_RDONLY, 0); err == nil {
			t.Error("a sub-root reached its parent")
		}
		// Moved under its name: the root follows its directory.
		if err := r.Rename("a", "moved"); err != nil {
			t.Fatal(err)
		}
		if got := readFile(t, sub, "c/f"); string(got) != "in sub" {
			t.Errorf("after its parent moved: %q", got)
		}
		if w, ok := sub.Where(); ok {
			if rw, ok := r.Where(); ok && w != rw+"/moved/b" {
				t.Errorf("Where = %q, want %q", w, rw+"/moved/b")
			}
		}
		if _, err := r.OpenRoot("moved/b/c/f"); err == nil {
			t.Errorf("OpenRoot of a file succeeded")
		}
	}},
}

// roundTrip writes data to name and reads it back whole.
func roundTrip(t *testing.T, r fsys.Root, name string, data []byte) {
	t.Helper()
	writeFile(t, r, name, data)
	if got := readFile(t, r, name); !bytes.Equal(got, data) {
		t.Fatalf("%s: read back %d bytes that differ from the %d written", name, len(got), len(data))
	}
	fi, err := r.Stat(name)
	if err != nil || fi.Size() != int64(len(data)) {
		t.Fatalf("%s: stat %v %v, want %d bytes", name, fi, err, len(data))
	}
}

func writeFile(t *testing.T, r fsys.Root, name string, data []byte) {
	t.Helper()
	f, err := r.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	n, err := f.Write(data)
	if err != nil || n != len(data) {
		t.Fatalf("write %s: %d of %d bytes: %v", name, n, len(data), err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, r fsys.Root, name string) []byte {
	t.Helper()
	f, err := r.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	return b
}

func randomBytes(n int) []byte {
	rng := rand.New(rand.NewPCG(1, uint64(n)))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}
