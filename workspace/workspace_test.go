package workspace

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func write(t *testing.T, path, content string, mode fs.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// TestCopy: the tree comes over as it is — contents, permissions, times,
// links as links (also those leading out, which stay links) — without
// set-id bits or special files.
func TestCopy(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	write(t, filepath.Join(src, "a.txt"), "a\r\n", 0o644)
	write(t, filepath.Join(src, "bin", "run.sh"), "#!/bin/sh\n", 0o755)
	write(t, filepath.Join(src, "suid"), "x", 0o4755)
	write(t, filepath.Join(src, ".git", "HEAD"), "ref: refs/heads/main\n", 0o644)
	old := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	if err := os.Chtimes(filepath.Join(src, "a.txt"), old, old); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a.txt", filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(src, "out")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(src, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(src, "ro"), 0o555); err != nil {
		t.Fatal(err)
	}
	skipped, err := Copy(context.Background(), src, dst)
	if err != nil {
		t.Fatal(err)
	}
	if len(skipped) != 1 || skipped[0] != "fifo" {
		t.Errorf("skipped %v, want the fifo", skipped)
	}
	check := func(name, want string, mode fs.FileMode) {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dst, name))
		if err != nil || string(b) != want {
			t.Errorf("%s = %q, %v; want %q", name, b, err, want)
		}
		fi, err := os.Lstat(filepath.Join(dst, name))
		if err == nil && fi.Mode() != mode {
			t.Errorf("%s mode %v, want %v", name, fi.Mode(), mode)
		}
	}
	check("a.txt", "a\r\n", 0o644)
	check("bin/run.sh", "#!/bin/sh\n", 0o755)
	check("suid", "x", 0o755)
	check(".git/HEAD", "ref: refs/heads/main\n", 0o644)
	if fi, err := os.Stat(filepath.Join(dst, "a.txt")); err != nil || !fi.ModTime().Equal(old) {
		t.Errorf("a.txt's time: %v, %v", fi.ModTime(), err)
	}
	for name, target := range map[string]string{"link": "a.txt", "out": "/etc/passwd"} {
		if got, err := os.Readlink(filepath.Join(dst, name)); err != nil || got != target {
			t.Errorf("%s -> %q, %v; want a link to %q", name, got, err, target)
		}
	}
	if fi, err := os.Stat(filepath.Join(dst, "ro")); err != nil || fi.Mode().Perm() != 0o555 {
		t.Errorf("ro: %v, %v", fi.Mode(), err)
	}
}

// tarball builds a tar stream of entries.
func tarball(t *testing.T, gz bool, entries ...*tar.Header) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range entries {
		body := ""
		if h.Typeflag == tar.TypeReg {
			body = "content of " + h.Name
			h.Size = int64(len(body))
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if body != "" {
			tw.Write([]byte(body))
		}
	}
	tw.Close()
	if !gz {
		return buf.Bytes()
	}
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write(buf.Bytes())
	zw.Close()
	return z.Bytes()
}

func untarBytes(t *testing.T, b []byte) (string, []string, error) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "w.tar")
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "ws")
	if err := os.Mkdir(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	skipped, err := Untar(context.Background(), file, dst)
	return dst, skipped, err
}

// TestUntar: files, directories, links and modes, gzipped or not; set-id
// bits dropped, devices left out.
func TestUntar(t *testing.T) {
	for _, gz := range []bool{false, true} {
		dst, skipped, err := untarBytes(t, tarball(t, gz,
			&tar.Header{Name: "./src/", Typeflag: tar.TypeDir, Mode: 0o755},
			&tar.Header{Name: "./src/main.py", Typeflag: tar.TypeReg},
			&tar.Header{Name: "/abs.txt", Typeflag: tar.TypeReg},
			&tar.Header{Name: "run", Typeflag: tar.TypeReg, Mode: 0o6755},
			&tar.Header{Name: "link", Typeflag: tar.TypeSymlink, Linkname: "src/main.py"},
			&tar.Header{Name: "hard", Typeflag: tar.TypeLink, Linkname: "abs.txt"},
			&tar.Header{Name: "dev", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3},
		))
		if err != nil {
			t.Fatal(err)
		}
		if len(skipped) != 1 || skipped[0] != "dev" {
			t.Errorf("skipped %v", skipped)
		}
		for name, want := range map[string]string{"src/main.py": "content of ./src/main.py", "abs.txt": "content of /abs.txt", "link": "content of ./src/main.py", "hard": "content of /abs.txt"} {
			if b, err := os.ReadFile(filepath.Join(dst, name)); err != nil || string(b) != want {
				t.Errorf("gz %v: %s = %q, %v", gz, name, b, err)
			}
		}
		if fi, err := os.Stat(filepath.Join(dst, "run")); err != nil || fi.Mode() != 0o755 {
			t.Errorf("run: %v, %v: want 0755 without set-id bits", fi.Mode(), err)
		}
	}
}

