package images_test

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/corralhq/corral/images"
	"github.com/corralhq/corral/sandbox"
)

func TestDefaultIsTheSandboxDefault(t *testing.T) {
	if images.Default != sandbox.DefaultImage {
		t.Fatalf("images.Default = %q, sandbox.DefaultImage = %q: they must name the same image", images.Default, sandbox.DefaultImage)
	}
}

// The binary must carry the same files as the tree, so that `corral image build`
// builds what `make image` builds and both agree on the image's hash.
func TestEmbeddedFilesMatchTheTree(t *testing.T) {
	for _, path := range []string{"build.sh", "dev/Dockerfile", "dev/dpkg-slim.cfg"} {
		embedded, err := images.Files.ReadFile(path)
		if err != nil {
			t.Fatalf("%s is not embedded: %v", path, err)
		}
		onDisk, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(embedded, onDisk) {
			t.Errorf("embedded %s differs from the tree's", path)
		}
	}
}

// inCI reports whether this is a CI run, where a missing Docker engine fails the
// integration tests instead of skipping them.
func inCI() bool {
	v := os.Getenv("CI")
	return v != "" && v != "false" && v != "0"
}

// requireDocker skips the test when no Docker engine can be reached, except in CI,
// where it fails.
func requireDocker(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: skipped with -short")
	}
	t.Helper()
	why := ""
	if _, err := exec.LookPath("docker"); err != nil {
		why = "the docker CLI is not installed"
	} else if out, err := exec.Command("docker", "version", "--format", "{{.Server.Version}}").CombinedOutput(); err != nil {
		why = "the Docker engine cannot be reached: " + strings.TrimSpace(string(out))
	}
	switch {
	case why == "":
	case inCI():
		t.Fatalf("%s; CI runs the integration tests against a real engine", why)
	default:
		t.Skipf("%s; skipping (in CI this fails)", why)
	}
}

// logWriter sends what is written to it to t.Log, line by line.
type logWriter struct {
	t   *testing.T
	mu  sync.Mutex // guards buf
	buf []byte
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.t.Log(string(w.buf[:i]))
		w.buf = w.buf[i+1:]
	}
	return len(p), nil
}

func ensureDefaultImage(t *testing.T) {
	t.Helper()
	requireDocker(t)
	w := &logWriter{t: t}
	if err := images.Build(t.Context(), images.BuildOptions{Stdout: w, Stderr: w}); err != nil {
		t.Fatal(err)
	}
	ok, err := images.UpToDate(t.Context(), images.Default, "")
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		t.Fatalf("%s is not up to date right after a build", images.Default)
	}
}

// user is the uid:gid commands run as, as in a sandbox: the workspace owner's. A
// uid with no entry in the image's /etc/passwd when the test runs as root.
func user(t *testing.T, workspace string) string {
	if os.Getuid() != 0 {
		return strconv.Itoa(os.Getuid()) + ":" + strconv.Itoa(os.Getgid())
	}
	const id = 12345
	if err := os.Chown(workspace, id, id); err != nil {
		t.Fatal(err)
	}
	return strconv.Itoa(id) + ":" + strconv.Itoa(id)
}

// runInImage runs script with bash in image the way a sandbox runs commands: as the
// workspace owner, no capabilities, no network, a read-only root, HOME and /tmp on
// tmpfs, the workspace bind-mounted.
func runInImage(t *testing.T, image, workspace, script string, extra ...string) (string, error) {
	t.Helper()
	args := []string{"run", "--rm", "--log-driver", "none",
		"--user", user(t, workspace),
		"--cap-drop", "ALL", "--security-opt", "no-new-privileges",
		"--network", "none", "--read-only",
		"--tmpfs", "/tmp", "--tmpfs", "/home/agent", "--env", "HOME=/home/agent",
		"--mount", "type=bind,src=" + workspace + ",dst=/workspace", "--workdir", "/workspace",
	}
	args = append(args, extra...)
	args = append(args, image, "bash", "-c", script)
	out, err := exec.CommandContext(t.Context(), "docker", args...).CombinedOutput()
	return string(out), err
}

