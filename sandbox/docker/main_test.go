package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/corralhq/corral/internal/testenv"
	"github.com/corralhq/corral/sandbox"
)

// The integration tests run against the real Docker engine. Locally they skip
// when it (or the image) is missing; in CI (CI=true) they fail.

var (
	testAgent string // a static agent binary
	testImage string // the image the tests run in
	setupErr  error  // why the integration tests cannot run
)

const (
	devImage  = sandbox.DefaultImage
	baseImage = "corral/base:bookworm"
	// helperEnv makes the test binary act as a corral process that opens a
	// sandbox and waits to be killed (TestGCAfterKill).
	helperEnv = "CORRAL_SANDBOX_TEST_HELPER"
)

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(runHelper())
	}
	flag.Parse()
	dir, err := os.MkdirTemp("", "corral-sandbox-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	setupErr = setup(dir)
	if setupErr != nil {
		fmt.Fprintln(os.Stderr, "sandbox integration tests:", setupErr)
	}
	code := m.Run()
	closeShared()
	removeOwnContainers()
	os.RemoveAll(dir)
	os.Exit(code)
}

// setup checks the engine and the image and builds the agent.
func setup(dir string) error {
	api, err := engine()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if _, err := api.Info(ctx); err != nil {
		return fmt.Errorf("docker engine unreachable: %w", err)
	}
	for _, img := range []string{devImage, baseImage} {
		if _, err := api.ImageInspect(ctx, img); err == nil {
			testImage = img
			break
		}
	}
	if testImage == "" {
		return fmt.Errorf("neither %s nor %s is on the engine: run `make image`", devImage, baseImage)
	}
	if testing.Short() {
		return nil // need skips every test that would run the agent
	}
	testAgent, err = buildAgent(dir)
	return err
}

// buildAgent builds the static corral binary the containers run as their agent.
// When ./cmd/corral does not build (another room of the tree is mid-change) it
// builds a stand-in main around the same agent.Run.
func buildAgent(dir string) (string, error) {
	out := filepath.Join(dir, "corral")
	build := func(pkg string) error {
		cmd := exec.Command("go", "build", "-o", out, pkg)
		cmd.Dir = "../.."
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		b, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
		}
		return nil
	}
	if err := build("./cmd/corral"); err != nil {
		fmt.Fprintf(os.Stderr, "sandbox tests: ./cmd/corral does not build, using the stand-in agent: %v\n", firstLine(err.Error()))
		if err := build("./sandbox/docker/testdata/agent"); err != nil {
			return "", err
		}
	}
	if _, _, err := checkAgent(out); err != nil {
		return "", fmt.Errorf("the test agent is not usable: %w", err)
	}
	return out, nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// need skips (locally) or fails (in CI) a test when the engine is missing; with
// -short (make unit) it skips.
func need(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: skipped with -short")
	}
	if setupErr == nil {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("integration test needs Docker and the sandbox image: %v", setupErr)
	}
	t.Skipf("skipping integration test: %v (in CI this fails)", setupErr)
}

// testConfig is a sandbox configuration for a fresh workspace.
func testConfig(t testing.TB) sandbox.Config {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return sandbox.Config{
		Workspace: t.TempDir(),
		Image:     testImage,
		Agent:     testAgent,
		Session:   "test-" + hex.EncodeToString(b[:]),
		Memory:    512 << 20,
		Env:       []string{"GIT_AUTHOR_NAME=corral test", "GIT_AUTHOR_EMAIL=test@corral.invalid", "GIT_COMMITTER_NAME=corral test", "GIT_COMMITTER_EMAIL=test@corral.invalid"},
	}
}

