package control

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/testenv"
)

// What evaluation harnesses check of a sandbox (Inspect AI's self_check,
// Harbor's environments), through the API on a real sandbox: writes that
// honour permissions, an argv that cannot be executed, commands past one
// protocol frame, the session's working directory, an executable /tmp.

// A write over a file the session's user could not open for writing is
// refused with EACCES, in the workspace and outside it, instead of renamed
// over; the user's own writable file is replaced as ever.
func TestWritePermissions(t *testing.T) {
	s := newServer(t, nil)
	c := httpClient(t, s)
	id := create(t, c, SessionOptions{}).ID
	ctx := ctxT(t)
	for _, p := range []string{"ro.txt", "/tmp/ro.txt", "sub/ro.txt", "/tmp/sub/ro.txt"} {
		if _, err := c.WriteFile(ctx, id, p, []byte("impervious"), 0); err != nil {
			t.Fatalf("write %s: %v", p, err)
		}
		if res, err := c.Exec(ctx, id, ExecRequest{Argv: []string{"chmod", "-w", p}}, nil, nil); err != nil || res.ExitCode != 0 {
			t.Fatalf("chmod -w %s: %+v %v", p, res, err)
		}
		_, err := c.WriteFile(ctx, id, p, []byte("this won't stick"), 0)
		e := wantCode(t, err, CodeFileError, "EACCES")
		if want := fmt.Sprintf("permission denied: %s is read-only (mode 0444) — chmod u+w it first", p); e.Message != want || e.Path != p {
			t.Errorf("write over read-only %s: %q (path %q), want %q", p, e.Message, e.Path, want)
		}
		_, err = s.WriteFile(ctx, FileRequest{Session: id, Path: p, Content: ptr("more"), Append: true})
		if e := wantCode(t, err, CodeFileError, "EACCES"); !strings.Contains(e.Message, "read-only (mode 0444)") {
			t.Errorf("append to read-only %s: %q", p, e.Message)
		}
		if got, err := c.ReadFile(ctx, id, p); err != nil || string(got) != "impervious" {
			t.Errorf("%s after the refused writes: %q %v", p, got, err)
		}
		if res, err := c.Exec(ctx, id, ExecRequest{Argv: []string{"chmod", "+w", p}}, nil, nil); err != nil || res.ExitCode != 0 {
			t.Fatalf("chmod +w %s: %+v %v", p, res, err)
		}
		if res, err := c.WriteFile(ctx, id, p, []byte("altered"), 0); err != nil || res.Mode != 0o644 {
			t.Errorf("write over %s made writable again: %+v %v", p, res, err)
		}
	}
	// Another user's file, in a directory the session's user may write:
	// the rename would replace it; the user's own open would not.
	out(t, c, id, "mkdir -p shared /tmp/shared && chmod 777 shared /tmp/shared")
	uid := strings.TrimSpace(out(t, c, id, "id -u"))
	n, _ := strconv.Atoi(uid)
	other := fmt.Sprintf("%d:%d", n+1, n+1)
	for _, p := range []string{"shared/theirs", "/tmp/shared/theirs"} {
		res, err := c.Exec(ctx, id, ExecRequest{Command: "printf theirs > " + p + " && chmod 644 " + p, User: other}, nil, nil)
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("making %s as %s: %+v %v", p, other, res, err)
		}
		_, err = c.WriteFile(ctx, id, p, []byte("lost"), 0)
		if e := wantCode(t, err, CodeFileError, "EACCES"); !strings.Contains(e.Message, "permission denied") || !strings.Contains(e.Message, p) {
			t.Errorf("write over another user's %s: %q", p, e.Message)
		}
		if got, err := c.ReadFile(ctx, id, p); err != nil || string(got) != "theirs" {
			t.Errorf("another user's %s after the refused write: %q %v", p, got, err)
		}
	}
}

