package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// plantScript keeps planting, in the background, every file that would make
// git on the host run the marker: a commondir and a config.worktree naming
// a repository of its own, and more config.
const plantScript = `import os, subprocess, sys, time
marker = sys.argv[1]
subprocess.run(["git", "checkout", "-q", "-b", "late"])
evil = "[core]\n\trepositoryformatversion = 0\n\tfsmonitor = \"%s\"\n" % marker
def w(p, s, mode="w"):
    try:
        os.makedirs(os.path.dirname(p) or ".", exist_ok=True)
        with open(p, mode) as f:
            f.write(s)
    except OSError:
        pass
end = time.time() + 120
first = True
while time.time() < end:
    os.makedirs("evilgit/objects", exist_ok=True)
    os.makedirs("evilgit/refs/heads", exist_ok=True)
    w("evilgit/HEAD", "ref: refs/heads/main\n")
    w("evilgit/config", evil)
    w(".git/commondir", "../evilgit\n")
    w(".git/config.worktree", evil)
    if first:
        w(".git/config", "[extensions]\n\tworktreeConfig = true\n[core]\n\tfsmonitor = \"%s\"\n" % marker, "a")
        w("planted", "")
        first = False
    time.sleep(0.1)
`

// After corral is killed with SIGKILL, while a command's background process
// keeps planting, git on the host runs nothing the command chose; corral gc
// then copies back what the dead session's commands changed after the last
// call (a branch checked out) and removes its shadow.
func TestTrustGitAfterKill(t *testing.T) {
	needsDocker(t)
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git on the host")
	}
	ws := t.TempDir()
	for _, args := range [][]string{{"init", "-q"}, {"-c", "user.name=u", "-c", "user.email=u@x", "commit", "-q", "--allow-empty", "-m", "init"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = ws
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	markDir := t.TempDir()
	marker := fmt.Sprintf("touch %s/$$; false", markDir)
	cmd := exec.Command("corral", "run", "--workspace", ws, "--confirm", "allow", "-e", "GIT_AUTHOR_NAME=a", "-e", "GIT_AUTHOR_EMAIL=a@x", "-e", "GIT_COMMITTER_NAME=a", "-e", "GIT_COMMITTER_EMAIL=a@x", "-")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	send := func(id, tool string, args map[string]any) runResult {
		t.Helper()
		line, _ := json.Marshal(map[string]any{"id": id, "tool": tool, "args": args})
		fmt.Fprintf(stdin, "%s\n", line)
		if !sc.Scan() {
			t.Fatalf("no result for %s", id)
		}
		var r runResult
		json.Unmarshal(sc.Bytes(), &r)
		if r.IsError {
			t.Fatalf("%s: %s", id, r.Content)
		}
		return r
	}
	send("1", "write", map[string]any{"path": "x.py", "content": plantScript})
	send("2", "bash", map[string]any{"command": "git commit -q --allow-empty -m 'by the agent'"})
	send("3", "bash", map[string]any{"command": fmt.Sprintf("nohup python3 x.py '%s' >/dev/null 2>&1 &", marker)})
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if _, err := os.Stat(filepath.Join(ws, "planted")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the script did not plant")
		}
		time.Sleep(50 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	check := func(when string) {
		t.Helper()
		for range 5 {
			hostGit(ws, "status")
			time.Sleep(100 * time.Millisecond)
		}
		if ents, _ := os.ReadDir(markDir); len(ents) > 0 {
			t.Errorf("%s: git on the host ran the command's program (%d times)", when, len(ents))
			for _, e := range ents {
				os.Remove(filepath.Join(markDir, e.Name()))
			}
		}
	}
	check("after kill -9")
	if out, err := exec.Command("corral", "gc").CombinedOutput(); err != nil {
		t.Fatalf("corral gc: %v %s", err, out)
	}
	check("after corral gc")
	if got := strings.TrimSpace(hostGit(ws, "log", "-1", "--format=%s")); got != "by the agent" {
		t.Errorf("the host's last commit is %q", got)
	}
	if got := strings.TrimSpace(hostGit(ws, "rev-parse", "--abbrev-ref", "HEAD")); got != "late" {
		t.Errorf("the host's HEAD is %q, want the branch the background process checked out", got)
	}
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "corral-git-*", "state.json"))
	for _, d := range dirs {
		if b, _ := os.ReadFile(d); strings.Contains(string(b), `"workspace":"`+ws+`"`) {
			t.Errorf("corral gc left the shadow %s", filepath.Dir(d))
		}
	}
}

// hostGit runs git on the host as a user would; only what it runs matters.
func hostGit(dir string, args ...string) string {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, _ := cmd.CombinedOutput()
	return string(out)
}
