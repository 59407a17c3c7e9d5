package corral_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/corralhq/corral"
	"github.com/corralhq/corral/internal/testenv"
	"github.com/corralhq/corral/policy"
	"github.com/corralhq/corral/sandbox"
	"github.com/corralhq/corral/sandbox/docker"
)

func TestMain(m *testing.M) {
	// The agent is built when a test first needs it (testenv.Agent): -short
	// builds none.
	os.Exit(testenv.Main(m))
}

// config is a configuration on a fresh workspace; the session's temporary
// directories go to a directory of the test's. Its agent is corral's default,
// this test binary: good for New and Open, which check it, but not for a
// sandbox that starts (sandboxed).
func config(t *testing.T) corral.Config {
	t.Helper()
	t.Setenv("TMPDIR", t.TempDir())
	return corral.Config{
		Workspace: t.TempDir(),
		Backend:   docker.Backend,
		Sandbox:   sandbox.Config{Image: testenv.Image},
	}
}

// sandboxed is config for a test whose sandbox runs commands: it needs the
// Docker engine (it skips with -short) and a static corral as the agent.
func sandboxed(t *testing.T) corral.Config {
	t.Helper()
	testenv.NeedsDocker(t)
	cfg := config(t)
	cfg.Sandbox.Agent = testenv.Agent(t)
	return cfg
}

// TestOpenRollsBack: when a step of Open fails, what the earlier steps made
// (here the temporary log directory) is removed.
func TestOpenRollsBack(t *testing.T) {
	cfg := config(t)
	h, err := corral.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	// The sandbox and the tools session can no longer be made.
	if err := os.Remove(cfg.Workspace); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Open(context.Background(), corral.SessionOptions{}); err == nil {
		t.Fatal("Open succeeded on a removed workspace")
	}
	if ents, _ := os.ReadDir(os.Getenv("TMPDIR")); len(ents) > 0 {
		t.Errorf("left behind by a failed Open: %v", ents)
	}
}

// TestHost: sessions of one host share its policy; each has its own log
// directory, mounted into its sandbox; Close removes them and later Opens fail.
func TestHost(t *testing.T) {
	cfg := config(t)
	rules := filepath.Join(t.TempDir(), "rules.toml")
	os.WriteFile(rules, []byte(`deny = ["terraform *"]`), 0o644)
	cfg.PolicyFile = rules
	h, err := corral.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a, err := h.Open(ctx, corral.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := h.Open(ctx, corral.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if a.LogDir() == b.LogDir() {
		t.Errorf("two sessions share the temporary log directory %s", a.LogDir())
	}
	if a.Sandbox().Session() == b.Sandbox().Session() {
		t.Errorf("two sessions share the sandbox %s", a.Sandbox().Session())
	}
	if v := h.Policy().Classify("terraform apply"); v.Decision != policy.Deny {
		t.Errorf("the rules file was not loaded: terraform apply is %v", v.Decision)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{a.LogDir(), b.LogDir()} {
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("log directory %s left after Close: %v", dir, err)
		}
	}
	if _, err := h.Open(ctx, corral.SessionOptions{}); !errors.Is(err, corral.ErrClosed) {
		t.Errorf("Open after Close: %v, want ErrClosed", err)
	}
	if err := a.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
}

// TestNewChecks: a mistake in the configuration fails New, before any session.
func TestNewChecks(t *testing.T) {
	for name, change := range map[string]func(*corral.Config){
		"no workspace":  func(c *corral.Config) { c.Workspace = "" },
		"no backend":    func(c *corral.Config) { c.Backend = nil },
		"missing rules": func(c *corral.Config) { c.PolicyFile = filepath.Join(t.TempDir(), "none.toml") },
		"bad network":   func(c *corral.Config) { c.Sandbox.Network = "host" },
		"bad agent":     func(c *corral.Config) { c.Sandbox.Agent = "/nonexistent/corral" },
	} {
		t.Run(name, func(t *testing.T) {
			cfg := config(t)
			change(&cfg)
			if h, err := corral.New(cfg); err == nil {
				h.Close()
				t.Errorf("New accepted the configuration")
			}
		})
	}
}

// TestReadmeExample builds the README's library example (examples/library,
// the same text as the README's block), runs it on a workspace, and checks that
// the log of its first command is readable inside the sandbox at the path the
// result names.
func TestReadmeExample(t *testing.T) {
	src, err := os.ReadFile("examples/library/main.go")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	block := goBlock(t, string(readme), "## Go library")
	if block != string(src) {
		t.Fatalf("the README's library example is not examples/library/main.go: copy the file into the README's block")
	}
	testenv.NeedsDocker(t)
	bin := filepath.Join(t.TempDir(), "library")
	if out, err := exec.Command("go", "build", "-o", bin, "./examples/library").CombinedOutput(); err != nil {
		t.Fatalf("building the README's example: %v\n%s", err, out)
	}
	agent := testenv.Agent(t)
	cmd := exec.Command(bin, t.TempDir())
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(agent)+string(filepath.ListSeparator)+os.Getenv("PATH"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the README's example failed: %v\n%s%s", err, out, stderr.String())
	}
	m := regexp.MustCompile(`(?m)^100000 (/\S+)$`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("wc -l of the log in the sandbox did not count 100000 lines:\n%s", out)
	}
	if !strings.Contains(string(out), "a.go does not exist") {
		t.Errorf("the example's edit of a missing file was not a correctable error:\n%s", out)
	}
}

// goBlock returns the first ```go block after the heading.
func goBlock(t *testing.T, md, heading string) string {
	t.Helper()
	_, rest, ok := strings.Cut(md, "\n"+heading+"\n")
	if !ok {
		t.Fatalf("README.md has no %q", heading)
	}
	_, rest, ok = strings.Cut(rest, "```go\n")
	if !ok {
		t.Fatalf("README.md has no go block under %q", heading)
	}
	block, _, ok := strings.Cut(rest, "```\n")
	if !ok {
		t.Fatalf("README.md: the go block under %q is not closed", heading)
	}
	return block
}
