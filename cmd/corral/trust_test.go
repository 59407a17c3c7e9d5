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

	"github.com/corralhq/corral/internal/statedir"
	"github.com/corralhq/corral/internal/testenv"
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
	testenv.WaitFor(t, 2*time.Minute, "the script to plant", func() bool {
		_, err := os.Stat(filepath.Join(ws, "planted"))
		return err == nil
	})
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
	base, err := statedir.Base()
	if err != nil {
		t.Fatal(err)
	}
	dirs, _ := filepath.Glob(filepath.Join(base, "shadows", "corral-git-*", "state.json"))
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

// A repository whose hooks live in the worktree (core.hooksPath = .githooks,
// as husky and its likes set up) runs them on the host at the user's next
// commit: they are git's hooks as much as .git/hooks are. A hostile script
// run through bash, and the write tool, can neither change nor create one,
// under runc and under gVisor.
func TestTrustHooksInWorktree(t *testing.T) {
	needsDocker(t)
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git on the host")
	}
	runtimes := []string{""}
	if out, _ := exec.Command("docker", "info", "--format", "{{json .Runtimes.runsc}}").Output(); strings.Contains(string(out), "runsc") {
		runtimes = append(runtimes, "runsc")
	}
	for _, rt := range runtimes {
		t.Run("runtime="+rt, func(t *testing.T) { trustHooksInWorktree(t, rt) })
	}
}

func trustHooksInWorktree(t *testing.T, runtime string) {
	ws := t.TempDir()
	markDir := t.TempDir()
	marker := filepath.Join(markDir, "ran")
	git := func(args ...string) ([]byte, error) {
		// The workspace may belong to the sandbox's user (gVisor, below).
		return exec.Command("git", append([]string{"-c", "safe.directory=*", "-C", ws}, args...)...).CombinedOutput()
	}
	for _, args := range [][]string{{"init", "-q"}, {"config", "core.hooksPath", ".githooks"}, {"config", "user.name", "u"}, {"config", "user.email", "u@x"}} {
		if out, err := git(args...); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	if err := os.MkdirAll(filepath.Join(ws, ".githooks"), 0o755); err != nil {
		t.Fatal(err)
	}
	// The user's own hook, which the script will try to replace.
	if err := os.WriteFile(filepath.Join(ws, ".githooks", "pre-commit"), []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	hostile := fmt.Sprintf(`import os, shutil
try:
    shutil.copytree(".githooks", "hooks.new")
    os.rename(".githooks", "hooks.old")
    os.rename("hooks.new", ".githooks")
    print("replaced the directory")
except OSError as e:
    print("refused the directory", e.errno)
for name in ("pre-commit", "post-commit", "commit-msg"):
    p = os.path.join(".githooks", name)
    try:
        if os.path.exists(p):
            os.rename(p, p + ".old")
        with open(p, "w") as f:
            f.write("#!/bin/sh\ntouch %s\n")
        os.chmod(p, 0o755)
        print("planted", p)
    except OSError as e:
        print("refused", p, e.errno)
`, marker)
	calls := strings.Join([]string{
		`{"id":"w","tool":"write","args":{"path":"x.py","content":` + strconvQuote(hostile) + `}}`,
		`{"id":"b","tool":"bash","args":{"command":"python3 x.py"}}`,
		`{"id":"t","tool":"write","args":{"path":".githooks/post-merge","content":"#!/bin/sh\ntouch ` + marker + `\n"}}`,
	}, "\n") + "\n"
	args := []string{"run", "--workspace", ws, "--confirm", "allow"}
	if runtime != "" {
		args = append(args, "--runtime", runtime)
		// gVisor before 2023 has no ambient capabilities: commands could
		// not write a workspace of root's, protected or not.
		if os.Getuid() == 0 {
			if out, err := exec.Command("chown", "-R", "65532:65532", ws).CombinedOutput(); err != nil {
				t.Fatalf("chown: %v %s", err, out)
			}
		}
	}
	cmd := exec.Command("corral", append(args, "-")...)
	cmd.Stdin = strings.NewReader(calls)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("corral run: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var r runResult
		_ = json.Unmarshal([]byte(line), &r)
		t.Logf("%s: is_error %v: %.300s", r.ID, r.IsError, r.Content)
	}
	git("add", "x.py")
	if out, err := git("commit", "-q", "-m", "by the user"); err != nil {
		t.Logf("git commit: %v %s", err, out)
	}
	git("merge", "--no-edit", "HEAD")
	if _, err := os.Stat(marker); err == nil {
		t.Error("git on the host ran a hook the command planted in the worktree's hooks directory")
	}
	ents, _ := os.ReadDir(filepath.Join(ws, ".githooks"))
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if b, _ := os.ReadFile(filepath.Join(ws, ".githooks", "pre-commit")); len(names) != 1 || string(b) != "#!/bin/sh\nexit 0\n" {
		t.Errorf("the hooks directory holds %q (pre-commit %q), want the user's pre-commit alone", names, b)
	}
}

func strconvQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
