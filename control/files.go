package control

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/corralhq/corral/fsys"
	"github.com/corralhq/corral/sandbox"
)

// A session's files are the sandbox's: a path is relative to the session's
// workdir (the workspace unless it says otherwise), or absolute in the
// sandbox. The workspace's are reached through the
// sandbox's agent (an fsys.Root that the agent serves through os.Root as
// the commands' user, on every backend), so that a request can do to a
// file exactly what a command of the session could, and no name can reach
// the host. Files elsewhere in the sandbox (or behind a symbolic link that
// leads out of the workspace) are read and written by a small sh script
// run as the session's user, which needs sh and cat in the image.

// filesystem is a session's workspace through its agent.
type filesystem struct {
	ws   string // the workspace's path in the sandbox
	wd   string // the session's workdir, which relative paths start from
	root fsys.Root
}

// agentFS is what a backend whose workspace is on the host (Docker) offers
// to reach it through its agent instead.
type agentFS interface {
	AgentFS(ctx context.Context) (*sandbox.AgentFS, error)
}

// unwrap returns the backend's sandbox under a pool's, whose methods beyond
// sandbox.Sandbox's (AgentFS) are the backend's.
func unwrap(box sandbox.Sandbox) sandbox.Sandbox {
	for {
		u, ok := box.(interface{ Unwrap() sandbox.Sandbox })
		if !ok {
			return box
		}
		box = u.Unwrap()
	}
}

// files returns the session's workspace filesystem, opened on first use.
func (ss *session) filesystem(ctx context.Context) (*filesystem, error) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.files != nil {
		return ss.files, nil
	}
	box := ss.s.Sandbox()
	var root fsys.Root
	var err error
	if a, ok := unwrap(box).(agentFS); ok {
		root, err = a.AgentFS(ctx)
	} else {
		// Another backend's workspace lives in the sandbox: its FS is
		// already its agent's.
		root, err = box.FS(ctx)
	}
	if err != nil {
		return nil, sandboxError(ctx, err)
	}
	ss.files = &filesystem{ws: box.Workspace(), wd: ss.workdir, root: root}
	return ss.files, nil
}

func (f *filesystem) close() { f.root.Close() }

// fileError is the protocol's error for a failed file operation on p.
func fileError(p string, err error) *Error {
	e := &Error{Code: CodeFileError, Path: p}
	var errno syscall.Errno
	switch {
	case errors.As(err, &errno):
		e.Errno = unix.ErrnoName(errno)
		e.Message = fmt.Sprintf("%s: %s", p, errno.Error())
	case errors.Is(err, fs.ErrNotExist):
		e.Errno, e.Message = "ENOENT", p+": no such file or directory"
	case errors.Is(err, fs.ErrPermission):
		e.Errno, e.Message = "EACCES", p+": permission denied"
	case errors.Is(err, fs.ErrExist):
		e.Errno, e.Message = "EEXIST", p+": file exists"
	default:
		var pe *Error
		if errors.As(err, &pe) {
			return pe
		}
		e.Errno, e.Message = "EIO", fmt.Sprintf("%s: %v", p, err)
	}
	if e.Errno == "" {
		e.Errno = "EIO"
	}
	return e
}

func fileErrorf(p, errno, format string, args ...any) *Error {
	return &Error{Code: CodeFileError, Errno: errno, Path: p, Message: p + ": " + fmt.Sprintf(format, args...)}
}

// where says where p, relative to the workdir or absolute, is: in the
// workspace (rel, relative to it) or elsewhere in the sandbox (abs).
func (f *filesystem) where(p string) (rel, abs string, inWorkspace bool, err error) {
	switch {
	case p == "":
		return "", "", false, errorf(CodeBadRequest, "no path given")
	case strings.IndexByte(p, 0) >= 0:
		return "", "", false, errorf(CodeBadRequest, "path %q holds a NUL byte", p)
	}
	abs = path.Clean(inDir(f.wd, p))
	if !within(f.ws, abs) {
		return "", abs, false, nil
	}
	rel = strings.TrimPrefix(strings.TrimPrefix(abs, f.ws), "/")
	if rel == "" {
		rel = "."
	}
	return rel, abs, true, nil
}

