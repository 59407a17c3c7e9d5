// Command benchab measures the bash round trip of two revisions of corral
// against each other in one run, for when a change must be shown not to slow
// it: each revision is checked out in a worktree of its own, gets a driver
// test in its Docker backend's package (so each runs its own host side, agent
// and protocol), and the two take turns, a round of calls each, so that both see
// the same load on a noisy machine.
//
//	go run ./internal/benchab [-rounds 30] [-calls 10] [-pauses 30ms,0] OLD NEW
//
// OLD and NEW are git revisions (commit them first). It prints, for each
// pause between calls (0 is back to back), each revision's round trip and its
// container's CPU time per call, and NEW's time over OLD's as the median and
// the range of the rounds' ratios. The Docker backend tests' engine and image
// are needed, as for `go test ./sandbox/docker`.
package main

import (
	"bufio"
	"cmp"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// driverSource is the driver test written into each worktree's Docker
// backend package (see driver). It uses the package's own test helpers
// (shared, containerID), which both revisions must have.
//
//go:embed driver_test.go.txt
var driverSource string

// driver returns the directory of tree's Docker backend package and the
// driver's source for it: sandbox/docker, or sandbox itself in revisions
// from before the backend had a package of its own.
func driver(tree string) (pkg, src string) {
	if _, err := os.Stat(filepath.Join(tree, "sandbox", "docker")); err == nil {
		return "sandbox/docker", driverSource
	}
	src = strings.Replace(driverSource, "package docker", "package sandbox", 1)
	src = strings.Replace(src, "\n\n\t\"github.com/corralhq/corral/sandbox\"\n", "\n", 1)
	return "sandbox", strings.ReplaceAll(src, "sandbox.ExecRequest", "ExecRequest")
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "benchab:", err)
		os.Exit(1)
	}
}

func run() error {
	rounds := flag.Int("rounds", 30, "rounds per pause; each runs -calls calls of each revision")
	calls := flag.Int("calls", 10, "calls per revision per round")
	pauses := flag.String("pauses", "30ms,0", "pauses between calls, comma-separated (0: back to back)")
	command := flag.String("command", "true", "the command each call runs")
	flag.Parse()
	if flag.NArg() != 2 {
		return errors.New("usage: benchab [flags] OLD NEW (two git revisions)")
	}
	var waits []time.Duration
	for _, p := range strings.Split(*pauses, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(p))
		if err != nil {
			return fmt.Errorf("-pauses: %w", err)
		}
		waits = append(waits, d)
	}
	top, err := output("git", "rev-parse", "--show-toplevel")
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "corral-benchab-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	var builds []*build
	defer func() {
		for _, b := range builds {
			b.stop()
			_, _ = output("git", "-C", top, "worktree", "remove", "--force", b.tree)
		}
	}()
	for i, rev := range flag.Args() {
		b := &build{label: rev, tree: filepath.Join(tmp, fmt.Sprintf("tree%d", i))}
		builds = append(builds, b)
		if _, err := output("git", "-C", top, "worktree", "add", "--detach", b.tree, rev); err != nil {
			return err
		}
		var src string
		b.pkg, src = driver(b.tree)
		if err := os.WriteFile(filepath.Join(b.tree, b.pkg, "zz_benchab_test.go"), []byte(src), 0o644); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "building %s\n", rev)
		bin := filepath.Join(tmp, fmt.Sprintf("sandbox%d.test", i))
		cmd := exec.Command("go", "test", "-c", "-o", bin, "./"+b.pkg)
		cmd.Dir, cmd.Env = b.tree, append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("build %s: %v\n%s", rev, err, out)
		}
		if err := b.start(bin); err != nil {
			return fmt.Errorf("%s: %w", rev, err)
		}
	}
	old, new := builds[0], builds[1]
	for _, wait := range waits {
		what := fmt.Sprintf("pause %v", wait)
		if wait == 0 {
			what = "back to back"
		}
		var ratios []float64
		old.times, new.times, old.cpu, new.cpu = nil, nil, nil, nil
		for r := range *rounds {
			order := []*build{old, new}
			if r%2 == 1 {
				order = []*build{new, old}
			}
			var med [2]float64
			for _, b := range order {
				m, err := b.round(*calls, wait, *command)
				if err != nil {
					return fmt.Errorf("%s: %w", b.label, err)
				}
				if b == old {
					med[0] = m
				} else {
					med[1] = m
				}
			}
			ratios = append(ratios, med[1]/med[0])
		}
		fmt.Printf("%s, %d rounds of %d calls of %q:\n", what, *rounds, *calls, *command)
		for _, b := range builds {
			fmt.Printf("  %-12s round trip median %.2f ms (p25 %.2f, p75 %.2f)", b.label, quantile(b.times, .5), quantile(b.times, .25), quantile(b.times, .75))
			if len(b.cpu) > 0 {
				fmt.Printf("; container CPU %.2f ms a call", quantile(b.cpu, .5))
			}
			fmt.Println()
		}
		fmt.Printf("  %s / %s: %.3f (median of the rounds' ratios; %.3f to %.3f)\n", new.label, old.label, quantile(ratios, .5), quantile(ratios, 0), quantile(ratios, 1))
	}
	return nil
}