func TestBuildAndRunTools(t *testing.T) {
	ensureDefaultImage(t)

	// Each tool the image promises, and a line its output must contain.
	tools := []struct{ cmd, want string }{
		{"bash --version", "GNU bash"},
		{"ls --version", "coreutils"},
		{"git --version", "git version"},
		{"curl --version", "curl"},
		{"make --version", "GNU Make"},
		{"gcc --version", "gcc"},
		{"python3 --version", "Python 3"},
		{"rg --version", "ripgrep"},
		{"jq --version", "jq-"},
		{"patch --version", "GNU patch"},
		{"ps --version", "procps"},
		{"file --version", "file-"},
		{"diff --version", "diffutils"},
		{"find --version", "findutils"},
		{"xz --version", "xz"},
		{"unzip -v", "UnZip"},
		{"test -s /etc/ssl/certs/ca-certificates.crt && echo certs", "certs"},
	}
	ws := t.TempDir()
	var script strings.Builder
	for _, tool := range tools {
		// One container for all: each prints a marker and its first lines. The
		// whole output goes to a file first: piped into head, a tool that
		// writes more than head reads may die of SIGPIPE (make --version did).
		script.WriteString("echo \"@@ " + tool.cmd + "\"; (" + tool.cmd + ") > /tmp/out 2>&1; rc=$?; head -n 3 /tmp/out; echo \"@@ exit $rc\"\n")
	}
	out, err := runInImage(t, images.Default, ws, script.String())
	if err != nil {
		t.Fatalf("running the tools: %v\n%s", err, out)
	}
	results := map[string]string{}
	var cur string
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if cmd, ok := strings.CutPrefix(line, "@@ "); ok && !strings.HasPrefix(cmd, "exit ") {
			cur = cmd
			continue
		}
		results[cur] += line + "\n"
	}
	for _, tool := range tools {
		got := results[tool.cmd]
		if !strings.Contains(got, "@@ exit 0") || !strings.Contains(got, tool.want) {
			t.Errorf("%s: want exit 0 and %q in its output, got:\n%s", tool.cmd, tool.want, got)
		}
	}
}

// What an agent does first in a repository, as a uid the image does not know, with
// HOME on tmpfs and a read-only root: git init, commit and log; build and run a C
// program with make; a Python script that writes to HOME.
func TestWorkflowAsUnknownUser(t *testing.T) {
	ensureDefaultImage(t)
	ws := t.TempDir()
	script := `set -eux
cd /workspace
git init -q
printf 'hello\n' > README
git add README
git commit -q -m 'first commit'
git log --format='%an <%ae> %s'
git config --global user.name 'Test User'
git config --global user.email test@example.invalid
echo more >> README
git commit -q -am 'second commit'
git log -1 --format='%an %s'
printf '#include <stdio.h>\nint main(void) { puts("compiled ok"); return 0; }\n' > hello.c
printf 'hello: hello.c\n\tgcc -O2 -o $@ $<\n' > Makefile
make -s hello
./hello
python3 -c 'import pathlib; p = pathlib.Path.home() / "note"; p.write_text("py ok"); print(p.read_text())'
python3 -m venv /tmp/venv && /tmp/venv/bin/python -c 'print("venv ok")'
printf 'a\nb\n' > x; printf 'a\nc\n' > y; diff -u x y > d.patch || true; patch -s x d.patch; cat x | tail -n 1
jq -n '{ok: true}' -c
rg -c hello README
ps -o pid= -p $$ >/dev/null && echo ps ok
id -u
`
	out, err := runInImage(t, images.Default, ws, script)
	if err != nil {
		t.Fatalf("workflow failed: %v\n%s", err, out)
	}
	for _, want := range []string{
		"corral sandbox <sandbox@corral.invalid> first commit",
		"Test User second commit",
		"compiled ok",
		"py ok",
		"venv ok",
		"\nc\n",
		`{"ok":true}`,
		"ps ok",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// The files belong to the workspace's owner, not root.
	fi, err := os.Stat(ws + "/hello")
	if err != nil {
		t.Fatal(err)
	}
	wsInfo, err := os.Stat(ws)
	if err != nil {
		t.Fatal(err)
	}
	if uid, wsUID := fileUID(fi), fileUID(wsInfo); uid != wsUID {
		t.Errorf("hello belongs to uid %d, the workspace to %d", uid, wsUID)
	}
}

// With gVisor registered as runsc (see .ci/run), the image runs under it too. Skipped
// where runsc is not registered: it is optional.
func TestRunsUnderGVisor(t *testing.T) {
	ensureDefaultImage(t)
	out, err := exec.Command("docker", "info", "--format", "{{json .Runtimes}}").Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), `"runsc"`) {
		t.Skip("the runsc runtime is not registered with the engine (optional; .ci/run sets it up)")
	}
	ws := t.TempDir()
	got, err := runInImage(t, images.Default, ws, `uname -r; cd /workspace && git init -q && echo x > f && git add f && git commit -q -m x && git log --format=%s`, "--runtime", "runsc")
	if err != nil {
		t.Fatalf("under runsc: %v\n%s", err, got)
	}
	if !strings.Contains(got, "\nx\n") {
		t.Errorf("under runsc, want the commit's subject, got:\n%s", got)
	}
	t.Logf("under runsc: kernel %s", strings.SplitN(got, "\n", 2)[0])
}

func fileUID(fi os.FileInfo) uint32 { return fi.Sys().(*syscall.Stat_t).Uid }
