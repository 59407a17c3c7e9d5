package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/batch"
	"github.com/corralhq/corral/control"
	"github.com/corralhq/corral/internal/testenv"
)

// batchTasks is the number of tasks of BenchmarkBatch and the sessions of
// BenchmarkServeMemory: the 32.
const batchTasks = 32

// BenchmarkBatch is issue 14's batch: 32 tasks, each on a copy of a small
// workspace, running `python3 -c 'print(1)'` and one edit (a read of the
// file, which the edit tool wants first, and the edit; --confirm allow, for
// the policy asks about inline code), three ways taking turns in each
// iteration:
//
//   - docker: a plain script that starts the 32 at once, each a copy of the
//     workspace (cp -r) and `docker run --rm -v COPY:/ws IMAGE sh -c
//     "python3 -c 'print(1)' && sed -i ... /ws/data.txt"`, and waits for all;
//   - corral: `corral run --tasks` with its defaults (at most twice the
//     cores at once, started at twice the cores a second);
//   - corral-32: the same with --max-sandboxes 32 --start-rate 1000: all at
//     once, as the script.
//
// It reports each one's median wall time; the p50 and p99 sandbox start —
// corral's from summary.json (from a task's room to its started sandbox),
// the script's from a task's launch to the first command in its container
// (the copy, the create and the start: `date` is its first command) — and
// the ratios of the walls.
func BenchmarkBatch(b *testing.B) {
	testenv.NeedsDocker(b)
	dir := b.TempDir()
	b.Setenv("TMPDIR", filepath.Join(dir, "tmp"))
	os.Mkdir(filepath.Join(dir, "tmp"), 0o755)
	ws := filepath.Join(dir, "ws")
	os.MkdirAll(filepath.Join(ws, "src"), 0o755)
	os.WriteFile(filepath.Join(ws, "data.txt"), []byte("original\n"), 0o644)
	os.WriteFile(filepath.Join(ws, "src", "main.py"), []byte("print('hello')\n"), 0o644)
	var tasks strings.Builder
	for i := range batchTasks {
		fmt.Fprintf(&tasks, `{"id": "t%d", "workspace": "ws", "calls": [{"id": "1", "tool": "bash", "args": {"command": "python3 -c 'print(1)'"}}, {"id": "2", "tool": "read", "args": {"path": "data.txt"}}, {"id": "3", "tool": "edit", "args": {"path": "data.txt", "oldText": "original", "newText": "edited"}}]}`+"\n", i)
	}
	tasksFile := filepath.Join(dir, "tasks.jsonl")
	if err := os.WriteFile(tasksFile, []byte(tasks.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	script := filepath.Join(dir, "docker.sh")
	if err := os.WriteFile(script, []byte(`#!/bin/bash
# 32 tasks at once: a copy of the workspace each, then docker run --rm on it.
set -e
ws=$1 out=$2 image=$3 n=$4
mkdir -p "$out"
for i in $(seq 1 "$n"); do
	(
		s=$(date +%s%N)
		cp -r "$ws" "$out/w$i"
		docker run --rm --network none -v "$out/w$i:/ws" "$image" sh -c "date +%s%N > /ws/.started && python3 -c 'print(1)' >/dev/null && sed -i s/original/edited/ /ws/data.txt"
		grep -q edited "$out/w$i/data.txt"
		echo $(( $(date +%s%N) - s )) $(( $(cat "$out/w$i/.started") - s )) > "$out/t$i"
	) &
done
wait
`), 0o755); err != nil {
		b.Fatal(err)
	}

	type way struct {
		name string
		run  func(out string) (wall time.Duration, p50, p99 time.Duration)
	}
	corralRun := func(flags ...string) func(string) (time.Duration, time.Duration, time.Duration) {
		return func(out string) (time.Duration, time.Duration, time.Duration) {
			args := append([]string{"run", "--tasks", tasksFile, "--out", out, "--image", testenv.Image, "--confirm", "allow"}, flags...)
			begin := time.Now()
			if o, err := exec.Command("corral", args...).CombinedOutput(); err != nil {
				b.Fatalf("corral %s: %v\n%s", strings.Join(args, " "), err, o)
			}
			wall := time.Since(begin)
			raw, err := os.ReadFile(filepath.Join(out, "summary.json"))
			if err != nil {
				b.Fatal(err)
			}
			var sum batch.Summary
			if err := json.Unmarshal(raw, &sum); err != nil {
				b.Fatal(err)
			}
			if sum.OK != batchTasks {
				b.Fatalf("corral: %d of %d tasks ok: %s", sum.OK, batchTasks, raw)
			}
			for _, t := range sum.Tasks {
				if t.Errors != 0 || t.LastBashExit == nil || *t.LastBashExit != 0 {
					b.Fatalf("task %s: %+v", t.ID, t)
				}
			}
			return wall, sum.StartP50, sum.StartP99
		}
	}
	ways := []way{
		{"docker", func(out string) (time.Duration, time.Duration, time.Duration) {
			begin := time.Now()
			if o, err := exec.Command("bash", script, ws, out, testenv.Image, strconv.Itoa(batchTasks)).CombinedOutput(); err != nil {
				b.Fatalf("the docker script: %v\n%s", err, o)
			}
			wall := time.Since(begin)
			var starts []time.Duration
			for i := 1; i <= batchTasks; i++ {
				raw, err := os.ReadFile(filepath.Join(out, "t"+strconv.Itoa(i)))
				if err != nil {
					b.Fatal(err)
				}
				var task, start int64
				if _, err := fmt.Sscan(string(raw), &task, &start); err != nil {
					b.Fatalf("t%d: %q: %v", i, raw, err)
				}
				starts = append(starts, time.Duration(start))
			}
			return wall, percentile(starts, 50), percentile(starts, 99)
		}},
		{"corral", corralRun()},
		{"corral-32", corralRun("--max-sandboxes", strconv.Itoa(batchTasks), "--start-rate", "1000")},
	}
	walls := map[string][]time.Duration{}
	p50s := map[string][]time.Duration{}
	p99s := map[string][]time.Duration{}
	n := 0
	for b.Loop() {
		for _, w := range ways {
			b.StopTimer()
			out := filepath.Join(dir, fmt.Sprintf("out-%s-%d", w.name, n))
			time.Sleep(time.Second) // what the last one left settles
			b.StartTimer()
			wall, p50, p99 := w.run(out)
			b.StopTimer()
			os.RemoveAll(out)
			b.StartTimer()
			walls[w.name] = append(walls[w.name], wall)
			p50s[w.name] = append(p50s[w.name], p50)
			p99s[w.name] = append(p99s[w.name], p99)
		}
		n++
	}
	b.StopTimer()
	ms := func(ds []time.Duration) float64 { return float64(percentile(ds, 50)) / 1e6 }
	for _, w := range ways {
		b.ReportMetric(ms(walls[w.name]), w.name+"-wall-ms")
		b.ReportMetric(ms(p50s[w.name]), w.name+"-p50-ms")
		b.ReportMetric(ms(p99s[w.name]), w.name+"-p99-ms")
	}
	b.ReportMetric(ms(walls["corral"])/ms(walls["docker"]), "corral/docker")
	b.ReportMetric(ms(walls["corral-32"])/ms(walls["docker"]), "corral-32/docker")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkServeMemory is the host memory a live session costs: one `corral
// serve` holding 32 sessions, each having run a command. corral's own
// resident memory is read from /proc (VmRSS) with none, one and 32
// sessions; a session's share is the increment per session over one session
// (what the first session brings once — the Docker client's connections,
// lazily made state — is not a session's). Each sandbox's memory, its agent
// and a shell ready for the next command, is the container's (the engine's
// count, as docker stats gives it) and is reported apart.
func BenchmarkServeMemory(b *testing.B) {
	testenv.NeedsDocker(b)
	var base, one, all, perSession, perSessionOverBase, sandbox []float64
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		srv, url := startServe(b, "--workspace", b.TempDir(), "--idle-timeout", "0")
		c := control.NewClient(url, "")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		if _, err := c.Version(ctx); err != nil {
			b.Fatal(err)
		}
		pid := srv.Process.Pid
		settle := func() float64 {
			time.Sleep(2 * time.Second)
			return rssMiB(b, pid)
		}
		r0 := settle()
		session := func() string {
			info, err := c.Create(ctx, control.SessionOptions{Image: testenv.Image})
			if err != nil {
				b.Fatal(err)
			}
			res, err := c.Exec(ctx, info.ID, control.ExecRequest{Command: "python3 -c 'print(1)'"}, nil, nil)
			if err != nil || res.ExitCode != 0 {
				b.Fatalf("exec: %+v %v", res, err)
			}
			return info.ID
		}
		session()
		r1 := settle()
		for range batchTasks - 1 {
			session()
		}
		r32 := settle()
		ids := containersOf(b, pid, false)
		if len(ids) != batchTasks {
			b.Fatalf("%d containers, want %d", len(ids), batchTasks)
		}
		sandbox = append(sandbox, containerMiB(b, ids)/batchTasks)
		base, one, all = append(base, r0), append(one, r1), append(all, r32)
		perSession = append(perSession, (r32-r1)/(batchTasks-1))
		perSessionOverBase = append(perSessionOverBase, (r32-r0)/batchTasks)
		cancel()
		srv.Process.Signal(os.Interrupt)
		srv.Wait()
	}
	med := func(v []float64) float64 {
		s := slices.Clone(v)
		slices.Sort(s)
		return s[len(s)/2]
	}
	b.ReportMetric(med(base), "rss-0-MiB")
	b.ReportMetric(med(one), "rss-1-MiB")
	b.ReportMetric(med(all), "rss-32-MiB")
	b.ReportMetric(med(perSession), "per-session-MiB")
	b.ReportMetric(med(perSessionOverBase), "per-session-over-base-MiB")
	b.ReportMetric(med(sandbox), "sandbox-MiB")
	b.ReportMetric(0, "ns/op")
}

// rssMiB is process pid's resident memory (VmRSS), in MiB.
func rssMiB(b *testing.B, pid int) float64 {
	b.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb / 1024
		}
	}
	b.Fatal("no VmRSS")
	return 0
}

