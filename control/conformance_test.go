package control

import (
	"context"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/fsys"
	"github.com/corralhq/corral/sandbox"
	"github.com/corralhq/corral/sandbox/sandboxtest"
)

// The exec half of the conformance suite (sandbox/sandboxtest), run through
// the control API: each case's requests go through the Go client, the
// protocol (HTTP, or JSON-RPC over pipes) and the server to a real sandbox,
// under runc and, where it is registered, gVisor.
func TestConformance(t *testing.T) {
	for _, tr := range transports {
		for _, runtime := range []string{"", "runsc"} {
			name := tr.name + "/" + runtime
			if runtime == "" {
				name = tr.name + "/default"
			}
			t.Run(name, func(t *testing.T) {
				s := newServer(t, nil)
				if runtime != "" && !hasRuntime(t, runtime) {
					t.Skipf("%s is not registered with the Docker engine", runtime)
				}
				c := tr.connect(t, s)
				sandboxtest.Run(t, func(t *testing.T) sandbox.Sandbox {
					info := create(t, c, SessionOptions{Runtime: runtime})
					return &apiSandbox{c: c, info: info}
				})
			})
		}
	}
}

// apiSandbox is a session of the control API as a sandbox.Sandbox, for the
// conformance suite: its Exec is the API's exec, streaming.
type apiSandbox struct {
	c    *Client
	info SessionInfo
}

func (a *apiSandbox) Session() string                 { return a.info.ID }
func (a *apiSandbox) Workspace() string               { return a.info.Workspace }
func (a *apiSandbox) Start(ctx context.Context) error { return nil }
func (a *apiSandbox) Close(ctx context.Context) error {
	return a.c.CloseSession(ctx, a.info.ID)
}

func (a *apiSandbox) Shell(context.Context, io.Reader, io.Writer, <-chan sandbox.WindowSize) (int, error) {
	return -1, errors.New("the control API has no interactive shell")
}

func (a *apiSandbox) FS(context.Context) (fsys.Root, error) {
	return nil, errors.New("the control API reads and writes files as bytes (file.read, file.write), not as an fsys.Root")
}

func (a *apiSandbox) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	r := ExecRequest{
		Argv:        req.Argv,
		Command:     req.Command,
		Env:         req.Env,
		Cwd:         req.Dir,
		User:        req.User,
		Timeout:     req.Timeout.Seconds(),
		OutputLimit: req.OutputLimit,
		TTY:         !req.Pipes,
		Cols:        req.Cols,
		Rows:        req.Rows,
	}
	if req.Stdin != nil {
		b, err := io.ReadAll(req.Stdin)
		if err != nil {
			return sandbox.ExecResult{}, err
		}
		r.StdinB64 = b
		if len(b) == 0 {
			empty := ""
			r.Stdin = &empty
		}
	}
	stdout, stderr := req.Output, req.Stderr
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	res, err := a.c.Exec(ctx, a.info.ID, r, stdout, stderr)
	var e *Error
	if errors.As(err, &e) {
		switch e.Code {
		case CodeStartError, CodeBadRequest:
			// Both say the request cannot run, and the sandbox is fine.
			return sandbox.ExecResult{}, &sandbox.StartError{Reason: e.Message}
		case CodeSandboxDied:
			return sandbox.ExecResult{}, &sandbox.DiedError{Container: a.info.ID, Reason: e.Message}
		}
	}
	if err != nil {
		return sandbox.ExecResult{}, err
	}
	return sandbox.ExecResult{
		ExitCode:      res.ExitCode,
		Signal:        res.Signal,
		Duration:      time.Duration(res.DurationNS),
		Dir:           res.Dir,
		TimedOut:      res.TimedOut,
		OOMKilled:     res.OOMKilled,
		ProcessLimit:  res.ProcessLimit,
		Restarted:     res.Restarted,
		RestartReason: res.RestartReason,
		Background:    res.Background,
		OutputBytes:   res.StdoutBytes,
		StderrBytes:   res.StderrBytes,
	}, nil
}

// hasRuntime says whether the engine has the OCI runtime name.
func hasRuntime(t *testing.T, name string) bool {
	t.Helper()
	out, err := exec.Command("docker", "info", "--format", "{{json .Runtimes}}").Output()
	if err != nil {
		t.Fatalf("docker info: %v", err)
	}
	return strings.Contains(string(out), `"`+name+`"`)
}