// build is one revision's driver, a test binary serving rounds of calls.
type build struct {
	label, tree string
	pkg         string // the Docker backend's package directory in tree
	cmd         *exec.Cmd
	in          io.WriteCloser
	out         *bufio.Scanner
	times, cpu  []float64 // round trips and CPU per call, in ms
}

func (b *build) start(bin string) error {
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	b.cmd = exec.Command(bin, "-test.run", "^TestBenchabDriver$", "-test.timeout", "3h")
	b.cmd.Dir = filepath.Join(b.tree, b.pkg)
	b.cmd.Env = append(os.Environ(), "CORRAL_BENCHAB=1")
	b.cmd.ExtraFiles = []*os.File{w}
	b.cmd.Stderr = os.Stderr
	if b.in, err = b.cmd.StdinPipe(); err != nil {
		return err
	}
	if err := b.cmd.Start(); err != nil {
		return err
	}
	w.Close()
	b.out = bufio.NewScanner(r)
	b.out.Buffer(make([]byte, 1<<20), 1<<20)
	if !b.out.Scan() || !strings.HasPrefix(b.out.Text(), "ready") {
		return errors.New("the driver did not start (see above)")
	}
	return nil
}

// round runs calls calls and returns their median round trip in ms.
func (b *build) round(calls int, wait time.Duration, command string) (float64, error) {
	if _, err := fmt.Fprintf(b.in, "%d %d %s\n", calls, wait.Microseconds(), command); err != nil {
		return 0, err
	}
	if !b.out.Scan() {
		return 0, errors.New("the driver ended")
	}
	times, cpu, _ := strings.Cut(b.out.Text(), "|")
	var these []float64
	for _, f := range strings.Fields(times) {
		ns, err := strconv.ParseFloat(f, 64)
		if err != nil {
			return 0, fmt.Errorf("driver: %s", b.out.Text())
		}
		these = append(these, ns/1e6)
	}
	if ns, err := strconv.ParseFloat(strings.TrimSpace(cpu), 64); err == nil && ns > 0 {
		b.cpu = append(b.cpu, ns/1e6)
	}
	b.times = append(b.times, these...)
	return quantile(these, .5), nil
}

// stop ends the driver: at the end of its input it closes its sandbox.
func (b *build) stop() {
	if b.cmd == nil || b.cmd.Process == nil {
		return
	}
	b.in.Close()
	done := make(chan struct{})
	go func() { _ = b.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		_ = b.cmd.Process.Kill()
	}
}

func quantile(v []float64, q float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.SortFunc(s, cmp.Compare)
	return s[int(q*float64(len(s)-1))]
}

func output(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out)), nil
}