// fileReader is an open file being read: its bytes, its size and mode.
type fileReader struct {
	io.Reader
	size int64 // -1 when unknown
	mode uint32
	// close releases the file; it returns an error that ended the read
	// early (a script's failure), nil otherwise.
	close func() error
}

// openRead opens p of session ss for reading from offset, at most length
// bytes (to the end when zero).
func (s *Server) openRead(ctx context.Context, ss *session, p string, offset, length int64) (*fileReader, error) {
	if offset < 0 || length < 0 {
		return nil, errorf(CodeBadRequest, "offset and length must not be negative")
	}
	f, err := ss.filesystem(ctx)
	if err != nil {
		return nil, err
	}
	rel, abs, in, err := f.where(p)
	if err != nil {
		return nil, err
	}
	if in {
		r, err := f.openWorkspace(rel, p, offset, length)
		if !errors.Is(err, fsys.ErrEscape) {
			return r, err
		}
	}
	return s.openSandbox(ctx, ss, abs, p, offset, length)
}

func (f *filesystem) openWorkspace(rel, p string, offset, length int64) (*fileReader, error) {
	file, err := f.root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if errors.Is(err, fsys.ErrEscape) {
		return nil, err
	}
	if err != nil {
		return nil, fileError(p, err)
	}
	fi, err := file.Stat()
	if err != nil {
		file.Close()
		return nil, fileError(p, err)
	}
	switch {
	case fi.IsDir():
		file.Close()
		return nil, fileErrorf(p, "EISDIR", "is a directory: list it with exec (ls)")
	case !fi.Mode().IsRegular():
		file.Close()
		return nil, fileErrorf(p, "EINVAL", "is not a regular file (%v)", fi.Mode().Type())
	}
	if offset > 0 {
		if _, err := io.CopyN(io.Discard, file, offset); err != nil && err != io.EOF {
			file.Close()
			return nil, fileError(p, err)
		}
	}
	var r io.Reader = file
	if length > 0 {
		r = io.LimitReader(file, length)
	}
	return &fileReader{Reader: r, size: fi.Size(), mode: uint32(fi.Mode().Perm()), close: func() error { file.Close(); return nil }}, nil
}

// The scripts of files outside the workspace. Their exit status says what
// went wrong, in the numbers of errno.h (2 ENOENT, 13 EACCES, 20 ENOTDIR,
// 21 EISDIR, 22 EINVAL); any other is EIO, with the script's stderr.
const (
	// info prints a file's size and octal mode: stat where it works, find
	// where it does not (gVisor before 2023 has no statx).
	infoFunc = `info() { stat -L -c '%s %a' -- "$1" 2>/dev/null || find -L "$1" -maxdepth 0 -printf '%s %m\n' 2>/dev/null; }
`
	readScript = infoFunc + `p=$1
if [ -d "$p" ]; then exit 21; fi
if [ ! -e "$p" ]; then
	d=${p%/*}
	if [ -n "$d" ] && [ -e "$d" ] && [ ! -d "$d" ]; then exit 20; fi
	exit 2
fi
[ -f "$p" ] || exit 22
[ -r "$p" ] || exit 13
printf '%s\n' "$(info "$p")"
exec cat -- "$p"
`
	writeScript = infoFunc + `p=$1 mode=$2 append=$3 tag=$4
d=${p%/*}
[ -n "$d" ] || d=/
if [ -d "$p" ]; then exit 21; fi
if [ ! -d "$d" ]; then
	if [ -e "$d" ]; then exit 20; fi
	mkdir -p -- "$d" 2>/dev/null || exit 13
fi
if [ -e "$p" ] && [ ! -f "$p" ]; then exit 22; fi
created=0
[ -e "$p" ] || created=1
# An existing file must be the user's to write, as the kernel judges an
# open of it (the rename needs only the directory's permission); by a
# regular builtin, since a failed redirection of a special one (:) ends sh.
if [ "$created" = 0 ] && ! { true >> "$p"; } 2>/dev/null; then
	printf 'readonly %s\n' "$(info "$p")"
	exit 13
fi
if [ "$append" = 1 ]; then
	cat >> "$p" || exit 5
	if [ "$created" = 1 ] && [ -n "$mode" ]; then chmod "$mode" -- "$p" || exit 5; fi
else
	[ -w "$d" ] || exit 13
	t="$d/.corral-write-$tag.tmp"
	(umask 077 && : > "$t") 2>/dev/null || exit 13
	if ! cat > "$t"; then rm -f -- "$t"; exit 5; fi
	if [ -z "$mode" ]; then
		if [ "$created" = 1 ]; then
			mode=$(printf '%o' $(( 0644 & ~0$(umask) )))
		else
			mode=$(info "$p")
			mode=${mode#* }
		fi
	fi
	if [ -n "$mode" ]; then chmod "$mode" -- "$t" || { rm -f -- "$t"; exit 5; }; fi
	mv -f -- "$t" "$p" || { rm -f -- "$t"; exit 13; }
fi
printf '%s %s\n' "$created" "$(info "$p")"
`
	stderrKeep = 4 << 10
)

