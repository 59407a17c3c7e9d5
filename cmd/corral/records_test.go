package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestRecordsOutsideWorkspace: the records of a run — the events file, the
// bash logs, the results a shell redirects to a file — are refused inside
// the workspace, where a command could rewrite them, with an error that
// names a place outside; a link from outside into the workspace is seen
// through.
func TestRecordsOutsideWorkspace(t *testing.T) {
	ws := t.TempDir()
	outside := t.TempDir()
	link := filepath.Join(outside, "into-ws")
	if err := os.Symlink(ws, link); err != nil {
		t.Fatal(err)
	}
	for name, args := range map[string][]string{
		"events":         {"--events", filepath.Join(ws, "events.jsonl")},
		"events-subdir":  {"--events", filepath.Join(ws, "ci", "new", "events.jsonl")},
		"events-link":    {"--events", filepath.Join(link, "events.jsonl")},
		"log-dir":        {"--log-dir", filepath.Join(ws, "logs")},
		"log-dir-itself": {"--log-dir", ws},
	} {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command("corral", append([]string{"run", "--workspace", ws, "--confirm", "deny"}, append(args, "-")...)...)
			cmd.Stdin = strings.NewReader("")
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("corral run %v: no error (%s)", args, out)
			}
			if !strings.Contains(string(out), "inside the workspace") || !strings.Contains(string(out), "put it outside the workspace, e.g. ") {
				t.Fatalf("corral run %v: %s; want a refusal naming a place outside", args, out)
			}
		})
	}
	// Outside is fine: the run goes on to its session (and, here, ends as
	// the calls do).
	t.Run("results-redirected-inside", func(t *testing.T) {
		needsDocker(t)
		res, err := os.Create(filepath.Join(ws, "results.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Close()
		var stderr strings.Builder
		cmd := exec.Command("corral", "run", "--workspace", ws, "--confirm", "deny", "--events", filepath.Join(outside, "events.jsonl"), "-")
		cmd.Stdin = strings.NewReader(`{"id":"1","tool":"bash","args":{"command":"true"}}` + "\n")
		cmd.Stdout, cmd.Stderr = res, &stderr
		if err := cmd.Run(); err == nil {
			t.Fatalf("corral run > results in the workspace: no error (%s)", stderr.String())
		}
		if !strings.Contains(stderr.String(), "inside the workspace") || !strings.Contains(stderr.String(), "redirect them outside the workspace") {
			t.Fatalf("stderr %s; want a refusal naming a place outside", stderr.String())
		}
	})
	t.Run("outside", func(t *testing.T) {
		needsDocker(t)
		cmd := exec.Command("corral", "run", "--workspace", ws, "--confirm", "deny", "--events", filepath.Join(outside, "events.jsonl"), "--log-dir", filepath.Join(outside, "logs"), "-")
		cmd.Stdin = strings.NewReader(`{"id":"1","tool":"bash","args":{"command":"true"}}` + "\n")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("corral run with records outside: %v: %s", err, out)
		}
	})
}

// TestBatchOutInSharedWorkspace: a batch whose --out lies inside a shared
// task's workspace — which its commands change in place — fails that task
// with a reason naming the fix, before any of its calls runs there.
func TestBatchOutInSharedWorkspace(t *testing.T) {
	needsDocker(t)
	dir := t.TempDir()
	shared := filepath.Join(dir, "shared")
	if err := os.Mkdir(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	tasks := `{"id": "shared", "workspace": "shared", "shared": true, "calls": [{"id": "1", "tool": "bash", "args": {"command": "true"}}]}` + "\n"
	if err := os.WriteFile(filepath.Join(dir, "tasks.jsonl"), []byte(tasks), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(shared, "out")
	cmd := exec.Command("corral", "run", "--tasks", filepath.Join(dir, "tasks.jsonl"), "--out", out, "--work-dir", t.TempDir())
	stderr, _ := cmd.CombinedOutput()
	_, by := readSummary(t, out)
	if r := by["shared"]; r.Status != "failed" || !strings.Contains(r.Reason, "inside the workspace") || !strings.Contains(r.Reason, "put it outside") {
		t.Fatalf("task: %+v; want failed, naming the fix\n%s", r, stderr)
	}
	// Its calls never ran: nothing ran in the workspace that holds --out.
	if b, _ := os.ReadFile(filepath.Join(out, "shared", "results.jsonl")); len(b) != 0 {
		t.Errorf("the task ran in the workspace that holds --out: %s", b)
	}
}