// containerMiB is the memory the engine counts for the containers ids, in
// MiB, summed.
func containerMiB(b *testing.B, ids []string) float64 {
	b.Helper()
	out, err := exec.Command("docker", append([]string{"stats", "--no-stream", "--format", "{{.MemUsage}}"}, ids...)...).Output()
	if err != nil {
		b.Fatal(err)
	}
	var sum float64
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		used, _, _ := strings.Cut(line, " / ")
		sum += mib(b, strings.TrimSpace(used))
	}
	return sum
}

// mib reads a size docker stats prints ("12.5MiB", "1.2GiB", "900KiB").
func mib(b *testing.B, s string) float64 {
	for _, u := range []struct {
		suffix string
		scale  float64
	}{{"KiB", 1.0 / 1024}, {"MiB", 1}, {"GiB", 1024}, {"kB", 1e3 / (1 << 20)}, {"MB", 1e6 / (1 << 20)}, {"GB", 1e9 / (1 << 20)}, {"B", 1.0 / (1 << 20)}} {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				b.Fatalf("docker stats: %q", s)
			}
			return f * u.scale
		}
	}
	b.Fatalf("docker stats: %q", s)
	return 0
}

// percentile is the p-th percentile of ds (nearest rank), as summary.json's.
func percentile(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (p*len(s) + 99) / 100
	return s[max(0, min(len(s)-1, i-1))]
}
