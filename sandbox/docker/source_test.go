package docker

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corralhq/corral/sandbox"
)

// TestSourceElsewhere: a workspace mounted from another host directory
// (an isolated session's copy) is seen at the workspace's path: commands
// start there, their files land in the source, the repository in the source
// is shadowed as the workspace's would be (its config stays the host's), the
// protected paths are read-only there, and a bind is read-only at its own
// path. Nothing is made at the workspace's path on the host.
func TestSourceElsewhere(t *testing.T) {
	cfg := testConfig(t)
	src := cfg.Workspace
	ws := filepath.Join(t.TempDir(), "the-users-workspace")
	cfg.Workspace, cfg.Source = ws, src
	ref := t.TempDir()
	if err := os.WriteFile(filepath.Join(ref, "obj"), []byte("object\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg.Binds = []sandbox.Bind{{Source: ref, Target: "/.corral/reference"}}
	if out, err := exec.Command("git", "init", "-q", src).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	configBefore, err := os.ReadFile(filepath.Join(src, ".git", "config"))
	if err != nil {
		t.Fatal(err)
	}
	c := newSandbox(t, cfg)
	if got := sh(t, c, "pwd"); got != ws {
		t.Errorf("pwd = %q, want %q", got, ws)
	}
	sh(t, c, "echo made > made.txt && mkdir -p d && echo deep > d/f")
	if b, err := os.ReadFile(filepath.Join(src, "d", "f")); err != nil || string(b) != "deep\n" {
		t.Errorf("the command's file is not in the source: %q %v", b, err)
	}
	sh(t, c, "git config core.hooksPath /tmp/evil && git add made.txt && git commit -qm x")
	if b, _ := os.ReadFile(filepath.Join(src, ".git", "config")); string(b) != string(configBefore) {
		t.Errorf("the source's repository config changed:\n%s", b)
	}
	if out, err := exec.Command("git", "-C", src, "log", "--oneline").CombinedOutput(); err != nil || !strings.Contains(string(out), "x") {
		t.Errorf("the commit did not reach the source's repository: %s %v", out, err)
	}
	if res, _ := run(t, c, sandbox.ExecRequest{Command: "echo x > .envrc"}); res.ExitCode == 0 {
		t.Error("a protected path is writable")
	}
	if got := sh(t, c, "cat /.corral/reference/obj"); got != "object" {
		t.Errorf("the bind: %q", got)
	}
	if res, _ := run(t, c, sandbox.ExecRequest{Command: "touch /.corral/reference/new || exit 1; echo x >> /.corral/reference/obj"}); res.ExitCode == 0 {
		t.Error("the bind is writable")
	}
	if _, err := os.Lstat(ws); !os.IsNotExist(err) {
		t.Errorf("something was made at the workspace's path on the host: %v", err)
	}
}