// An argv whose program does not exist or may not be executed says so:
// the shells' exit code, and cannot_execute with the reason. A program's
// own exit code 127 does not.
func TestCannotExecute(t *testing.T) {
	s := newServer(t, nil)
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			c := tr.connect(t, s)
			id := create(t, c, SessionOptions{}).ID
			ctx := ctxT(t)
			for _, tt := range []struct {
				argv   []string
				code   int
				reason string
			}{
				{[]string{"/etc/passwd"}, 126, ReasonNotExecutable},
				{[]string{"/etc"}, 126, ReasonNotExecutable},
				{[]string{"no-such-program"}, 127, ReasonNotFound},
				{[]string{"./missing.sh", "arg"}, 127, ReasonNotFound},
				{[]string{"sh", "-c", "exit 127"}, 127, ""},
			} {
				for _, stream := range []bool{false, true} {
					var stdout, stderr bytes.Buffer
					var res ExecResult
					var err error
					if stream {
						res, err = c.Exec(ctx, id, ExecRequest{Argv: tt.argv}, &stdout, &stderr)
					} else {
						res, err = c.Exec(ctx, id, ExecRequest{Argv: tt.argv}, nil, nil)
					}
					if err != nil {
						t.Fatalf("%q: %v", tt.argv, err)
					}
					ce := res.CannotExecute
					switch {
					case res.ExitCode != tt.code:
						t.Errorf("%q (stream %v): exit %d, want %d", tt.argv, stream, res.ExitCode, tt.code)
					case tt.reason == "" && ce != nil:
						t.Errorf("%q (stream %v): cannot_execute %+v for a program that ran", tt.argv, stream, ce)
					case tt.reason != "" && (ce == nil || ce.Reason != tt.reason || ce.Program != tt.argv[0] || !strings.Contains(ce.Message, tt.argv[0])):
						t.Errorf("%q (stream %v): cannot_execute %+v, want reason %s", tt.argv, stream, ce, tt.reason)
					}
				}
			}
		})
	}
}

// Commands past one protocol frame (1 MiB) and within Linux's 2 MiB run: an
// argv of many words, as harnesses send, and a long shell command; past
// 2 MiB a command is a start_error that says the limit.
func TestLongCommands(t *testing.T) {
	s := newServer(t, nil)
	c := httpClient(t, s)
	id := create(t, c, SessionOptions{}).ID
	ctx := ctxT(t)
	argv := []string{"sh", "-c", `echo $#`, "sh"}
	size, words := 0, 0
	for size < 1<<20+1<<16 {
		w := strings.Repeat("w", 1000) + strconv.Itoa(words)
		argv = append(argv, w)
		size += len(w) + 1
		words++
	}
	res, err := c.Exec(ctx, id, ExecRequest{Argv: argv}, nil, nil)
	if err != nil || res.ExitCode != 0 || str(res.Stdout) != strconv.Itoa(words)+"\n" {
		t.Errorf("an argv of %d bytes: %v %d %q %q", size, err, res.ExitCode, str(res.Stdout), str(res.Stderr))
	}
	long := 3 << 19 // 1.5 MiB
	res, err = c.Exec(ctx, id, ExecRequest{Command: "x='" + strings.Repeat("y", long) + "'; echo ${#x}"}, nil, nil)
	if err != nil || res.ExitCode != 0 || str(res.Stdout) != strconv.Itoa(long)+"\n" {
		t.Errorf("a command of 1.5 MiB: %v %d %q %q", err, res.ExitCode, str(res.Stdout), str(res.Stderr))
	}
	_, err = c.Exec(ctx, id, ExecRequest{Command: "echo " + strings.Repeat("y", 2<<20)}, nil, nil)
	if e := wantCode(t, err, CodeStartError, ""); !strings.Contains(e.Message, "2 MiB") {
		t.Errorf("a command over 2 MiB: %q", e.Message)
	}
	if got := out(t, c, id, "echo alive"); got != "alive\n" {
		t.Errorf("after the refused command: %q", got)
	}
}

