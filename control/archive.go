package control

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync"

	"github.com/corralhq/corral/sandbox"
)

// A directory of a session's sandbox travels as a tar stream (archive.read,
// archive.write): tar runs in the sandbox as the session's user, on the
// directory's path there, so that a request does to the files what a command
// of the session could, no more — in the workspace or outside it, whatever
// links or names the archive holds — as the file requests. The image needs
// sh and tar.

// The archive scripts; their exit status says what went wrong, as the file
// scripts' do (2 ENOENT, 13 EACCES, 20 ENOTDIR, 5 EIO: tar failed, its
// stderr says why); 127 says the image has no tar.
const (
	archiveReadScript = `p=$1
command -v tar >/dev/null 2>&1 || exit 127
if [ ! -e "$p" ]; then exit 2; fi
if [ ! -d "$p" ]; then exit 20; fi
cd -- "$p" 2>/dev/null || exit 13
tar -cf - . || exit 5
`
	archiveWriteScript = `p=$1
command -v tar >/dev/null 2>&1 || exit 127
if [ -e "$p" ] && [ ! -d "$p" ]; then exit 20; fi
if [ ! -d "$p" ]; then
	d=${p%/*}
	while [ -n "$d" ] && [ ! -e "$d" ]; do d=${d%/*}; done
	if [ -n "$d" ] && [ ! -d "$d" ]; then exit 20; fi
	mkdir -p -- "$p" 2>/dev/null || exit 13
fi
cd -- "$p" 2>/dev/null || exit 13
tar -xvf - || exit 5
`
)

// archiveError is the error of an archive script that exited with code.
func archiveError(p string, code int, stderr string) *Error {
	if code == 126 || code == 127 {
		return fileErrorf(p, "EIO", "the sandbox cannot run tar (the image needs sh and tar): %s", strings.TrimSpace(stderr))
	}
	if code == 13 {
		return fileErrorf(p, "EACCES", "permission denied: the session's user may not enter or make the directory")
	}
	return scriptError(p, code, stderr)
}

// archivePath is p, relative to the session's workdir or absolute, as an
// absolute path in the sandbox.
func archivePath(ss *session, p string) (string, error) {
	switch {
	case p == "":
		return "", errorf(CodeBadRequest, "no path given: name the directory")
	case strings.IndexByte(p, 0) >= 0:
		return "", errorf(CodeBadRequest, "path %q holds a NUL byte", p)
	}
	return inDir(ss.workdir, p), nil
}

// openArchive starts tar on directory p of session ss: its stream is the
// reader's, and its close says how tar ended.
func (s *Server) openArchive(ctx context.Context, ss *session, p string) (*fileReader, error) {
	abs, err := archivePath(ss, p)
	if err != nil {
		return nil, err
	}
	box := ss.s.Sandbox()
	ctx, cancel := context.WithCancel(ctx)
	pr, pw := io.Pipe()
	var stderr bytes.Buffer
	done := make(chan error, 1)
	go func() {
		res, err := box.Exec(ctx, sandbox.ExecRequest{
			Argv:   []string{"sh", "-c", archiveReadScript, "sh", abs},
			Pipes:  true,
			Dir:    "/",
			Output: pw,
			Stderr: &capped{b: &stderr, max: stderrKeep},
		})
		switch {
		case err != nil:
			err = sandboxError(ctx, err)
		case res.ExitCode != 0:
			err = archiveError(p, res.ExitCode, stderr.String())
		}
		pw.CloseWithError(err)
		done <- err
	}()
	var once sync.Once
	var closeErr error
	return &fileReader{Reader: pr, size: -1, close: func() error {
		once.Do(func() {
			pr.Close()
			cancel()
			closeErr = <-done
			var pe *Error
			if errors.As(closeErr, &pe) && pe.Code == CodeCanceled {
				closeErr = nil
			}
		})
		return closeErr
	}}, nil
}

// ReadArchive returns directory req.Path of session req.Session as a tar
// stream, in base64; a stream larger than the server's --max-output is
// refused (GET .../archive streams it).
func (s *Server) ReadArchive(ctx context.Context, req ArchiveRequest) (ArchiveResult, error) {
	if req.ContentB64 != nil {
		return ArchiveResult{}, errorf(CodeBadRequest, "%s takes path; content_b64 is %s's", MethodReadArchive, MethodWriteArchive)
	}
	ss, ctx, release, err := s.acquire(ctx, req.Session)
	if err != nil {
		return ArchiveResult{}, err
	}
	defer release()
	r, err := s.openArchive(ctx, ss, req.Path)
	if err != nil {
		return ArchiveResult{}, err
	}
	limit := s.opts.MaxOutput
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if int64(len(data)) > limit {
		r.close()
		return ArchiveResult{}, &Error{Code: CodeTooLarge, Errno: "EFBIG", Path: req.Path, Message: req.Path + "'s archive is more than the " + sizeText(limit) + " a response may hold (the server's --max-output): read it over HTTP (GET .../archive streams it)"}
	}
	if cerr := r.close(); cerr != nil {
		return ArchiveResult{}, cerr
	}
	if err != nil {
		return ArchiveResult{}, fileError(req.Path, err)
	}
	return ArchiveResult{Path: req.Path, ContentB64: data, Size: int64(len(data))}, nil
}

// WriteArchive unpacks req's tar stream into directory req.Path of session
// req.Session, making it when it is missing.
func (s *Server) WriteArchive(ctx context.Context, req ArchiveRequest) (ArchiveResult, error) {
	if req.ContentB64 == nil {
		return ArchiveResult{}, errorf(CodeBadRequest, `give the archive in "content_b64" (a tar stream, in base64)`)
	}
	return s.writeArchiveFrom(ctx, req, bytes.NewReader(req.ContentB64))
}

// writeArchiveFrom unpacks the tar stream r; see WriteArchive.
func (s *Server) writeArchiveFrom(ctx context.Context, req ArchiveRequest, r io.Reader) (ArchiveResult, error) {
	ss, ctx, release, err := s.acquire(ctx, req.Session)
	if err != nil {
		return ArchiveResult{}, err
	}
	defer release()
	abs, err := archivePath(ss, req.Path)
	if err != nil {
		return ArchiveResult{}, err
	}
	var names lineCounter
	var stderr bytes.Buffer
	res, err := ss.s.Sandbox().Exec(ctx, sandbox.ExecRequest{
		Argv:   []string{"sh", "-c", archiveWriteScript, "sh", abs},
		Pipes:  true,
		Dir:    "/",
		Stdin:  contextReader{ctx, r},
		Output: &names,
		Stderr: &capped{b: &stderr, max: stderrKeep},
	})
	switch {
	case err != nil:
		return ArchiveResult{}, sandboxError(ctx, err)
	case res.ExitCode != 0:
		return ArchiveResult{}, archiveError(req.Path, res.ExitCode, stderr.String())
	}
	return ArchiveResult{Path: req.Path, Entries: names.n}, nil
}

// lineCounter counts the lines written to it.
type lineCounter struct{ n int }

func (l *lineCounter) Write(p []byte) (int, error) {
	l.n += bytes.Count(p, []byte{'\n'})
	return len(p), nil
}
