package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/corralhq/corral/batch"
	"github.com/corralhq/corral/internal/testenv"
)

// kubeFlags are the flags that put corral's sandboxes on the test cluster:
// pods of a quarter of a core, for the node's two are shared with the other
// packages' tests (a pod asks for a whole one by default, and the scheduler
// refuses a pod that does not fit).
func kubeFlags(t *testing.T) []string {
	t.Helper()
	testenv.NeedsKube(t)
	return []string{"--backend", "kubernetes", "--agent-image", testenv.KubeAgentImage(t), "--cpus", "0.25"}
}

// TestRunKubernetes: corral run on the cluster — the workspace uploaded into
// the pod, the four tools through its agent, the results as with Docker, and
// --download bringing back the final workspace (a planted hook left out and
// said so), while the host's directory stays as it was.
func TestRunKubernetes(t *testing.T) {
	flags := kubeFlags(t)
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("one\ntwo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	back := filepath.Join(t.TempDir(), "back")
	in := strings.Join([]string{
		`{"id":"1","tool":"read","args":{"path":"notes.txt"}}`,
		`{"id":"2","tool":"edit","args":{"path":"notes.txt","oldText":"two","newText":"deux"}}`,
		`{"id":"3","tool":"write","args":{"path":"src/new.go","content":"package src\n"}}`,
		// The hook is planted by a script, where the policy cannot see it.
		`{"id":"4","tool":"write","args":{"path":"plant.sh","content":"git init -q .\nprintf '#!/bin/sh\\n' > .git/hooks/pre-commit\nchmod +x .git/hooks/pre-commit\n"}}`,
		`{"id":"5","tool":"bash","args":{"command":"bash plant.sh && git status --porcelain && cat notes.txt && echo made > made.txt && id -u"}}`,
	}, "\n") + "\n"
	cmd := exec.Command("corral", append(append([]string{"run"}, flags...), "--workspace", ws, "--download", back, "-")...)
	cmd.Stdin = strings.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("corral run --backend kubernetes: %v\n%s", err, stderr.String())
	}
	var res []runResult
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var r runResult
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%q: %v", sc.Bytes(), err)
		}
		res = append(res, r)
	}
	if len(res) != 5 {
		t.Fatalf("%d results, want 5:\n%s\n%s", len(res), out, stderr.String())
	}
	for _, r := range res {
		if r.IsError {
			t.Errorf("call %s failed: %s", r.ID, r.Content)
		}
	}
	if !strings.Contains(res[0].Content, "2\ttwo") || !strings.Contains(res[4].Content, "?? notes.txt") || !strings.Contains(res[4].Content, "one\ndeux\n") || !strings.Contains(res[4].Content, "65532") {
		t.Errorf("results:\n%s", out)
	}
	// The pod's workspace came back; the host's directory did not change.
	for rel, want := range map[string]string{"notes.txt": "one\ndeux\n", "src/new.go": "package src\n", "made.txt": "made\n"} {
		if b, err := os.ReadFile(filepath.Join(back, rel)); err != nil || string(b) != want {
			t.Errorf("downloaded %s: %q, %v; want %q", rel, b, err, want)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "notes.txt")); string(b) != "one\ntwo\n" {
		t.Errorf("the host's notes.txt changed: %q", b)
	}
	if _, err := os.Lstat(filepath.Join(back, ".git/hooks/pre-commit")); !os.IsNotExist(err) {
		t.Errorf("a hook the command wrote was downloaded: %v", err)
	}
	if !strings.Contains(stderr.String(), "left out .git/hooks") || !strings.Contains(stderr.String(), "downloaded the workspace into "+back) {
		t.Errorf("stderr does not say what was left out and where the workspace went:\n%s", stderr.String())
	}
	if pods := podsOf(t, cmd.Process.Pid); pods != "" {
		t.Errorf("pods left behind: %s", pods)
	}
}

// podsOf lists the pods left by the corral process pid (its owner label).
func podsOf(t *testing.T, pid int) string {
	t.Helper()
	out, err := exec.Command(testenv.Kubectl(), "-n", "default", "get", "pods", "-l", "corral.pid="+strconv.Itoa(pid), "-o", "name").Output()
	if err != nil {
		t.Fatalf("kubectl get pods: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// TestDownloadNeedsKubernetes: --download with Docker is refused before any
// call runs.
func TestDownloadNeedsKubernetes(t *testing.T) {
	ws := t.TempDir()
	cmd := exec.Command("corral", "run", "--workspace", ws, "--download", t.TempDir(), "-")
	cmd.Stdin = strings.NewReader(`{"id":"1","tool":"write","args":{"path":"x.txt","content":"x"}}` + "\n")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--download needs --backend kubernetes") {
		t.Errorf("corral run --download with Docker: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(ws, "x.txt")); !os.IsNotExist(err) {
		t.Errorf("a call ran before the refusal: %v", err)
	}
}

// TestBatchKubernetes: batch mode on the cluster — tasks from a copied
// directory, a git revision and a tar file, each in a pod of its own, the
// results and summary as with Docker, and no pod left after.
func TestBatchKubernetes(t *testing.T) {
	flags := kubeFlags(t)
	dir := t.TempDir()
	batchFixture(t, dir)
	tasks := strings.Join([]string{
		`{"id": "copy", "workspace": "ws", "calls": [{"id": "1", "tool": "bash", "args": {"command": "cat data.txt; python3 --version"}}, {"id": "2", "tool": "read", "args": {"path": "data.txt"}}, {"id": "3", "tool": "edit", "args": {"path": "data.txt", "oldText": "original", "newText": "edited"}}, {"id": "4", "tool": "bash", "args": {"command": "cat data.txt"}}]}`,
		`{"id": "git", "git": "repo", "rev": "HEAD~1", "calls": [{"id": "1", "tool": "bash", "args": {"command": "cat f.txt; git rev-list --count HEAD"}}]}`,
		`{"id": "tar", "tar": "ws.tar", "calls_file": "calls.jsonl"}`,
	}, "\n") + "\n"
	if err := os.WriteFile(filepath.Join(dir, "tasks.jsonl"), []byte(tasks), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	cmd := exec.Command("corral", append(append([]string{"run"}, flags...), "--tasks", filepath.Join(dir, "tasks.jsonl"), "--out", out, "--max-sandboxes", "2")...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("corral run --tasks --backend kubernetes: %v\n%s", err, stderr.String())
	}
	sum, by := readSummary(t, out)
	if sum.Total != 3 || sum.OK != 3 {
		t.Errorf("summary: %d tasks, %d ok; want 3, 3\n%s", sum.Total, sum.OK, stderr.String())
	}
	for id, r := range by {
		if r.Status != batch.StatusOK || r.SandboxStart <= 0 {
			t.Errorf("task %s: %+v", id, r)
		}
	}
	if r := results(t, out, "copy"); len(r) != 4 || !strings.Contains(r[0].Content, "original\nPython 3") || r[2].IsError || !strings.Contains(r[3].Content, "edited") {
		t.Errorf("copy's results: %+v", r)
	}
	if r := results(t, out, "git"); len(r) != 1 || !strings.Contains(r[0].Content, "v1\n1") {
		t.Errorf("git's results: %+v", r)
	}
	if r := results(t, out, "tar"); len(r) != 1 || !strings.Contains(r[0].Content, "from the tar") {
		t.Errorf("tar's results: %+v", r)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "ws", "data.txt")); string(b) != "original\n" {
		t.Errorf("a task changed its source: %q", b)
	}
	if pods := podsOf(t, cmd.Process.Pid); pods != "" {
		t.Errorf("pods left behind by the batch: %s", pods)
	}
}
