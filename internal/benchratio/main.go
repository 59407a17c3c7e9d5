// Command benchratio reads `go test -bench` output on stdin and prints corral's
// headline figures as ratios against the baselines measured in the same run:
// these machines are noisy, so a ratio means more than one absolute figure.
// `make bench` runs it.
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
)

func main() {
	res, err := parse(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchratio:", err)
		os.Exit(1)
	}
	report(os.Stdout, res)
}

// result is one benchmark's metrics by unit ("ns/op", "MB/s", "peak-RSS-MiB").
type result map[string]float64

// parse reads benchmark lines; a benchmark seen several times (-count) keeps
// the median of each metric.
func parse(r io.Reader) (map[string]result, error) {
	all := map[string]map[string][]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		name := f[0]
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			if _, err := strconv.Atoi(name[i+1:]); err == nil {
				name = name[:i] // the GOMAXPROCS suffix
			}
		}
		if all[name] == nil {
			all[name] = map[string][]float64{}
		}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			all[name][f[i+1]] = append(all[name][f[i+1]], v)
		}
	}
	out := map[string]result{}
	for name, ms := range all {
		out[name] = result{}
		for unit, vs := range ms {
			out[name][unit] = median(vs)
		}
	}
	return out, sc.Err()
}

func median(vs []float64) float64 {
	s := append([]float64(nil), vs...)
	sort.Float64s(s)
	return s[len(s)/2]
}

