package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// TestFloodMemoryBounded runs `yes | head -c 1G` through `corral run` — the real,
// static binary — and checks the peak RSS of the corral process: the output is
// streamed to the log (capped) and the model's view, never held.
func TestFloodMemoryBounded(t *testing.T) {
	needsDocker(t)
	if testing.Short() {
		t.Skip("1 GB flood: not in -short")
	}
	ws := t.TempDir()
	cmd := exec.Command("corral", "run", "--workspace", ws, "-")
	cmd.Stdin = strings.NewReader(`{"id":"flood","tool":"bash","args":{"command":"yes | head -c 1G; echo; echo done"}}` + "\n")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("corral run: %v", err)
	}
	var res runResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("result %q: %v", out, err)
	}
	if !strings.HasSuffix(res.Content, "\ndone") || !strings.Contains(res.Content, "Output was truncated") {
		t.Errorf("result = %.300q", res.Content)
	}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		t.Fatal("no rusage")
	}
	peak := ru.Maxrss * 1024 // Linux reports KiB
	t.Logf("corral's peak RSS through a 1 GiB flood: %.1f MiB", float64(peak)/(1<<20))
	if peak > 64<<20 {
		t.Errorf("peak RSS %d MiB, want under 64 MiB", peak>>20)
	}
	if os.Getenv("CORRAL_AGENT") == "" {
		t.Error("the test did not run the static corral")
	}
}