// scriptError is the error of a file script that exited with code.
func scriptError(p string, code int, stderr string) *Error {
	switch code {
	case 2:
		return fileErrorf(p, "ENOENT", "no such file or directory")
	case 13:
		return fileErrorf(p, "EACCES", "permission denied")
	case 20:
		return fileErrorf(p, "ENOTDIR", "a component of the path is not a directory")
	case 21:
		return fileErrorf(p, "EISDIR", "is a directory: list it with exec (ls)")
	case 22:
		return fileErrorf(p, "EINVAL", "is not a regular file")
	case 126, 127:
		return fileErrorf(p, "EIO", "the sandbox cannot run the file script outside the workspace (it needs sh, cat and stat in the image): %s", strings.TrimSpace(stderr))
	}
	msg := strings.TrimSpace(stderr)
	if msg == "" {
		msg = "exit status " + strconv.Itoa(code)
	}
	return fileErrorf(p, "EIO", "%s", msg)
}

// openSandbox reads abs, a file of the sandbox outside the workspace, with
// the read script: its first line is the file's size and mode, the rest
// its bytes.
func (s *Server) openSandbox(ctx context.Context, ss *session, abs, p string, offset, length int64) (*fileReader, error) {
	box := ss.s.Sandbox()
	ctx, cancel := context.WithCancel(ctx)
	pr, pw := io.Pipe()
	var stderr bytes.Buffer
	limit := int64(0)
	if length > 0 {
		limit = offset + length + 64 // and the header line
	}
	done := make(chan error, 1)
	go func() {
		res, err := box.Exec(ctx, sandbox.ExecRequest{
			Argv:        []string{"sh", "-c", readScript, "sh", abs},
			Pipes:       true,
			Dir:         "/",
			Output:      pw,
			Stderr:      &capped{b: &stderr, max: stderrKeep},
			OutputLimit: limit,
		})
		switch {
		case err != nil:
			err = sandboxError(ctx, err)
		case res.ExitCode != 0:
			err = scriptError(p, res.ExitCode, stderr.String())
		}
		pw.CloseWithError(err)
		done <- err
	}()
	br := bufio.NewReader(pr)
	header, err := br.ReadString('\n')
	if err != nil {
		cancel()
		<-done
		var pe *Error
		if errors.As(err, &pe) {
			return nil, pe
		}
		if err == io.EOF {
			err = fileErrorf(p, "EIO", "the file script ended without a word")
		}
		return nil, fileError(p, err)
	}
	r := &fileReader{size: -1}
	if f := strings.Fields(header); len(f) == 2 {
		r.size, _ = strconv.ParseInt(f[0], 10, 64)
		m, _ := strconv.ParseUint(f[1], 8, 32)
		r.mode = uint32(m)
	}
	var body io.Reader = br
	if offset > 0 {
		if _, err := io.CopyN(io.Discard, br, offset); err != nil && err != io.EOF {
			cancel()
			<-done
			return nil, fileError(p, err)
		}
	}
	if length > 0 {
		body = io.LimitReader(body, length)
	}
	r.Reader = body
	var once sync.Once
	var closeErr error
	r.close = func() error {
		once.Do(func() {
			// A read that stopped early (a length) ends the script.
			pr.Close()
			cancel()
			closeErr = <-done
			var pe *Error
			if errors.As(closeErr, &pe) && pe.Code == CodeCanceled {
				closeErr = nil
			}
		})
		return closeErr
	}
	return r, nil
}