// A session's workdir is where an exec that names no cwd starts and what
// relative paths (cwd, files) are relative to: the one it names, which must
// exist; the image's WORKDIR on a fresh workspace; else the workspace.
func TestWorkdir(t *testing.T) {
	image := testenv.DerivedImage(t, "workdir", "ARG BASE\nFROM $BASE\nRUN mkdir -p /app/sub && printf 'in the image\\n' > /app/task.txt && chmod -R 777 /app\nWORKDIR /app\n")
	s := newServer(t, nil)
	c := httpClient(t, s)
	ctx := ctxT(t)

	// Named: /tmp, made by the sandbox.
	info := create(t, c, SessionOptions{Workdir: "/tmp"})
	if info.Workdir != "/tmp" {
		t.Errorf("workdir %q, want /tmp", info.Workdir)
	}
	if _, err := c.WriteFile(ctx, info.ID, "harness.file", []byte("ls me"), 0); err != nil {
		t.Fatal(err)
	}
	res, err := c.Exec(ctx, info.ID, ExecRequest{Argv: []string{"ls", "-1"}}, nil, nil)
	if err != nil || res.Dir != "/tmp" || !strings.Contains(str(res.Stdout), "harness.file") {
		t.Errorf("ls in the workdir: %+v %v", res, err)
	}
	out(t, c, info.ID, "mkdir -p /tmp/subdir")
	if _, err := c.WriteFile(ctx, info.ID, "subdir/f", []byte("x"), 0); err != nil {
		t.Fatal(err)
	}
	res, err = c.Exec(ctx, info.ID, ExecRequest{Argv: []string{"ls"}, Cwd: "subdir"}, nil, nil)
	if err != nil || res.Dir != "/tmp/subdir" || str(res.Stdout) != "f\n" {
		t.Errorf("ls in a cwd relative to the workdir: %+v %v", res, err)
	}
	res, err = c.Exec(ctx, info.ID, ExecRequest{Argv: []string{"pwd"}, Cwd: info.Workspace}, nil, nil)
	if err != nil || str(res.Stdout) != info.Workspace+"\n" {
		t.Errorf("an absolute cwd: %+v %v", res, err)
	}
	if got, err := c.ReadFile(ctx, info.ID, info.Workspace+"/../harness.file"); err != nil || string(got) != "ls me" {
		t.Errorf("an absolute path: %q %v", got, err)
	}

	// Named wrong: refused, and no session is left.
	for _, wd := range []string{"/no/such/dir", "relative", "/etc/hostname"} {
		_, err := c.Create(ctx, SessionOptions{Workdir: wd})
		if e := wantCode(t, err, CodeBadRequest, ""); !strings.Contains(e.Message, wd) {
			t.Errorf("workdir %q: %q does not name it", wd, e.Message)
		}
	}
	if n := len(s.List()); n != 1 {
		t.Errorf("%d sessions after the refused ones, want 1", n)
	}

	// The image's WORKDIR, for a session whose files are in its image.
	info = create(t, c, SessionOptions{Image: image})
	if info.Workdir != "/app" {
		t.Errorf("on a fresh workspace, workdir %q, want the image's /app", info.Workdir)
	}
	if got, err := c.ReadFile(ctx, info.ID, "task.txt"); err != nil || string(got) != "in the image\n" {
		t.Errorf("read task.txt: %q %v", got, err)
	}
	if got := out(t, c, info.ID, "pwd; cat task.txt"); got != "/app\nin the image\n" {
		t.Errorf("exec without a cwd: %q", got)
	}
	// On a workspace of its own, the workspace.
	if err := os.Mkdir(filepath.Join(s.root, "task"), 0o755); err != nil {
		t.Fatal(err)
	}
	info = create(t, c, SessionOptions{Image: image, Workspace: "task"})
	if info.Workdir != info.Workspace {
		t.Errorf("on a named workspace, workdir %q, want the workspace %q", info.Workdir, info.Workspace)
	}
	if got := out(t, c, info.ID, "pwd"); got != info.Workspace+"\n" {
		t.Errorf("exec without a cwd on a named workspace: %q", got)
	}
}

