package control

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral"
	"github.com/corralhq/corral/internal/testenv"
	"github.com/corralhq/corral/sandbox"
	"github.com/corralhq/corral/sandbox/docker"
)

func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m))
}

// newServer makes a server on a fresh workspace root, with the test image
// and agent; change adjusts its options. It is closed when the test ends,
// and every sandbox it made must then be gone.
func newServer(t *testing.T, change func(*Options)) *Server {
	t.Helper()
	testenv.NeedsDocker(t)
	root := t.TempDir()
	opts := Options{Config: corral.Config{
		Workspace: root,
		Sandbox:   sandbox.Config{Agent: testenv.Agent(t), Image: testenv.Image, Memory: 512 << 20},
	}}
	if change != nil {
		change(&opts)
	}
	s, err := NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ids := s.List()
		if err := s.Close(); err != nil {
			t.Errorf("closing the server: %v", err)
		}
		backend := opts.Config.Backend
		if backend == nil {
			backend = docker.Backend
		}
		list, err := backend.List(context.Background())
		if err != nil {
			t.Errorf("listing the sandboxes: %v", err)
		}
		for _, info := range ids {
			for _, l := range list {
				if l.Session == info.ID {
					t.Errorf("session %s: its sandbox %s is still there after the server closed", info.ID, l.Name)
				}
			}
		}
	})
	return s
}

// containerExists says whether session id's container is on the engine.
func containerExists(t *testing.T, id string) bool {
	t.Helper()
	out, err := exec.Command("docker", "ps", "-aq", "--filter", "label="+sandbox.LabelSession+"="+id).Output()
	if err != nil {
		t.Fatalf("docker ps: %v", err)
	}
	return strings.TrimSpace(string(out)) != ""
}

// transport is one way to reach a server.
type transport struct {
	name    string
	connect func(t *testing.T, s *Server) *Client
}

var transports = []transport{
	{"http", httpClient},
	{"stdio", stdioClient},
}

// httpClient serves s over HTTP on loopback and returns a client of it.
func httpClient(t *testing.T, s *Server) *Client {
	t.Helper()
	ts := httptest.NewServer(s.Handler(HTTPOptions{}))
	t.Cleanup(ts.Close)
	c := NewClient(ts.URL, "")
	t.Cleanup(func() { c.Close() })
	return c
}

// stdioClient serves s as JSON-RPC over a pair of pipes and returns a
// client of it.
func stdioClient(t *testing.T, s *Server) *Client {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := s.ServeStdio(context.Background(), inR, outW)
		outW.Close()
		done <- err
	}()
	c := NewStdioClient(outR, inW)
	t.Cleanup(func() {
		c.Close()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("ServeStdio: %v", err)
			}
		case <-time.After(time.Minute):
			t.Errorf("ServeStdio did not return after its input ended")
		}
	})
	return c
}

// bound is the longest any one request of a test may take.
const bound = 2 * time.Minute

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	t.Cleanup(cancel)
	return ctx
}

// create opens a session or fails the test.
func create(t *testing.T, c *Client, o SessionOptions) SessionInfo {
	t.Helper()
	info, err := c.Create(ctxT(t), o)
	if err != nil {
		t.Fatalf("create %+v: %v", o, err)
	}
	return info
}

// run execs a shell command with its output in the result, and fails the
// test on an error.
func run(t *testing.T, c *Client, id, command string) ExecResult {
	t.Helper()
	res, err := c.Exec(ctxT(t), id, ExecRequest{Command: command}, nil, nil)
	if err != nil {
		t.Fatalf("exec %q: %v", command, err)
	}
	return res
}

// out is the stdout of run, which must exit 0.
func out(t *testing.T, c *Client, id, command string) string {
	t.Helper()
	res := run(t, c, id, command)
	if res.ExitCode != 0 {
		t.Fatalf("exec %q: exit %d: %s %s", command, res.ExitCode, str(res.Stdout), str(res.Stderr))
	}
	return str(res.Stdout)
}

func str(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// wantCode checks that err is an *Error of code (and errno, when given).
func wantCode(t *testing.T, err error, code, errno string) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("got %v, want a %s error", err, code)
	}
	if e.Code != code || (errno != "" && e.Errno != errno) {
		t.Fatalf("got %s %s (%s), want %s %s", e.Code, e.Errno, e.Message, code, errno)
	}
	if e.Message == "" {
		t.Errorf("%s error without a message", code)
	}
	return e
}

// noProcess waits until no process of the sandbox has tag in its command
// line (the agent sends SIGKILL 2 s after SIGTERM); it fails the test if one
// is left.
func noProcess(t *testing.T, c *Client, id, tag string) {
	t.Helper()
	var left string
	defer func() {
		if left != "" {
			t.Logf("still running:\n%s", left)
		}
	}()
	testenv.WaitFor(t, 20*time.Second, "no process of "+tag+" in the sandbox", func() bool {
		left = out(t, c, id, fmt.Sprintf(`for d in /proc/[0-9]*; do tr '\0' ' ' < $d/cmdline 2>/dev/null; echo; done | grep -- %q | grep -v grep || true`, tag))
		return left == ""
	})
}