// ReadFile reads file req.Path of session req.Session whole (or the part
// Offset and Length give) into the result, as text when it is UTF-8, else
// in base64; a file larger than the server's --max-output is refused.
func (s *Server) ReadFile(ctx context.Context, req FileRequest) (FileResult, error) {
	if req.Content != nil || req.ContentB64 != nil || req.Mode != 0 || req.Append {
		return FileResult{}, errorf(CodeBadRequest, "%s takes path, offset and length; content, mode and append are %s's", MethodReadFile, MethodWriteFile)
	}
	ss, ctx, release, err := s.acquire(ctx, req.Session)
	if err != nil {
		return FileResult{}, err
	}
	defer release()
	r, err := s.openRead(ctx, ss, req.Path, req.Offset, req.Length)
	if err != nil {
		return FileResult{}, err
	}
	limit := s.opts.MaxOutput
	if r.size >= 0 {
		want := max(r.size-req.Offset, 0)
		if req.Length > 0 {
			want = min(want, req.Length)
		}
		if want > limit {
			r.close()
			return FileResult{}, tooLargeFile(req.Path, r.size, limit)
		}
	}
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	cerr := r.close()
	switch {
	case err != nil:
		return FileResult{}, fileError(req.Path, err)
	case cerr != nil:
		return FileResult{}, cerr
	case int64(len(data)) > limit:
		return FileResult{}, tooLargeFile(req.Path, r.size, limit)
	}
	res := FileResult{Path: req.Path, Size: r.size, Mode: r.mode}
	textOrB64(data, &res.Content, &res.ContentB64)
	return res, nil
}

func tooLargeFile(p string, size, limit int64) *Error {
	what := "more"
	if size >= 0 {
		what = sizeText(size) + ", more"
	}
	return &Error{Code: CodeTooLarge, Errno: "EFBIG", Path: p, Message: fmt.Sprintf("%s is %s than the %s a response may hold (the server's --max-output): read it in parts with offset and length, or over HTTP (GET .../files streams it)", p, what, sizeText(limit))}
}

// WriteFile writes req's content to file req.Path of session req.Session:
// atomically (a reader sees the old file or the new one), creating missing
// directories, as the session's user would.
func (s *Server) WriteFile(ctx context.Context, req FileRequest) (FileResult, error) {
	if req.Offset != 0 || req.Length != 0 {
		return FileResult{}, errorf(CodeBadRequest, "%s takes path, content (or content_b64), mode and append; offset and length are %s's", MethodWriteFile, MethodReadFile)
	}
	data, ok, err := bytesOf("content", req.Content, req.ContentB64)
	switch {
	case err != nil:
		return FileResult{}, err
	case !ok:
		return FileResult{}, errorf(CodeBadRequest, `give the file's "content" (text) or "content_b64" (base64); "" makes an empty file`)
	}
	return s.writeFrom(ctx, req, bytes.NewReader(data))
}

// writeFrom writes what r holds to req.Path; see WriteFile.
func (s *Server) writeFrom(ctx context.Context, req FileRequest, r io.Reader) (FileResult, error) {
	if req.Mode&^0o7777 != 0 {
		return FileResult{}, errorf(CodeBadRequest, "mode %o: want permission bits such as 0644 (420) or 0755 (493)", req.Mode)
	}
	ss, ctx, release, err := s.acquire(ctx, req.Session)
	if err != nil {
		return FileResult{}, err
	}
	defer release()
	f, err := ss.filesystem(ctx)
	if err != nil {
		return FileResult{}, err
	}
	rel, abs, in, err := f.where(req.Path)
	if err != nil {
		return FileResult{}, err
	}
	if in {
		res, err := f.write(ctx, rel, req, r)
		var out *outside
		switch {
		case errors.As(err, &out):
			abs = out.abs
		case errors.Is(err, fsys.ErrEscape):
		default:
			return res, err
		}
	}
	return s.writeSandbox(ctx, ss, abs, req, r)
}

// outside says a workspace path leads out of the workspace, to abs.
type outside struct{ abs string }

func (o *outside) Error() string { return o.abs + " is outside the workspace" }