// /tmp is executable unless the session says "tmp_exec": false.
func TestTmpExecOption(t *testing.T) {
	s := newServer(t, nil)
	c := httpClient(t, s)
	ctx := ctxT(t)
	for _, exec := range []*bool{nil, ptr(true), ptr(false)} {
		id := create(t, c, SessionOptions{TmpExec: exec}).ID
		out(t, c, id, "cp /bin/true /tmp/prog")
		res, err := c.Exec(ctx, id, ExecRequest{Argv: []string{"/tmp/prog"}}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if noexec := exec != nil && !*exec; noexec {
			if res.ExitCode != 126 || res.CannotExecute == nil || res.CannotExecute.Reason != ReasonNotExecutable {
				t.Errorf("tmp_exec false: %+v", res)
			}
		} else if res.ExitCode != 0 || res.CannotExecute != nil {
			t.Errorf("tmp_exec %v: %+v", exec, res)
		}
	}
}

// A directory travels as a tar stream, both ways, in the workspace and
// outside it; the errors a harness meets have their errno; an archive's
// links lead to the sandbox's own files, never the host's.
func TestArchive(t *testing.T) {
	s := newServer(t, nil)
	outside := t.TempDir() // on the host, not mounted in the sandbox
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			c := tr.connect(t, s)
			id := create(t, c, SessionOptions{}).ID
			ctx := ctxT(t)
			bin := make([]byte, 70000)
			for i := range bin {
				bin[i] = byte(i * 7)
			}
			in := tarball(t, []tarEntry{
				{name: "a.txt", body: "first\r\n"},
				{name: "sub/b.bin", body: string(bin)},
				{name: "run.sh", body: "#!/bin/sh\necho ran\n", mode: 0o755},
				{name: "link", link: "a.txt"},
			})
			for _, dir := range []string{"unpacked", "/tmp/unpacked/deeper"} {
				res, err := c.WriteArchive(ctx, id, dir, in)
				if err != nil || res.Entries != 4 {
					t.Fatalf("write the archive to %s: %+v %v", dir, res, err)
				}
				if got := out(t, c, id, "cd "+dir+" && cat a.txt link && ./run.sh && sha256sum < sub/b.bin"); got != "first\r\nfirst\r\nran\n"+sha(bin)+"  -\n" {
					t.Errorf("%s in the sandbox: %q", dir, got)
				}
				back, err := c.ReadArchive(ctx, id, dir)
				if err != nil {
					t.Fatalf("read the archive of %s: %v", dir, err)
				}
				got := untar(t, back)
				if got["./a.txt"] != "first\r\n" || got["./sub/b.bin"] != string(bin) || got["./link"] != "-> a.txt" || got["./run.sh"] == "" {
					t.Errorf("the archive of %s: %d entries", dir, len(got))
				}
			}
			out(t, c, id, "mkdir ro && chmod 555 ro && touch file")
			for _, tt := range []struct {
				dir, errno string
				write      bool
			}{
				{"missing", "ENOENT", false},
				{"file", "ENOTDIR", false},
				{"file", "ENOTDIR", true},
				{"file/below", "ENOTDIR", true},
				{"ro", "EIO", true}, // tar's own refusal, its message
				{"ro/new", "EACCES", true},
			} {
				var err error
				if tt.write {
					_, err = c.WriteArchive(ctx, id, tt.dir, in)
				} else {
					_, err = c.ReadArchive(ctx, id, tt.dir)
				}
				if e := wantCode(t, err, CodeFileError, tt.errno); e.Path != tt.dir {
					t.Errorf("%s (write %v): the error names %q", tt.dir, tt.write, e.Path)
				}
			}
			// A link to a host directory, then a file through it.
			evil := tarball(t, []tarEntry{
				{name: "evil", link: outside},
				{name: "evil/planted", body: "x"},
			})
			_, _ = c.WriteArchive(ctx, id, "hostile", evil)
			if _, err := os.Stat(filepath.Join(outside, "planted")); err == nil {
				t.Errorf("an archive planted a file on the host, in %s", outside)
			}
		})
	}
}

type tarEntry struct {
	name, body, link string
	mode             int64
}

// tarball is a tar stream of entries.
func tarball(t *testing.T, entries []tarEntry) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.body)), Typeflag: tar.TypeReg}
		if e.mode != 0 {
			h.Mode = e.mode
		}
		if e.link != "" {
			h.Typeflag, h.Linkname, h.Size, h.Mode = tar.TypeSymlink, e.link, 0, 0o777
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// untar is the files of a tar stream by name: their content, "-> TARGET"
// for a link.
func untar(t *testing.T, b []byte) map[string]string {
	t.Helper()
	files := map[string]string{}
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatalf("reading the archive: %v", err)
		}
		switch h.Typeflag {
		case tar.TypeReg:
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files[h.Name] = string(data)
		case tar.TypeSymlink:
			files[h.Name] = "-> " + h.Linkname
		}
	}
}
