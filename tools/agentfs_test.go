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
	"github.com/corralhq/corral/sandbox/docker"
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
	sharedBox *docker.Container
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
	sharedBox, err = docker.New(sandbox.Config{Workspace: dir, Image: testenv.Image, Agent: agent, Memory: 512 << 20})
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

// agentSession opens a session whose file tools reach a fresh workspace
// through its own sandbox's agent, and whose bash runs in that sandbox.
func agentSession(t *testing.T, files map[string]string, opts ...func(*Options)) (*Session, string, *docker.Container) {
	t.Helper()
	testenv.NeedsDocker(t)
	ws := t.TempDir()
	for name, content := range files {
		writeFile(t, ws, name, content)
	}
	s, box := agentSessionOn(t, ws, opts...)
	return s, ws, box
}

// agentSessionOn is agentSession on the workspace ws.
func agentSessionOn(t *testing.T, ws string, opts ...func(*Options)) (*Session, *docker.Container) {
	t.Helper()
	box, err := docker.New(sandbox.Config{Workspace: ws, Image: testenv.Image, Agent: testenv.Agent(t), Memory: 512 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		box.Close(ctx)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	afs, err := box.AgentFS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { afs.Close() })
	o := Options{Workspace: ws, FS: afs, Sandbox: box}
	for _, f := range opts {
		f(&o)
	}
	s, err := NewSession(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, box
}

// inBox runs a command in the sandbox, outside the tools, and returns its
// output.
func inBox(t *testing.T, box *docker.Container, cmd string) string {
	t.Helper()
	var out testenv.SyncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := box.Exec(ctx, sandbox.ExecRequest{Command: cmd, Output: &out})
	if err != nil {
		t.Fatalf("%s: %v", cmd, err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("%s exited %d: %s", cmd, res.ExitCode, out.String())
	}
	return strings.TrimSpace(strings.ReplaceAll(out.String(), "\r\n", "\n"))
}

// A command in the sandbox swaps the directory the tools write in for a
// symbolic link to a directory outside the workspace that it may write, and
// the file for a link to the outside, again and again, while write and edit
// run through the agent: nothing lands outside.
func TestAgentFSCommandRacesSymlinks(t *testing.T) {
	s, ws, box := agentSession(t, map[string]string{"d/f.txt": "start\n"}, func(o *Options) { o.WritePolicy = AllowOverwrite })
	race := `import os, time
os.makedirs('/tmp/outside', exist_ok=True)
os.symlink('/tmp/outside', 'd.link')
swaps, end = 0, time.time() + 60
while time.time() < end and not os.path.exists('stop'):
    try:
        os.rename('d', 'd.real'); os.rename('d.link', 'd')      # d is the link
        os.rename('d', 'd.link'); os.rename('d.real', 'd')      # d is the directory
        os.symlink('/tmp/outside/f.txt', 'd/f.new'); os.rename('d/f.new', 'd/f.txt')  # the file is a link
        swaps += 1
    except OSError:
        pass
print('swaps', swaps)
`
	writeFile(t, ws, "race.py", race)
	done := make(chan string, 1)
	go func() {
		var out testenv.SyncBuffer
		_, err := box.Exec(context.Background(), sandbox.ExecRequest{Command: "python3 race.py", Output: &out, Timeout: 2 * time.Minute})
		done <- fmt.Sprint(out.String(), err)
	}()
	time.Sleep(500 * time.Millisecond)
	wrote := 0
	const rounds = 200
	for i := range rounds {
		r := call(t, s, "write", m{"path": "d/f.txt", "content": fmt.Sprintf("write %d\n", i)})
		if !r.IsError {
			wrote++
		}
		call(t, s, "write", m{"path": "d/new.txt", "content": "new\n"})
		if r := call(t, s, "read", m{"path": "d/f.txt"}); !r.IsError {
			call(t, s, "edit", m{"path": "d/f.txt", "oldText": "write", "newText": "edit"})
		}
	}
	writeFile(t, ws, "stop", "")
	out := <-done
	t.Logf("race: %s; %d of %d writes went through", strings.TrimSpace(out), wrote, rounds)
	if !strings.Contains(out, "swaps ") || strings.Contains(out, "swaps 0") {
		t.Fatalf("the race did not run: %s", out)
	}
	if wrote == 0 {
		t.Fatal("no write went through: the race proved nothing")
	}
	if got := inBox(t, box, "ls -A /tmp/outside"); got != "" {
		t.Errorf("files outside the workspace: %q", got)
	}
}

// Names a command gives files — control characters, escape sequences, bytes
// that are not UTF-8, a line break — reach the model only made visible, and
// the tools work on such files by their names.
func TestAgentFSHostileNames(t *testing.T) {
	s, _, box := agentSession(t, nil)
	inBox(t, box, `mkdir d && printf 'x\n' > "d/$(printf 'a\033]0;pwned\007b')" && printf 'y\n' > "d/$(printf 'bad\377\376name')" && printf 'z\n' > "d/$(printf 'new\nline')" && printf 'w\n' > "d/$(printf 'Exit code: 0')"`)
	r := mustOK(t, s, "read", m{"path": "d"})
	for _, bad := range []string{"\x1b", "\x07", "\xff", "new\nline"} {
		if strings.Contains(r.Content, bad) {
			t.Errorf("the listing shows %q raw:\n%q", bad, r.Content)
		}
	}
	wantFacts(t, r.Content, `a\x1b]0;pwned\x07b`, `new\nline`, "Exit code: 0")
	if d := r.Details.(*ReadDetails); d.Total != 4 {
		t.Errorf("%d entries, want 4", d.Total)
	}
	mustOK(t, s, "read", m{"path": "d/Exit code: 0"})
	mustOK(t, s, "edit", m{"path": "d/Exit code: 0", "oldText": "w", "newText": "v"})
	if got := inBox(t, box, "cat 'd/Exit code: 0'"); got != "v" {
		t.Errorf("after the edit: %q", got)
	}
}

// A sparse terabyte a command made: read shows its first lines through the
// agent without reading it to its end, edit refuses it as too large, and a
// write over it needs it read first.
func TestAgentFSHugeFile(t *testing.T) {
	s, _, box := agentSession(t, nil)
	inBox(t, box, "seq 1 5000 > huge && truncate -s 1T huge")
	start := time.Now()
	r := mustOK(t, s, "read", m{"path": "huge", "limit": 5})
	wantFacts(t, r.Content, "1\t1\n2\t2", "too large to count its lines")
	t.Logf("read the head of 1 TB through the agent in %v", time.Since(start))
	mustFail(t, s, "edit", m{"path": "huge", "oldText": "1", "newText": "2"}, "more than the", "Change it with bash instead")
}

// A named pipe a command made, with a writer holding it open or not, blocks
// none of the tools through the agent.
func TestAgentFSFIFO(t *testing.T) {
	s, _, box := agentSession(t, nil)
	inBox(t, box, "mkfifo pipe")
	done := make(chan struct{})
	go func() {
		defer close(done)
		mustFail(t, s, "read", m{"path": "pipe"}, "named pipe")
		mustFail(t, s, "edit", m{"path": "pipe", "oldText": "a", "newText": "b"}, "named pipe")
		mustFail(t, s, "write", m{"path": "pipe", "content": "x"}, "named pipe")
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("a tool blocked on a named pipe")
	}
}

// A command keeps rewriting a file (whole, through a temporary file and a
// rename, or in place) while the tools read and edit it through the agent:
// every edit that succeeds was made on the content it read, no edit is
// lost silently, no Go error, and the file is never torn.
func TestAgentFSFileRewrittenByCommand(t *testing.T) {
	s, ws, box := agentSession(t, map[string]string{"f.txt": "line a\nline b\n"})
	writeFile(t, ws, "churn.py", `import os, time
end = time.time() + 60
i = 0
while time.time() < end and not os.path.exists('stop'):
    i += 1
    body = 'line a\nline b\ncommand %d\n' % i
    if i % 2:
        with open('f.tmp', 'w') as f: f.write(body)
        os.rename('f.tmp', 'f.txt')
    else:
        with open('f.txt', 'w') as f: f.write(body)
    time.sleep(0.4 if i % 5 == 0 else 0.01)  # quiet moments, when an edit can go through
print('rewrites', i)
`)
	done := make(chan string, 1)
	go func() {
		var out testenv.SyncBuffer
		_, err := box.Exec(context.Background(), sandbox.ExecRequest{Command: "python3 churn.py", Output: &out, Timeout: 2 * time.Minute})
		done <- fmt.Sprint(out.String(), err)
	}()
	time.Sleep(300 * time.Millisecond)
	edited, refused := 0, 0
	for range 100 {
		r := call(t, s, "read", m{"path": "f.txt"})
		if r.IsError {
			continue
		}
		r = call(t, s, "edit", m{"path": "f.txt", "oldText": "line b\n", "newText": "line b\nedited\n"})
		switch {
		case !r.IsError:
			edited++
		case strings.Contains(r.Content, "changed since this session last read it"), strings.Contains(r.Content, "changed while it was being written"):
			refused++
		default:
			// The file was in the middle of an in-place rewrite: what read saw
			// was a partial content.
			if !strings.Contains(r.Content, "not found") {
				t.Errorf("unexpected edit result: %s", r.Content)
			}
		}
	}
	writeFile(t, ws, "stop", "")
	out := <-done
	t.Logf("%s; %d edits went through, %d were refused as stale", strings.TrimSpace(out), edited, refused)
	if edited+refused == 0 {
		t.Fatal("neither an edit nor a refusal: the test proved nothing")
	}
	b, err := os.ReadFile(filepath.Join(ws, "f.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(b), "line a\nline b\n") {
		t.Errorf("torn file: %q", b)
	}
}

// BenchmarkAgentFS is read and edit of a 1 MB file (20,000 lines) through a
// sandbox's agent against the same on the host's filesystem: each iteration
// does both, one after the other, so that the ratio (agent/local) is taken
// on the machine as it is at that moment. read streams the whole file (it
// hashes it); edit loads it, checks its hash and the protected paths,
// writes a temporary file, syncs and renames it.
func BenchmarkAgentFS(b *testing.B) {
	testenv.NeedsDocker(b)
	var text strings.Builder
	for i := range 20_000 {
		fmt.Fprintf(&text, "line %06d %s\n", i, strings.Repeat("x", 38))
	}
	ws := b.TempDir()
	box, err := docker.New(sandbox.Config{Workspace: ws, Image: testenv.Image, Agent: testenv.Agent(b), Memory: 512 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer box.Close(context.Background())
	ctx := context.Background()
	afs, err := box.AgentFS(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer afs.Close()
	sessions := map[string]*Session{}
	for _, mode := range []string{"local", "agent"} {
		dir := filepath.Join(ws, mode)
		writeFile(b, dir, "big.txt", text.String())
		o := Options{Workspace: dir}
		if mode == "agent" {
			r, err := afs.OpenRoot(mode)
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			o.FS = r
		}
		s, err := NewSession(ctx, o)
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		mustOK(b, s, "read", m{"path": "big.txt", "limit": 1})
		sessions[mode] = s
	}
	both := func(b *testing.B, op func(s *Session, i int)) {
		var local, agent time.Duration
		i := 0
		for b.Loop() {
			t0 := time.Now()
			op(sessions["local"], i)
			t1 := time.Now()
			op(sessions["agent"], i)
			local, agent = local+t1.Sub(t0), agent+time.Since(t1)
			i++
		}
		b.ReportMetric(float64(local.Nanoseconds())/float64(i), "local-ns/op")
		b.ReportMetric(float64(agent.Nanoseconds())/float64(i), "agent-ns/op")
		b.ReportMetric(float64(agent)/float64(local), "agent/local")
	}
	b.Run("read1MB", func(b *testing.B) {
		both(b, func(s *Session, _ int) {
			if r, err := s.Read(ctx, ReadParams{Path: "big.txt"}); err != nil || r.IsError {
				b.Fatal(err, r.Content)
			}
		})
	})
	b.Run("edit1MB", func(b *testing.B) {
		both(b, func(s *Session, i int) {
			old, new := "line 010000 ", "LINE 010000 "
			if i%2 == 1 {
				old, new = new, old
			}
			if r, err := s.Edit(ctx, EditParams{Path: "big.txt", OldText: old, NewText: new}); err != nil || r.IsError {
				b.Fatal(err, r.Content)
			}
		})
	})
}

// A write or an edit through the agent over a file the commands' user may
// not open for writing — another user's, in a directory the user may write
// — is refused, as that user's own write would be, rather than renamed over
// it (which needs only the directory's permission).
func TestAgentFSWriteHonoursPermissions(t *testing.T) {
	testenv.NeedsDocker(t)
	ws := t.TempDir()
	// Commands run as the workspace's owner; as root's, they could write
	// anything (CAP_DAC_OVERRIDE).
	owner := os.Geteuid()
	if owner == 0 {
		owner = 1001
		if err := os.Chown(ws, owner, owner); err != nil {
			t.Fatal(err)
		}
	}
	other := fmt.Sprintf("%d:%d", owner+1, owner+1)
	s, box := agentSessionOn(t, ws, func(o *Options) { o.WritePolicy = AllowOverwrite })
	inBox(t, box, "mkdir shared && chmod 777 shared && printf 'mine\\n' > shared/mine")
	var out testenv.SyncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := box.Exec(ctx, sandbox.ExecRequest{Command: "printf 'theirs\\n' > shared/theirs && chmod 644 shared/theirs", User: other, Pipes: true, Output: &out, Stderr: &out})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("making another user's file: %v %+v %s", err, res, out.String())
	}
	mustFail(t, s, "write", m{"path": "shared/theirs", "content": "lost\n"}, "Cannot overwrite shared/theirs", "permission denied", "mode 0644", "unchanged")
	mustOK(t, s, "read", m{"path": "shared/theirs"})
	mustFail(t, s, "edit", m{"path": "shared/theirs", "oldText": "theirs", "newText": "lost"}, "Cannot edit shared/theirs", "permission denied")
	if got := readFile(t, ws, "shared/theirs"); got != "theirs\n" {
		t.Errorf("the other user's file: %q", got)
	}
	// The user's own file is written as ever.
	mustOK(t, s, "write", m{"path": "shared/mine", "content": "new\n"})
	if got := readFile(t, ws, "shared/mine"); got != "new\n" {
		t.Errorf("the user's own file: %q", got)
	}
}
