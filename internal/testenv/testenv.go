// Package testenv prepares what the integration tests of corral's packages need:
// a static corral binary for the sandbox's agent, built when a test first asks
// for it, and the Docker engine with the default image. Locally a test that
// needs the engine skips when it is missing; in CI (CI=true) it fails. WaitFor
// is the tests' one way to wait for something to happen.
package testenv

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"
)

// Image is the image the integration tests run in.
const Image = "corral/dev:bookworm"

// tmpRoot is the temporary directory when the test process started: the agent
// is built there, out of the way of a test that moves TMPDIR to a directory of
// its own, which goes when that test ends.
var tmpRoot = os.TempDir()

var (
	dir           string
	agent         string
	agentErr      error
	once          sync.Once
	dockerMu      sync.Mutex // guards dockerErr, dockerChecked
	dockerErr     error
	dockerChecked bool
)

// Main runs the tests of a package and removes what testenv made. Call it from
// TestMain.
func Main(m *testing.M) int {
	code := m.Run()
	if dir != "" {
		os.RemoveAll(dir)
	}
	return code
}

// Agent returns the path of a static corral binary, built once per test process
// when a test first asks for it: a run in which no test needs it (go test
// -short) builds none. It fails the test when the build fails.
func Agent(t testing.TB) string {
	t.Helper()
	path, err := BuildAgent()
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// BuildAgent builds a static corral binary once per test process and returns
// its path; later calls return the same. The go build cache makes it quick, but
// linking it still takes seconds: call it (or Agent) where a test needs the
// binary, not in TestMain, unless every test of the package does.
func BuildAgent() (string, error) {
	once.Do(func() {
		dir, agentErr = os.MkdirTemp(tmpRoot, "corral-testenv-")
		if agentErr != nil {
			return
		}
		agent = filepath.Join(dir, "corral")
		cmd := exec.Command("go", "build", "-o", agent, "github.com/corralhq/corral/cmd/corral")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "TMPDIR="+tmpRoot)
		if out, err := cmd.CombinedOutput(); err != nil {
			agentErr = fmt.Errorf("building a static corral: %v\n%s", err, out)
		}
	})
	return agent, agentErr
}

// DockerErr says why the sandbox cannot run here: no engine, or no image. It is
// nil when it can.
func DockerErr() error {
	dockerMu.Lock()
	defer dockerMu.Unlock()
	if !dockerChecked {
		dockerErr, dockerChecked = checkDocker(), true
	}
	return dockerErr
}

// NeedsDocker skips the test when the Docker engine or the image is missing, and
// fails it in CI, where they must be there. With -short (make unit) it skips.
func NeedsDocker(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: skipped with -short")
	}
	if runtime.GOOS != "linux" {
		t.Skip("the sandbox needs Linux")
	}
	err := DockerErr()
	if err == nil {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true and the sandbox cannot run: %v", err)
	}
	t.Skipf("skipping: %v", err)
}

func checkDocker() error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "docker", "image", "inspect", "--format", "{{.Id}}", Image).CombinedOutput()
	if err != nil {
		return fmt.Errorf("no Docker engine with the image %s (run `make image`): %v: %s", Image, err, out)
	}
	return nil
}

// pollInterval is how often WaitFor looks.
const pollInterval = 20 * time.Millisecond

// WaitFor waits until cond holds, looking every 20 ms, and fails the test when
// it does not within bound: "what: not within bound". bound is a limit for a
// run gone wrong (generous: the machine may be loaded), not a timing the test
// asserts. cond runs on the test's goroutine and may use t.
func WaitFor(t testing.TB, bound time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, bound)
		}
		time.Sleep(pollInterval)
	}
}

// SyncBuffer is a bytes.Buffer safe for a writer and a concurrent reader.
type SyncBuffer struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
