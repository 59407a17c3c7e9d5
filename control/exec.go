package control

import (
	"bytes"
	"context"
	"fmt"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/corralhq/corral/sandbox"
)

// Exec runs a command in session req.Session without the model's shaping:
// no policy, its output as the command wrote it. With req.Stream and emit,
// the output goes to emit as it comes (a failing emit cancels the command:
// the client is gone); otherwise it is in the result, up to the output
// limit.
func (s *Server) Exec(ctx context.Context, req ExecRequest, emit func(Chunk) error) (ExecResult, error) {
	sreq, err := s.execRequest(req, emit != nil)
	if err != nil {
		return ExecResult{}, err
	}
	ss, ctx, release, err := s.acquire(ctx, req.Session)
	if err != nil {
		return ExecResult{}, err
	}
	defer release()
	box := ss.s.Sandbox()
	// Never the model's bash directory, which exec leaves alone: the
	// session's workdir, or a directory relative to it.
	sreq.Dir = inDir(ss.workdir, sreq.Dir)
	var stdout, stderr bytes.Buffer
	stream := req.Stream && emit != nil
	if stream {
		ctx2, cancel := context.WithCancel(ctx)
		defer cancel()
		ctx = ctx2
		w := &chunkWriter{emit: emit, cancel: cancel}
		sreq.Output, sreq.Stderr = w.stream("stdout"), w.stream("stderr")
	} else {
		sreq.Output, sreq.Stderr = &capped{b: &stdout, max: sreq.OutputLimit}, &capped{b: &stderr, max: sreq.OutputLimit}
	}
	res, err := box.Exec(ctx, sreq)
	if err != nil {
		return ExecResult{}, sandboxError(ctx, err)
	}
	out := ExecResult{
		ExitCode:      res.ExitCode,
		Signal:        res.Signal,
		TimedOut:      res.TimedOut,
		StdoutBytes:   res.OutputBytes,
		StderrBytes:   res.StderrBytes,
		Dir:           res.Dir,
		OOMKilled:     res.OOMKilled,
		ProcessLimit:  res.ProcessLimit,
		Restarted:     res.Restarted,
		RestartReason: res.RestartReason,
		Background:    res.Background,
		DurationNS:    int64(res.Duration),
	}
	if res.CannotExecute && len(sreq.Argv) > 0 {
		out.CannotExecute = cannotExecute(sreq.Argv[0], res.ExitCode)
	}
	if res.Canceled && !res.TimedOut {
		return ExecResult{}, sandboxError(ctx, context.Canceled)
	}
	if sreq.OutputLimit > 0 {
		out.Truncated = res.OutputBytes > sreq.OutputLimit || res.StderrBytes > sreq.OutputLimit
	}
	if !stream {
		textOrB64(stdout.Bytes(), &out.Stdout, &out.StdoutB64)
		if !req.TTY {
			textOrB64(stderr.Bytes(), &out.Stderr, &out.StderrB64)
		}
	}
	return out, nil
}

// inDir is p relative to dir, an absolute path; dir when p is empty.
func inDir(dir, p string) string {
	if path.IsAbs(p) {
		return p
	}
	return path.Join(dir, p)
}

// cannotExecute describes an argv's program that never ran, by the shell's
// exit code.
func cannotExecute(program string, code int) *CannotExecute {
	if code == 127 {
		return &CannotExecute{Program: program, Reason: ReasonNotFound, Message: fmt.Sprintf("%s was not found (exit code 127): no such file, or no such program on the PATH", program)}
	}
	return &CannotExecute{Program: program, Reason: ReasonNotExecutable, Message: fmt.Sprintf("%s cannot be executed (exit code 126): the user may not execute it, or it is a directory, on a noexec mount, or its arguments are too long; the shell's message is on stderr", program)}
}

// execRequest checks req and turns it into the sandbox's request (without
// its writers).
func (s *Server) execRequest(req ExecRequest, canStream bool) (sandbox.ExecRequest, error) {
	bad := func(format string, args ...any) (sandbox.ExecRequest, error) {
		return sandbox.ExecRequest{}, errorf(CodeBadRequest, format, args...)
	}
	switch {
	case len(req.Argv) == 0 && req.Command == "":
		return bad(`give "argv" (a program and its arguments) or "command" (a shell command)`)
	case len(req.Argv) > 0 && req.Command != "":
		return bad(`give "argv" or "command", not both`)
	case len(req.Argv) > 0 && req.Argv[0] == "":
		return bad(`argv[0] is empty: name the program`)
	case req.Timeout < 0:
		return bad("timeout %v: want a positive number of seconds, or none", req.Timeout)
	case req.OutputLimit < 0:
		return bad("output_limit %d: want a positive number of bytes", req.OutputLimit)
	}
	for i, w := range req.Argv {
		if strings.IndexByte(w, 0) >= 0 {
			return bad("argv[%d] holds a NUL byte, which no argument can carry", i)
		}
	}
	if strings.IndexByte(req.Command, 0) >= 0 {
		return bad("command holds a NUL byte, which no command can carry")
	}
	stdin, hasStdin, err := bytesOf("stdin", req.Stdin, req.StdinB64)
	if err != nil {
		return sandbox.ExecRequest{}, err
	}
	sreq := sandbox.ExecRequest{
		Argv:    req.Argv,
		Command: req.Command,
		Dir:     req.Cwd,
		User:    req.User,
		Pipes:   !req.TTY,
		Timeout: time.Duration(req.Timeout * float64(time.Second)),
		Cols:    req.Cols,
		Rows:    req.Rows,
	}
	if hasStdin {
		sreq.Stdin = bytes.NewReader(stdin)
	}
	// The sandbox checks each pair: a malformed one is a start_error.
	sreq.Env = req.Env
	limit := req.OutputLimit
	switch {
	case req.Stream && canStream:
		// Nothing is held: no limit unless asked.
	case limit == 0:
		limit = min(defaultOutputLimit, s.opts.MaxOutput)
	case limit > s.opts.MaxOutput:
		return sandbox.ExecRequest{}, errorf(CodeTooLarge, "output_limit %s is more than the %s a result may hold (the server's --max-output): stream the output, or ask for less", sizeText(limit), sizeText(s.opts.MaxOutput))
	}
	sreq.OutputLimit = limit
	return sreq, nil
}

// capped keeps at most max bytes (all when max is zero); the agent applies
// the limit already, this keeps memory bounded whatever it sends.
type capped struct {
	b   *bytes.Buffer
	max int64
}

func (c *capped) Write(p []byte) (int, error) {
	n := len(p)
	if c.max > 0 {
		p = p[:min(int64(len(p)), max(c.max-int64(c.b.Len()), 0))]
	}
	c.b.Write(p)
	return n, nil
}

// chunkWriter sends a streamed command's output as chunks; stdout and
// stderr write from goroutines of their own, so it sends one at a time.
type chunkWriter struct {
	mu     sync.Mutex // serialises emit
	emit   func(Chunk) error
	cancel context.CancelFunc
	failed bool
}

func (w *chunkWriter) stream(name string) *streamWriter { return &streamWriter{w: w, name: name} }

type streamWriter struct {
	w    *chunkWriter
	name string
}

func (s *streamWriter) Write(p []byte) (int, error) {
	c := Chunk{Stream: s.name}
	textOrB64(bytes.Clone(p), &c.Data, &c.DataB64)
	w := s.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failed {
		return len(p), nil // the command is being ended
	}
	if err := w.emit(c); err != nil {
		// The client is gone or stuck: end the command.
		w.failed = true
		w.cancel()
	}
	return len(p), nil
}