// write writes the workspace file rel through the agent.
func (f *filesystem) write(ctx context.Context, rel string, req FileRequest, r io.Reader) (FileResult, error) {
	p := req.Path
	if rel == "." {
		return FileResult{}, fileErrorf(p, "EISDIR", "is the workspace, a directory")
	}
	// Follow a symbolic link to the file it names, as a command's write
	// would.
	var fi fs.FileInfo
	var err error
	for hops := 0; ; hops++ {
		fi, err = f.root.Lstat(rel)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			break
		}
		if hops == 40 {
			return FileResult{}, fileErrorf(p, "ELOOP", "too many levels of symbolic links")
		}
		target, err := f.root.Readlink(rel)
		if err != nil {
			return FileResult{}, fileError(p, err)
		}
		abs := target
		if !path.IsAbs(abs) {
			abs = path.Join(f.ws, path.Dir(rel), target)
		}
		abs = path.Clean(abs)
		if !within(f.ws, abs) || abs == f.ws {
			return FileResult{}, &outside{abs: abs}
		}
		rel = strings.TrimPrefix(abs, f.ws+"/")
	}
	switch {
	case errors.Is(err, fsys.ErrEscape):
		return FileResult{}, err
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return FileResult{}, fileError(p, err)
	case fi != nil && fi.IsDir():
		return FileResult{}, fileErrorf(p, "EISDIR", "is a directory")
	case fi != nil && !fi.Mode().IsRegular():
		return FileResult{}, fileErrorf(p, "EINVAL", "is not a regular file (%v)", fi.Mode().Type())
	}
	dir, name := path.Split(rel)
	dir = strings.TrimSuffix(dir, "/")
	if dir == "" {
		dir = "."
	}
	if fi == nil && dir != "." {
		if err := f.root.MkdirAll(dir, 0o777); err != nil {
			if errors.Is(err, fsys.ErrEscape) {
				return FileResult{}, err
			}
			return FileResult{}, fileError(p, err)
		}
	}
	mode := fs.FileMode(req.Mode)
	switch {
	case req.Mode != 0:
	case fi != nil:
		mode = fi.Mode().Perm() | fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky)
	default:
		mode = 0o644 &^ fsys.Umask(f.root)
	}
	if req.Append {
		file, err := f.root.OpenFile(rel, os.O_WRONLY|os.O_APPEND|os.O_CREATE, mode)
		if err != nil {
			if fi != nil && errors.Is(err, fs.ErrPermission) {
				return FileResult{}, notWritable(p, fi.Mode().Perm(), owner(fi))
			}
			return FileResult{}, fileError(p, err)
		}
		_, err = io.Copy(file, contextReader{ctx, r})
		if cerr := file.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return FileResult{}, fileError(p, err)
		}
		return f.result(rel, p, fi == nil)
	}
	if fi != nil {
		if err := f.writable(rel, p, fi); err != nil {
			return FileResult{}, err
		}
	}
	tmp := path.Join(dir, tempName(name))
	file, err := f.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return FileResult{}, fileError(p, err)
	}
	done := false
	defer func() {
		if !done {
			file.Close()
			_ = f.root.Remove(tmp)
		}
	}()
	if _, err := io.Copy(file, contextReader{ctx, r}); err != nil {
		var pe *Error
		if errors.As(err, &pe) {
			return FileResult{}, pe
		}
		return FileResult{}, fileError(p, err)
	}
	if fi != nil {
		// Keep the owner where the user may (the agent's threads are the
		// commands' user: only their own files, or none).
		if uid, gid, ok := fsys.Owner(fi); ok {
			_ = file.Chown(uid, gid)
		}
	}
	if err := file.Chmod(mode); err != nil {
		return FileResult{}, fileError(p, err)
	}
	if err := file.Sync(); err != nil {
		return FileResult{}, fileError(p, err)
	}
	if err := file.Close(); err != nil {
		return FileResult{}, fileError(p, err)
	}
	if err := f.root.Rename(tmp, rel); err != nil {
		return FileResult{}, fileError(p, err)
	}
	done = true
	if d, err := f.root.OpenFile(dir, os.O_RDONLY, 0); err == nil {
		_ = d.Sync() // the rename is durable
		d.Close()
	}
	return f.result(rel, p, fi == nil)
}

// writable checks that the session's user may open rel, the existing file
// fi, for writing, as a command's write would: the rename that replaces it
// needs only the directory's permission, and would replace a file its mode
// or owner keeps from changing. It opens the file itself (without
// truncating it), so that the kernel decides, capabilities and all.
func (f *filesystem) writable(rel, p string, fi fs.FileInfo) error {
	file, err := f.root.OpenFile(rel, os.O_WRONLY|syscall.O_NONBLOCK, 0)
	switch {
	case err == nil:
		file.Close()
	case errors.Is(err, fs.ErrPermission):
		return notWritable(p, fi.Mode().Perm(), owner(fi))
	case errors.Is(err, syscall.EROFS):
		return fileError(p, err)
	}
	// Anything else (a program running, ETXTBSY; a name that changed
	// meanwhile) is no refusal: the rename may replace it.
	return nil
}

