//go:build linux

// Command startcost compares what corral binaries cost before they do
// anything: each one's size, and the peak RSS and wall time of `BINARY
// --version`, run -n times each, the binaries taking turns so that the
// machine's load falls on all alike. It prints medians and their ratios to the
// first binary (the baseline):
//
//	go build -trimpath -o /tmp/old ./cmd/corral   # at the old revision
//	go build -trimpath -o /tmp/new ./cmd/corral
//	go run ./internal/startcost /tmp/old /tmp/new
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"syscall"
	"time"
)

func main() {
	n := flag.Int("n", 30, "runs of each binary")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: startcost [-n RUNS] BASELINE BINARY...")
		flag.PrintDefaults()
	}
	flag.Parse()
	if err := run(flag.Args(), *n); err != nil {
		fmt.Fprintln(os.Stderr, "startcost:", err)
		os.Exit(1)
	}
}

// cost is one binary's measures.
type cost struct {
	size      int64
	rss, wall []float64 // MiB, ms: one per run
}

func run(bins []string, n int) error {
	if len(bins) < 1 || n < 1 {
		return errors.New("want a baseline binary and a positive -n")
	}
	costs := make([]cost, len(bins))
	for i, b := range bins {
		st, err := os.Stat(b)
		if err != nil {
			return err
		}
		costs[i].size = st.Size()
	}
	for range n {
		for i, b := range bins {
			rss, wall, err := once(b)
			if err != nil {
				return err
			}
			costs[i].rss = append(costs[i].rss, rss)
			costs[i].wall = append(costs[i].wall, wall)
		}
	}
	base := costs[0]
	for i, c := range costs {
		fmt.Printf("%s\n  size %.1f MB (%.2fx)  peak RSS %.1f MiB (%.2fx; %.1f-%.1f)  start %.1f ms (%.2fx; %.1f-%.1f)\n",
			bins[i], float64(c.size)/1e6, float64(c.size)/float64(base.size),
			median(c.rss), median(c.rss)/median(base.rss), slices.Min(c.rss), slices.Max(c.rss),
			median(c.wall), median(c.wall)/median(base.wall), slices.Min(c.wall), slices.Max(c.wall))
	}
	return nil
}

// once runs `bin --version` and returns its peak RSS in MiB and its wall
// time in milliseconds.
func once(bin string) (rss, wall float64, err error) {
	cmd := exec.Command(bin, "--version")
	begin := time.Now()
	if err := cmd.Run(); err != nil {
		return 0, 0, fmt.Errorf("%s --version: %w", bin, err)
	}
	wall = float64(time.Since(begin).Microseconds()) / 1000
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		return 0, 0, errors.New("no rusage on this system")
	}
	return float64(ru.Maxrss) / 1024, wall, nil // Linux reports KiB
}

func median(v []float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	return v[len(v)/2]
}
