package tools

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/fsys"
	"github.com/corralhq/corral/internal/testenv"
	"github.com/corralhq/corral/sandbox"
)

// The file tools' tests run twice: on the host's filesystem, and, in a child
// process that TestFileToolsThroughAgent starts with CORRAL_TOOLS_TEST_FS=agent,
// on the workspace as a sandbox's agent gives it (sandbox.AgentFS, the way a
// Kubernetes backend does). There, each test's workspace is a directory of
// one shared sandbox's workspace, and the session's Options.FS is that
// directory opened through the agent: every file access of read, edit and
// write crosses the protocol and happens inside the container, as the
// commands' user. The test's own checks look at the same files from the
// host, through the bind mount.
const fsModeEnv = "CORRAL_TOOLS_TEST_FS"

var agentMode = os.Getenv(fsModeEnv) == "agent"

// agentTests are the tests of the file tools' behaviour that run through the
// agent too: reading, editing, writing, staleness, atomicity, line endings,
// modes, confinement, protected paths, hostile names, the write queue.
var agentTests = `^(TestRead|TestPartialRead|TestEdit|TestWrite|TestChangeDuringWrite|TestConfinement|TestProtected|TestHostile|TestConcurrentEdits|TestTrustUntrustedText|TestTrustAgentTooling|TestAgentFS)`

// shared is the sandbox whose agent serves the workspaces in agent mode, and
// sharedFS its workspace through the agent.
var (
	sharedBox *sandbox.Container
	sharedFS  *sandbox.AgentFS
)

// runThroughAgent is TestMain in agent mode: it starts the shared sandbox,
// runs the tests and removes it.
func runThroughAgent(m *testing.M) int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "tools tests through the agent:", err)
		return 1
	}
	if err := testenv.DockerErr(); err != nil {
		return fail(err)
	}
	agent, err := testenv.BuildAgent()
	if err != nil {
		return fail(err)
	}
	dir, err := os.MkdirTemp("", "corral-tools-agentfs-")
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(dir)
	sharedBox, err = sandbox.New(sandbox.Config{Workspace: dir, Image: testenv.Image, Agent: agent, Memory: 512 << 20})
	if err != nil {
		return fail(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = sharedBox.Close(ctx)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if sharedFS, err = sharedBox.AgentFS(ctx); err != nil {
		return fail(err)
	}
	defer sharedFS.Close()
	return testenv.Main(m)
}

// testWorkspace makes a fresh workspace: a temporary directory, or in agent
// mode a directory of the shared sandbox's workspace.
func testWorkspace(t testing.TB) string {
	t.Helper()
	if !agentMode {
		return t.TempDir()
	}
	dir, err := os.MkdirTemp(sharedBox.Workspace(), strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())+"-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// agentRoot opens the workspace ws, a directory of the shared sandbox's
// workspace, through the agent, for Options.FS.
func agentRoot(t testing.TB, ws string) fsys.Root {
	t.Helper()
	rel, err := filepath.Rel(sharedBox.Workspace(), ws)
	if err != nil || strings.HasPrefix(rel, "..") {
		t.Fatalf("workspace %s is not in the shared sandbox's %s", ws, sharedBox.Workspace())
	}
	r, err := sharedFS.OpenRoot(filepath.ToSlash(rel))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	if r.Name() != ws {
		t.Fatalf("the agent's workspace is %s, want %s", r.Name(), ws)
	}
	return r
}

// In agent mode the sessions' file accesses really go through the agent:
// the workspace is no local directory, and a file write creates belongs to
// the commands' user rather than to the test's.
func TestAgentFSIsUsed(t *testing.T) {
	if !agentMode {
		t.Skip("runs in the child, through the agent")
	}
	s, ws := newTestSession(t, nil)
	if s.ws.local != nil {
		t.Fatal("the session's workspace is on the host's filesystem")
	}
	mustOK(t, s, "write", m{"path": "new.txt", "content": "x\n"})
	fi, err := os.Stat(filepath.Join(ws, "new.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if uid, _, _ := fsys.Owner(fi); os.Geteuid() == 0 && uid == 0 {
		t.Errorf("write made a file of root's: it did not go through the agent, as the commands' user")
	}
}

// TestFileToolsThroughAgent runs the file tools' tests again, in a child
// process, on workspaces reached through a real sandbox's agent.
func TestFileToolsThroughAgent(t *testing.T) {
	if agentMode {
		t.Skip("this is the child")
	}
	testenv.NeedsDocker(t)
	if runtime.GOOS != "linux" {
		t.Skip("the agent runs on Linux")
	}
	args := []string{"-test.run=" + agentTests, "-test.count=1", "-test.timeout=20m"}
	if testing.Verbose() {
		args = append(args, "-test.v")
	}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), fsModeEnv+"=agent")
	out, err := cmd.CombinedOutput()
	ran := len(regexp.MustCompile(`(?m)^\s*--- (PASS|FAIL|SKIP)`).FindAll(out, -1))
	if err != nil {
		t.Fatalf("the file tools' tests through the agent failed: %v\n%s", err, out)
	}
	if testing.Verbose() {
		t.Logf("%d tests through the agent:\n%s", ran, out)
	}
	if !strings.Contains(string(out), "PASS") {
		t.Fatalf("no test ran through the agent:\n%s", out)
	}
}
