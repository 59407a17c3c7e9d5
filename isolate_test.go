package corral_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/corralhq/corral"
	"github.com/corralhq/corral/checkpoint"
	"github.com/corralhq/corral/internal/testenv"
	"github.com/corralhq/corral/tools"
)

// gitRun runs the host's git in dir as a user would, with an empty global
// config.
func gitRun(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=safe.directory", "GIT_CONFIG_VALUE_0=*",
		"GIT_AUTHOR_NAME=u", "GIT_AUTHOR_EMAIL=u@u", "GIT_COMMITTER_NAME=u", "GIT_COMMITTER_EMAIL=u@u")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// treeState describes every entry under dir — kind, mode, content hash or
// link target — the repository's files included unless skipGit.
func treeState(t *testing.T, dir string, skipGit bool) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if skipGit && d.Name() == ".git" {
			return filepath.SkipDir
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			out[rel] = "link " + target
		case fi.IsDir():
			out[rel] = fmt.Sprintf("dir %v", fi.Mode().Perm())
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			out[rel] = fmt.Sprintf("file %v %s", fi.Mode().Perm(), hex.EncodeToString(sum[:8]))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func diffStates(a, b map[string]string) []string {
	var out []string
	for k, v := range a {
		if b[k] != v {
			out = append(out, fmt.Sprintf("%s: %q -> %q", k, v, b[k]))
		}
	}
	for k, v := range b {
		if _, ok := a[k]; !ok {
			out = append(out, fmt.Sprintf("%s: new %q", k, v))
		}
	}
	sort.Strings(out)
	return out
}

// hostileScript is run by the isolated session's bash, where the policy
// cannot see what it does: it tries every way out of the copy to the user's
// tree and repository, and plants in the copy's repository what would run
// on the host if corral trusted it. It prints one line per attempt.
const hostileScript = `import os, glob, subprocess
ws = os.getcwd()
marker = os.environ.get("MARKER", "/tmp/host-marker")
def attempt(name, f):
    try:
        f()
        print(name, "ok")
    except Exception as e:
        print(name, "refused", type(e).__name__)
def write(p, data="pwned\n"):
    with open(p, "a") as f:
        f.write(data)
# The user's objects, where the copy's repository borrows them.
attempt("reference-write", lambda: write("/.corral/reference/pwned"))
for p in glob.glob("/.corral/reference/*/*")[:3]:
    attempt("reference-object", lambda p=p: write(p))
    attempt("reference-chmod", lambda p=p: os.chmod(p, 0o666))
attempt("reference-remount", lambda: subprocess.run(["mount", "-o", "remount,rw", "/.corral/reference"], check=True, capture_output=True))
# Every host path the mount table names: none is the user's tree here.
for line in open("/proc/self/mountinfo"):
    f = line.split()
    root, point = f[3], f[4]
    if point.startswith(ws) or point.startswith("/.corral"):
        for cand in (root, root + "/.git"):
            # A path under the workspace's is the copy's, in here.
            if os.path.isdir(cand) and not cand.startswith(ws) and not cand.startswith("/proc"):
                attempt("mount-source " + cand, lambda c=cand: write(os.path.join(c, "pwned")))
# The container's root, seen through /proc.
attempt("proc-root", lambda: write("/proc/1/root" + ws + "/.git/pwned-via-proc"))
# The copy's own repository: hooks, config, commondir, alternates.
os.makedirs(".git/hooks", exist_ok=True)
for h in ("post-checkout", "pre-commit", "post-index-change", "reference-transaction"):
    write(".git/hooks/" + h, "#!/bin/sh\ntouch " + marker + "\n")
    os.chmod(".git/hooks/" + h, 0o755)
attempt("config", lambda: write(".git/config", "[core]\n\tfsmonitor = touch " + marker + "\n\thooksPath = .git/hooks\n[filter \"x\"]\n\tclean = touch " + marker + "\n"))
attempt("commondir", lambda: write(".git/commondir", "/.corral/reference/..\n"))
attempt("alternates", lambda: write(".git/objects/info/alternates", "/tmp\n"))
write(".gitattributes", "* filter=x\n")
# A link out of the copy, to the user's path: inside, that path is the copy.
attempt("symlink", lambda: os.symlink(ws + "/.git", "gitlink"))
# The session's change the user should get.
write("README.md", "changed by the agent\n")
`

// TestIsolatedSession: an isolated session works on a private copy mounted
// at the workspace's path; no command reaches the user's tree or repository,
// whatever a script tries; the copy outlives the session; corral's apply
// brings exactly the session's changes — edits, writes, deletions, renames,
// modes, links, a binary file — as unstaged changes, runs nothing the copy
// planted, and the user's repository is otherwise as it was.
func TestIsolatedSession(t *testing.T) {
	testenv.NeedsDocker(t)
	ctx := context.Background()
	cfg := sandboxed(t)
	ws := cfg.Workspace
	marker := filepath.Join(t.TempDir(), "host-marker")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	write := func(name, content string, mode os.FileMode) {
		t.Helper()
		p := filepath.Join(ws, name)
		must(os.MkdirAll(filepath.Dir(p), 0o755))
		must(os.WriteFile(p, []byte(content), mode))
	}
	gitRun(t, ws, "init", "-q", "-b", "main")
	write("README.md", "hello\n", 0o644)
	write("src/main.py", "print('hi')\n", 0o644)
	write("src/util.py", "X = 1\n", 0o644)
	write("old.txt", "to be renamed\n", 0o644)
	write("run.sh", "#!/bin/sh\necho run\n", 0o644)
	write(".gitignore", ".env\n", 0o644)
	must(os.Symlink("src/main.py", filepath.Join(ws, "main-link")))
	gitRun(t, ws, "add", "-A")
	gitRun(t, ws, "commit", "-q", "-m", "first")
	write(".env", "SECRET=from-the-user\n", 0o600) // ignored: never in the copy
	// The user's repository would run these if anything ran its hooks.
	write(".git/hooks/post-checkout", "#!/bin/sh\ntouch "+marker+"\n", 0o755)
	// The workspace is an unprivileged user's, as a developer's is.
	must(filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, 4321, 4321)
	}))
	before := treeState(t, ws, false)

	cfg.Sandbox.Env = []string{"MARKER=" + marker, "GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@a", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@a"}
	state := filepath.Join(t.TempDir(), "state")
	cfg.Checkpoints = &checkpoint.Options{StateDir: state}
	cfg.Isolate = &corral.Isolation{}
	h, err := corral.New(cfg)
	must(err)
	defer h.Close()
	s, err := h.Open(ctx, corral.SessionOptions{})
	must(err)
	cp := s.Copy()
	if cp == nil {
		t.Fatal("no copy")
	}
	bash := func(cmd string) tools.Result {
		t.Helper()
		r, err := s.Bash(ctx, tools.BashParams{Command: cmd})
		must(err)
		return r
	}
	r := bash("pwd; git log --oneline | wc -l; git status --porcelain; test -e .env && echo has-dotenv-$((1+1))")
	if !strings.Contains(r.Content, "[corral: this session works on a private copy") {
		t.Errorf("the first result does not tell the model about the copy:\n%s", r.Content)
	}
	if c := strings.ReplaceAll(r.Content, "\r", ""); !strings.Contains(c, ws+"\n1\n") || strings.Contains(c, "has-dotenv-2") {
		t.Errorf("the copy of %s, seen from inside:\n%q", ws, r.Content)
	}
	// The file tools work on the copy, by relative and by absolute path.
	rr, err := s.Read(ctx, tools.ReadParams{Path: filepath.Join(ws, "src/main.py")})
	must(err)
	if rr.IsError {
		t.Fatalf("read: %s", rr.Content)
	}
	er, err := s.Edit(ctx, tools.EditParams{Path: "src/main.py", OldText: "hi", NewText: "hello"})
	must(err)
	wr, err := s.Write(ctx, tools.WriteParams{Path: filepath.Join(ws, "x.py"), Content: hostileScript})
	must(err)
	if er.IsError || wr.IsError {
		t.Fatalf("edit: %s\nwrite: %s", er.Content, wr.Content)
	}
	r = bash("python3 x.py")
	t.Logf("the script:\n%s", r.Content)
	for _, line := range strings.Split(r.Content, "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[len(f)-2] != "config" && f[len(f)-2] != "commondir" && f[len(f)-2] != "alternates" && f[len(f)-2] != "symlink" && f[len(f)-1] == "ok" {
			t.Errorf("the script got through: %s", line)
		}
	}
	bash("rm src/util.py && git mv -f old.txt new.txt 2>/dev/null || mv old.txt new.txt; chmod +x run.sh; ln -sfn README.md main-link; printf '\\x00\\x01\\xff' > data.bin; mkdir -p deep/er && echo d > deep/er/file; git add -A && git commit -qm 'the agent commits'")
	if got := treeState(t, ws, false); len(diffStates(before, got)) > 0 {
		t.Errorf("the session changed the user's tree or repository:\n%s", strings.Join(diffStates(before, got), "\n"))
	}
	must(s.Close())
	want := treeState(t, cp.Info().Dir, true)
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("something ran a hook or program the copy planted")
	}

	// The copy stays, and its changes are applied from a new process's view.
	st, err := checkpoint.Open(ctx, checkpoint.Options{Workspace: ws, StateDir: state})
	must(err)
	copies, err := st.Copies(ctx)
	if err != nil || len(copies) != 1 {
		t.Fatalf("copies after the session: %+v %v", copies, err)
	}
	c, err := st.OpenCopy(ctx, copies[0].Session[:4])
	must(err)
	var diff strings.Builder
	must(c.Diff(ctx, &diff))
	for _, w := range []string{"b/src/main.py", "+print('hello')", "b/data.bin", "Bin", "b/new.txt", "a/src/util.py", "b/x.py", "new mode 100755", "b/deep/er/file"} {
		if !strings.Contains(diff.String(), w) {
			t.Errorf("corral diff lacks %q:\n%s", w, diff.String())
		}
	}
	res, err := c.Apply(ctx, checkpoint.ApplyOptions{})
	must(err)
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("apply ran a hook or program the copy planted")
	}
	got := treeState(t, ws, true)
	want[".env"] = before[".env"]
	if d := diffStates(want, got); len(d) > 0 {
		t.Errorf("the workspace after apply differs from the copy:\n%s", strings.Join(d, "\n"))
	}
	// Unstaged: HEAD, the branch and the index are the user's.
	if log := gitRun(t, ws, "log", "--oneline"); strings.Contains(log, "the agent commits") {
		t.Errorf("the agent's commit reached the user's branch:\n%s", log)
	}
	if staged := gitRun(t, ws, "diff", "--cached", "--name-only"); staged != "" {
		t.Errorf("staged after apply: %q", staged)
	}
	for _, p := range []string{".git/config", ".git/hooks/post-checkout", ".git/HEAD"} {
		if before[p] != treeState(t, ws, false)[p] {
			t.Errorf("%s changed", p)
		}
	}
	if !res.Applied || res.Before.ID == 0 {
		t.Errorf("result: %+v", res)
	}
	if _, err := st.OpenCopy(ctx, ""); !errors.Is(err, checkpoint.ErrNoCopy) {
		t.Errorf("the copy after apply: %v", err)
	}
}