// privateWorkspace makes cfg's workspace belong to an ordinary user, mode
// 0700 (as mktemp -d makes it): the caller's own when the test does not run
// as root, else uid 1001's. Its commands run as that user, and the agent
// holds no CAP_DAC_OVERRIDE. It returns the owner.
func privateWorkspace(t testing.TB, cfg sandbox.Config) int {
	t.Helper()
	uid := os.Getuid()
	if uid == 0 {
		uid = 1001
		if err := os.Chown(cfg.Workspace, uid, uid); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(cfg.Workspace, 0o700); err != nil {
		t.Fatal(err)
	}
	return uid
}

// newSandbox starts a sandbox for the test and removes it afterwards.
func newSandbox(t testing.TB, cfg sandbox.Config) *Container {
	t.Helper()
	need(t)
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(context.Background()); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return c
}

// run runs a command that must return within bound (far above what it needs:
// only a hang fails the test) and returns its result and output.
func run(t testing.TB, c *Container, req sandbox.ExecRequest) (sandbox.ExecResult, string) {
	t.Helper()
	return runCtx(t, context.Background(), c, req)
}

func runCtx(t testing.TB, ctx context.Context, c *Container, req sandbox.ExecRequest) (sandbox.ExecResult, string) {
	t.Helper()
	var out testenv.SyncBuffer
	if req.Output == nil {
		req.Output = &out
	}
	type ret struct {
		res sandbox.ExecResult
		err error
	}
	done := make(chan ret, 1)
	go func() {
		res, err := c.Exec(ctx, req)
		done <- ret{res, err}
	}()
	bound := 60 * time.Second
	if req.Timeout > 0 {
		bound += req.Timeout
	}
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatalf("exec %q: %v", req.Command, r.err)
		}
		return r.res, out.String()
	case <-time.After(bound):
		t.Fatalf("exec %q hung for %v", req.Command, bound)
	}
	panic("unreachable")
}

// sh runs a command and fails the test unless it exits 0; it returns the output
// as clean gives it.
func sh(t testing.TB, c *Container, cmd string) string {
	t.Helper()
	res, out := run(t, c, sandbox.ExecRequest{Command: cmd})
	if res.ExitCode != 0 {
		t.Fatalf("%q exited %d: %s", cmd, res.ExitCode, out)
	}
	return clean(out)
}

// clean turns CRLF into LF and trims the space around s.
func clean(s string) string {
	return strings.TrimSpace(strings.ReplaceAll(s, "\r\n", "\n"))
}

// hasTool reports whether the sandbox's image has a program.
func hasTool(t testing.TB, c *Container, name string) bool {
	res, _ := run(t, c, sandbox.ExecRequest{Command: "command -v " + name})
	return res.ExitCode == 0
}

// waitFor polls cond until it holds or bound passes.
func waitFor(t testing.TB, bound time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, bound)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The shared sandbox serves benchmarks, which want one warm container.
var (
	sharedOnce sync.Once
	sharedC    *Container
	sharedErr  error
)

func shared(tb testing.TB) *Container {
	tb.Helper()
	need(tb)
	sharedOnce.Do(func() {
		dir, err := os.MkdirTemp("", "corral-shared-")
		if err != nil {
			sharedErr = err
			return
		}
		cfg := sandbox.Config{Workspace: dir, Image: testImage, Agent: testAgent, Session: "test-shared-" + strconv.Itoa(os.Getpid())}
		if sharedC, sharedErr = New(cfg); sharedErr == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			sharedErr = sharedC.Start(ctx)
		}
	})
	if sharedErr != nil {
		tb.Fatal(sharedErr)
	}
	return sharedC
}

func closeShared() {
	if sharedC != nil {
		_ = sharedC.Close(context.Background())
		os.RemoveAll(sharedC.Workspace())
	}
}

// removeOwnContainers removes what this test process left behind: containers
// labelled with its pid, and no others.
func removeOwnContainers() {
	api, err := engine()
	if err != nil || setupErr != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := api.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(
		filters.Arg("label", sandbox.LabelPID+"="+strconv.Itoa(os.Getpid())),
		filters.Arg("label", sandbox.LabelHost+"="+sandbox.OwnerLabels("", "")[sandbox.LabelHost]),
	)})
	if err != nil {
		return
	}
	for _, c := range cs {
		fmt.Fprintf(os.Stderr, "sandbox tests: removing leftover container %s\n", c.Names)
		_ = api.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true})
	}
}

// containerID returns the ID of the sandbox's current container.
func containerID(t testing.TB, c *Container) string {
	t.Helper()
	id := containerIDOf(c)
	if id == "" {
		t.Fatal("no container yet")
	}
	return id
}

// runHelper is the body of the helper process: it starts a sandbox, prints the
// container ID and waits to be killed.
func runHelper() int {
	ws, agent, image := os.Getenv("HELPER_WORKSPACE"), os.Getenv("HELPER_AGENT"), os.Getenv("HELPER_IMAGE")
	c, err := New(sandbox.Config{Workspace: ws, Agent: agent, Image: image, Session: os.Getenv("HELPER_SESSION")})
	if err == nil {
		err = c.Start(context.Background())
	}
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	fmt.Println(containerIDOf(c))
	select {}
}

// containerIDOf returns the ID of the sandbox's current container, "" before
// the first start.
func containerIDOf(c *Container) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.client == nil {
		return ""
	}
	return c.client.Name()
}