// TestUntarHostile: a tar file written to reach outside the workspace —
// by "..", by a link planted first and a file written through it, by a
// hard link to a file outside — fails, and nothing lands outside.
func TestUntarHostile(t *testing.T) {
	outside := t.TempDir()
	victim := filepath.Join(outside, "victim")
	write(t, victim, "safe", 0o644)
	for name, entries := range map[string][]*tar.Header{
		"dotdot":        {{Name: "../../../" + strings.TrimPrefix(victim, "/"), Typeflag: tar.TypeReg}},
		"dotdot-inside": {{Name: "a/../../x", Typeflag: tar.TypeReg}},
		"link-then-file": {
			{Name: "esc", Typeflag: tar.TypeSymlink, Linkname: outside},
			{Name: "esc/victim", Typeflag: tar.TypeReg},
		},
		"link-then-dir": {
			{Name: "esc", Typeflag: tar.TypeSymlink, Linkname: outside},
			{Name: "esc/sub/", Typeflag: tar.TypeDir},
		},
		"hardlink-out":  {{Name: "h", Typeflag: tar.TypeLink, Linkname: "../../" + victim}},
		"hardlink-abs":  {{Name: "esc", Typeflag: tar.TypeSymlink, Linkname: outside}, {Name: "h", Typeflag: tar.TypeLink, Linkname: "esc/victim"}},
		"symlink-final": {{Name: "f", Typeflag: tar.TypeSymlink, Linkname: victim}, {Name: "f", Typeflag: tar.TypeReg}},
	} {
		t.Run(name, func(t *testing.T) {
			dst, _, err := untarBytes(t, tarball(t, false, entries...))
			if b, _ := os.ReadFile(victim); string(b) != "safe" {
				t.Fatalf("the file outside was written: %q", b)
			}
			if _, serr := os.Stat(filepath.Join(outside, "sub")); serr == nil {
				t.Fatal("a directory was made outside")
			}
			if name == "symlink-final" {
				// A later file replaces the link: inside, and allowed.
				if err != nil {
					t.Fatal(err)
				}
				if fi, err := os.Lstat(filepath.Join(dst, "f")); err != nil || !fi.Mode().IsRegular() {
					t.Errorf("f: %v, %v", fi, err)
				}
				return
			}
			if err == nil {
				t.Error("a tar file reaching outside unpacked without an error")
			}
		})
	}
}

// TestClone: a repository comes at the revision asked, with its history,
// and git runs nothing a configuration names: a template directory with a
// hook in the user's git configuration is not used.
func TestClone(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	home := t.TempDir()
	marker := filepath.Join(home, "hook-ran")
	write(t, filepath.Join(home, "templates", "hooks", "post-checkout"), "#!/bin/sh\ntouch "+marker+"\n", 0o755)
	write(t, filepath.Join(home, ".gitconfig"), "[init]\n\ttemplateDir = "+filepath.Join(home, "templates")+"\n[user]\n\tname = t\n\temail = t@t\n", 0o644)
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	repo := t.TempDir()
	run := func(dir string, args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	run(repo, "init", "-q", "-b", "main")
	write(t, filepath.Join(repo, "f.txt"), "one\n", 0o644)
	run(repo, "add", ".")
	run(repo, "commit", "-qm", "one")
	first := run(repo, "rev-parse", "HEAD")
	write(t, filepath.Join(repo, "f.txt"), "two\n", 0o644)
	run(repo, "commit", "-qam", "two")
	os.Remove(marker) // the user's own commits ran the hook
	dst := filepath.Join(t.TempDir(), "ws")
	if err := os.Mkdir(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := (Source{Git: repo, Rev: first}).Fill(context.Background(), dst); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dst, "f.txt")); err != nil || string(b) != "one\n" {
		t.Errorf("f.txt at %s = %q, %v", first, b, err)
	}
	if got := run(dst, "rev-parse", "HEAD"); got != first {
		t.Errorf("HEAD %s, want %s", got, first)
	}
	if got := run(dst, "rev-list", "--all", "--count"); got != "2" {
		t.Errorf("%s commits, want the history (2)", got)
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Error("the hook of the user's template directory ran")
	}
	if _, err := os.Stat(filepath.Join(dst, ".git", "hooks", "post-checkout")); !errors.Is(err, os.ErrNotExist) {
		t.Error("the clone got the user's template hooks")
	}
	// A revision that does not exist is a clear error.
	dst2 := filepath.Join(t.TempDir(), "ws")
	if err := Clone(context.Background(), repo, "no-such-rev", dst2); err == nil || !strings.Contains(err.Error(), "git checkout") {
		t.Errorf("a missing revision: %v", err)
	}
}

// TestCheck: sources that cannot be are refused before anything is made.
func TestCheck(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	write(t, file, "", 0o644)
	for _, c := range []struct {
		s    Source
		want string
	}{
		{Source{Dir: dir, Tar: file}, "one source"},
		{Source{Rev: "main"}, "needs a git repository"},
		{Source{Git: dir, Rev: "--upload-pack=x"}, "may not start with '-'"},
		{Source{Git: "--upload-pack=x"}, "may not start with '-'"},
		{Source{Dir: file}, "is not a directory"},
		{Source{Dir: filepath.Join(dir, "none")}, "no such file"},
		{Source{Tar: filepath.Join(dir, "none.tar")}, "no such file"},
	} {
		if err := c.s.Check(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.s, err, c.want)
		}
	}
	if err := (Source{}).Check(); err != nil {
		t.Errorf("an empty source: %v", err)
	}
}