// owner is fi's owner and group as "UID:GID", or "" when unknown.
func owner(fi fs.FileInfo) string {
	if uid, gid, ok := fsys.Owner(fi); ok {
		return fmt.Sprintf("%d:%d", uid, gid)
	}
	return ""
}

// notWritable is the error of a write over p, an existing file of mode and
// owner ("" when unknown) that the session's user may not open for writing.
func notWritable(p string, mode fs.FileMode, owner string) *Error {
	e := &Error{Code: CodeFileError, Errno: "EACCES", Path: p}
	switch {
	case mode&0o200 == 0:
		e.Message = fmt.Sprintf("permission denied: %s is read-only (mode %04o) — chmod u+w it first", p, mode)
	case owner != "":
		e.Message = fmt.Sprintf("permission denied: the session's user may not write %s (mode %04o, owner %s)", p, mode, owner)
	default:
		e.Message = fmt.Sprintf("permission denied: the session's user may not write %s (mode %04o)", p, mode)
	}
	return e
}

func (f *filesystem) result(rel, p string, created bool) (FileResult, error) {
	fi, err := f.root.Stat(rel)
	if err != nil {
		return FileResult{}, fileError(p, err)
	}
	return FileResult{Path: p, Size: fi.Size(), Mode: uint32(fi.Mode().Perm()), Created: created}, nil
}

// tempName is a fresh hidden name beside name, of the form the file tools'
// watcher ignores.
func tempName(name string) string {
	if len(name) > 180 { // stay under NAME_MAX
		name = name[:180]
	}
	return "." + name + ".corral-" + randomHex(6) + ".tmp"
}

// writeSandbox writes abs, a file of the sandbox outside the workspace,
// with the write script: its last line says whether it made the file, and
// the file's size and mode.
func (s *Server) writeSandbox(ctx context.Context, ss *session, abs string, req FileRequest, r io.Reader) (FileResult, error) {
	p := req.Path
	if abs == "/" {
		return FileResult{}, fileErrorf(p, "EISDIR", "is a directory")
	}
	mode, appendFlag := "", "0"
	if req.Mode != 0 {
		mode = strconv.FormatUint(uint64(req.Mode), 8)
	}
	if req.Append {
		appendFlag = "1"
	}
	var out, stderr bytes.Buffer
	res, err := ss.s.Sandbox().Exec(ctx, sandbox.ExecRequest{
		Argv:   []string{"sh", "-c", writeScript, "sh", abs, mode, appendFlag, randomHex(6)},
		Pipes:  true,
		Dir:    "/",
		Stdin:  contextReader{ctx, r},
		Output: &capped{b: &out, max: stderrKeep},
		Stderr: &capped{b: &stderr, max: stderrKeep},
	})
	if err != nil {
		return FileResult{}, sandboxError(ctx, err)
	}
	if f := strings.Fields(out.String()); res.ExitCode == 13 && len(f) == 3 && f[0] == "readonly" {
		m, err := strconv.ParseUint(f[2], 8, 32)
		if err == nil {
			return FileResult{}, notWritable(p, fs.FileMode(m)&fs.ModePerm, "")
		}
	}
	if res.ExitCode != 0 {
		return FileResult{}, scriptError(p, res.ExitCode, stderr.String())
	}
	fr := FileResult{Path: p, Size: -1}
	f := strings.Fields(out.String())
	if len(f) >= 1 {
		fr.Created = f[0] == "1"
	}
	if len(f) == 3 {
		fr.Size, _ = strconv.ParseInt(f[1], 10, 64)
		m, _ := strconv.ParseUint(f[2], 8, 32)
		fr.Mode = uint32(m)
	}
	return fr, nil
}

// contextReader stops reading when ctx is done.
type contextReader struct {
	ctx context.Context
	r   io.Reader
}

func (c contextReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, sandboxError(c.ctx, err)
	}
	return c.r.Read(p)
}