func report(w io.Writer, res map[string]result) {
	get := func(name, unit string) (float64, bool) {
		r, ok := res[name]
		if !ok {
			return 0, false
		}
		v, ok := r[unit]
		return v, ok
	}
	ms := func(ns float64) string { return fmt.Sprintf("%.1f ms", ns/1e6) }
	fmt.Fprintln(w, "\ncorral benchmarks — ratios against a baseline run in the same process")
	line := func(what, text string) { fmt.Fprintf(w, "  %-30s %s\n", what, text) }

	if c, ok := get("BenchmarkExecTrue", "ns/op"); ok {
		s := "corral " + ms(c)
		if d, ok := get("BenchmarkDockerExecTrue", "ns/op"); ok {
			s += fmt.Sprintf(" | docker exec %s (corral is %.1fx faster; goal ≥ 10x)", ms(d), d/c)
		}
		if n, ok := get("BenchmarkNativeTrue", "ns/op"); ok {
			s += fmt.Sprintf(" | native fork/exec %s (corral costs %.1fx)", ms(n), c/n)
		}
		line("bash round trip (true)", s)
	}
	if c, ok := get("BenchmarkExecTrueBackToBack", "ns/op"); ok {
		line("  back to back", "corral "+ms(c))
	}
	if c, ok := get("BenchmarkColdStart", "ns/op"); ok {
		s := "corral " + ms(c)
		if d, ok := get("BenchmarkDockerRunTrue", "ns/op"); ok {
			s += fmt.Sprintf(" | docker run IMAGE true %s (corral costs %.2fx)", ms(d), c/d)
		}
		line("session cold start", s)
	}
	if r, ok := res["BenchmarkFirstCommand"]; ok {
		line("session first command", fmt.Sprintf("warm from a pool %.1f ms (%.3fx docker run; goal ≤ 0.2x), %.1f ms while the pool refills | cold %.0f ms (%.2fx) | docker run --rm IMAGE true %.0f ms, through the API %.0f ms",
			r["warm-ms"], r["warm/docker-run"], r["warm-refilling-ms"], r["cold-ms"], r["cold/docker-run"], r["docker-run-ms"], r["docker-api-ms"]))
	}
	if r, ok := res["BenchmarkAPIFirstCommand"]; ok {
		line("API session's first command", fmt.Sprintf("corral serve --warm %.1f ms (%.3fx docker run), %.1f ms while the pool refills (%.3fx) | cold %.0f ms (%.2fx) | docker run --rm IMAGE true %.0f ms",
			r["warm-ms"], r["warm/docker-run"], r["warm-refilling-ms"], r["warm-refilling/docker-run"], r["cold-ms"], r["cold/docker-run"], r["docker-run-ms"]))
	}
	if r, ok := res["BenchmarkBatch"]; ok {
		line("batch of 32 tasks", fmt.Sprintf("corral %.1f s (%.2fx the docker run script's %.1f s; start p50 %.0f ms, p99 %.0f ms) | all 32 at once %.1f s (%.2fx; start p50 %.0f ms, p99 %.0f ms) | script's start p50 %.0f ms, p99 %.0f ms",
			r["corral-wall-ms"]/1e3, r["corral/docker"], r["docker-wall-ms"]/1e3, r["corral-p50-ms"], r["corral-p99-ms"],
			r["corral-32-wall-ms"]/1e3, r["corral-32/docker"], r["corral-32-p50-ms"], r["corral-32-p99-ms"], r["docker-p50-ms"], r["docker-p99-ms"]))
	}
	if r, ok := res["BenchmarkServeMemory"]; ok {
		line("memory per live session", fmt.Sprintf("corral serve +%.2f MiB a session (%.1f MiB with 1, %.1f MiB with 32; %.1f MiB with none) | each sandbox %.1f MiB (the engine's count)",
			r["per-session-MiB"], r["rss-1-MiB"], r["rss-32-MiB"], r["rss-0-MiB"], r["sandbox-MiB"]))
	}
	if mb, ok := get("BenchmarkFlood", "MB/s"); ok {
		rss, _ := get("BenchmarkFlood", "peak-RSS-MiB")
		line("flood (yes | head -c 100M)", fmt.Sprintf("%.0f MB/s through the sandbox; peak RSS of the process %.1f MiB", mb, rss))
	}
	if s, ok := get("BenchmarkShapeFlood/shape", "MB/s"); ok {
		b, _ := get("BenchmarkShapeFlood/baseline-count-lines", "MB/s")
		line("model view of output", fmt.Sprintf("%.0f MB/s (counting lines alone: %.0f MB/s, %.1fx)", s, b, b/s))
	}
	if e, ok := get("BenchmarkEdit10MB/edit", "ns/op"); ok {
		s := "edit " + ms(e)
		if r, ok := get("BenchmarkEdit10MB/rewrite", "ns/op"); ok {
			s += fmt.Sprintf(" | read+rewrite %s (%.1fx; goal ≤ 3x)", ms(r), e/r)
		}
		if r, ok := get("BenchmarkEdit10MB/rewrite+fsync", "ns/op"); ok {
			s += fmt.Sprintf(" | with fsync+rename %s (%.1fx)", ms(r), e/r)
		}
		line("edit of a 10 MB file", s)
	}
	if ns, ok := get("BenchmarkReadHead2GB", "ns/op"); ok {
		bop, _ := get("BenchmarkReadHead2GB", "B/op")
		line("read head of 2 GB file", fmt.Sprintf("%s, %.0f KB allocated per read (constant memory)", ms(ns), bop/1024))
	}
	for _, k := range []string{"unchanged", "one-file"} {
		c, ok := get("BenchmarkCheckpoint100k/corral-"+k, "ns/op")
		if !ok {
			continue
		}
		s := "corral " + ms(c)
		if g, ok := get("BenchmarkCheckpoint100k/stash-create-"+k, "ns/op"); ok {
			s += fmt.Sprintf(" | git stash create %s (%.2fx)", ms(g), c/g)
		}
		line("checkpoint, 100k files, "+k, s)
	}
	if f, ok := get("BenchmarkCheckpoint100k/first", "ns/op"); ok {
		line("  first of a workspace", ms(f)+" (every file checked against the index once)")
	}
	if r, ok := res["BenchmarkCheckpoint200Calls"]; ok {
		s := fmt.Sprintf("repository +%.0f KiB, state directory +%.0f KiB, corral log reports %.0f KiB", r["repo-growth-KiB"], r["state-growth-KiB"], r["disk-usage-KiB"])
		if base := r["repo-KiB"]; base > 0 {
			s += fmt.Sprintf(" (%.1f%% of the repository's .git, %.0f KiB)", 100*(r["repo-growth-KiB"]+r["state-growth-KiB"])/base, base)
			if gc, ok := r["repo-growth-after-gc-KiB"]; ok {
				s += fmt.Sprintf("; after git gc +%.0f KiB (%.1f%%)", gc, 100*gc/base)
			}
		}
		line("200 checkpoints, 100k files", s)
	}
	if r, ok := res["BenchmarkEgress"]; ok {
		line("--network allow, download", fmt.Sprintf("tunnel %.0f MB/s vs bridge %.0f MB/s (%.2fx; goal ≥ 0.8x), %.2fx a bare host relay | plain HTTP %.0f vs %.0f MB/s (%.2fx) | stream relay %.0f MB/s (%.2fx)",
			r["tunnel-MB/s"], r["bridge-stream-MB/s"], r["tunnel/bridge"], r["tunnel/host-relay"], r["proxy-MB/s"], r["bridge-MB/s"], r["proxy/bridge"], r["stream-relay-MB/s"], r["stream-relay/bridge"]))
		line("--network allow, per request", fmt.Sprintf("+%.1f ms p50 (stream relay +%.1f ms); 100 tunnels %.1f MiB (stream relay %.1f MiB)",
			r["added-p50-ms"], r["stream-relay-added-p50-ms"], r["100-tunnels-MiB"], r["stream-relay-100-tunnels-MiB"]))
	}
	var typical []string
	for name := range res {
		if strings.HasPrefix(name, "BenchmarkTypical/") {
			typical = append(typical, name)
		}
	}
	sort.Strings(typical)
	for _, name := range typical {
		r := res[name]
		cmd := strings.ReplaceAll(strings.TrimPrefix(name, "BenchmarkTypical/"), "_", " ")
		line("policy: "+clip(cmd, 22), fmt.Sprintf("%.1f µs per command (%.1fx parsing alone; goal < 50 µs)", r["classify-ns/cmd"]/1e3, r["x-parse"]))
	}
	if r, ok := res["BenchmarkCorpus/public"]; ok {
		line("policy: public corpus", fmt.Sprintf("%.1f µs per command (%.1fx parsing alone)", r["classify-ns/cmd"]/1e3, r["x-parse"]))
	}
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}
