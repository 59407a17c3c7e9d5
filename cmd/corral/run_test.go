package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
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
	cmd.Stdin = strings.NewReader(`{"id":"flood","tool":"bash","args":{"command":"yes | head -c 1G; echo; echo done","timeout":600}}` + "\n")
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

// TestRunSignals: Ctrl-C (SIGINT) cancels the running call, whose result says
// so, and corral exits 130; SIGINT or SIGTERM, the sandbox is removed.
func TestRunSignals(t *testing.T) {
	needsDocker(t)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			ws := t.TempDir()
			cmd := exec.Command("corral", "run", "--workspace", ws, "-")
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
			// A first call proves the sandbox is up; the second hangs.
			fmt.Fprintln(stdin, `{"id":"1","tool":"bash","args":{"command":"cat /etc/hostname"}}`)
			if !sc.Scan() {
				t.Fatal("no result for the first call")
			}
			var first runResult
			json.Unmarshal(sc.Bytes(), &first)
			_, host, _ := strings.Cut(first.Content, "\n\n")
			host = strings.TrimSpace(host)
			fmt.Fprintln(stdin, `{"id":"2","tool":"bash","args":{"command":"sleep 120"}}`)
			time.Sleep(time.Second)
			cmd.Process.Signal(sig)
			if !sc.Scan() {
				t.Fatal("no result for the interrupted call")
			}
			var second runResult
			json.Unmarshal(sc.Bytes(), &second)
			if second.ID == nil || string(second.ID) != `"2"` || !second.IsError || !strings.Contains(second.Content, "Cancelled") {
				t.Errorf("interrupted call: %s", sc.Bytes())
			}
			err = cmd.Wait()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 130 {
				t.Errorf("exit: %v, want status 130", err)
			}
			out, _ := exec.Command("docker", "ps", "-aq", "--filter", "id="+host).Output()
			if host == "" || strings.TrimSpace(string(out)) != "" {
				t.Errorf("sandbox %q still there after corral exited", host)
			}
		})
	}
}
