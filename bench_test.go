package corral_test

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"

	"github.com/corralhq/corral"
	"github.com/corralhq/corral/internal/testenv"
	"github.com/corralhq/corral/pool"
	"github.com/corralhq/corral/sandbox/docker"
	"github.com/corralhq/corral/tools"
)

// BenchmarkFirstCommand is a session's first command — Open, then a bash
// call of `true` — four ways, taking turns in each iteration so that the
// machine's load weighs on all alike:
//
//   - warm: the session's sandbox comes from a pool that made it ahead
//     (Pool.Warm); a pool of Max 1, so that no refill starts under the
//     measured command;
//   - warm-refilling: the same from a pool without a limit, which starts
//     the next sandbox as soon as this one is claimed (as in a batch);
//   - cold: no pool: the container is created and started by the session;
//   - docker-run: `docker run --rm IMAGE true`, the command line, as a
//     script would run it; and docker-api, the same through the engine's API
//     (create, attach, start, wait; the removal not timed), the least a
//     container's start costs.
//
// It reports each one's median in ms and the ratios to docker run. The
// workspace holds a few small files (the warm session copies them into its
// slot). The pools refill between the measured commands, untimed.
func BenchmarkFirstCommand(b *testing.B) {
	testenv.NeedsDocker(b)
	b.Setenv("TMPDIR", b.TempDir())
	base := corral.Config{Workspace: b.TempDir(), Backend: docker.Backend}
	base.Sandbox.Agent, base.Sandbox.Image = testenv.Agent(b), testenv.Image
	for i, name := range []string{"README", "main.py", "setup.cfg"} {
		if err := os.WriteFile(filepath.Join(base.Workspace, name), []byte(name+" "+string(rune('a'+i))+"\n"), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	ctx := context.Background()
	api, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		b.Fatal(err)
	}
	defer api.Close()

	pools := map[string]*pool.Pool{}
	for name, max := range map[string]int{"warm": 1, "warm-refilling": 0} {
		p, err := pool.New(pool.Options{Backend: docker.Backend, Dir: b.TempDir(), Max: max})
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close()
		if err := p.Warm(base.Sandbox, 1); err != nil {
			b.Fatal(err)
		}
		pools[name] = p
	}
	ready := func(p *pool.Pool) {
		testenv.WaitFor(b, 2*time.Minute, "a ready sandbox in the pool, none starting", func() bool {
			st := p.Stats()
			return st.Ready >= 1 && st.Starting == 0
		})
	}
	session := func(p *pool.Pool) time.Duration {
		cfg := base
		cfg.Pool = p
		h, err := corral.New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		defer h.Close()
		begin := time.Now()
		s, err := h.Open(ctx, corral.SessionOptions{})
		if err != nil {
			b.Fatal(err)
		}
		r, err := s.Bash(ctx, tools.BashParams{Command: "true"})
		took := time.Since(begin)
		if err != nil || r.IsError {
			b.Fatalf("bash true: %+v %v", r, err)
		}
		if p != nil {
			if ps, ok := s.Sandbox().(*pool.Sandbox); !ok || !ps.Warm() {
				b.Fatal("the session's sandbox was not made ahead")
			}
		}
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		return took
	}
	dockerRun := func() time.Duration {
		begin := time.Now()
		if out, err := exec.Command("docker", "run", "--rm", "--network", "none", testenv.Image, "true").CombinedOutput(); err != nil {
			b.Fatalf("docker run: %v %s", err, out)
		}
		return time.Since(begin)
	}
	dockerAPI := func() time.Duration {
		begin := time.Now()
		cr, err := api.ContainerCreate(ctx, &container.Config{Image: testenv.Image, Cmd: []string{"true"}, AttachStdout: true, AttachStderr: true},
			&container.HostConfig{NetworkMode: "none"}, nil, nil, "")
		if err != nil {
			b.Fatal(err)
		}
		defer api.ContainerRemove(ctx, cr.ID, container.RemoveOptions{Force: true})
		hj, err := api.ContainerAttach(ctx, cr.ID, container.AttachOptions{Stream: true, Stdout: true, Stderr: true})
		if err != nil {
			b.Fatal(err)
		}
		waitC, errC := api.ContainerWait(ctx, cr.ID, container.WaitConditionNextExit)
		if err := api.ContainerStart(ctx, cr.ID, container.StartOptions{}); err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, hj.Reader)
		hj.Close()
		select {
		case w := <-waitC:
			if w.StatusCode != 0 {
				b.Fatal(w)
			}
		case err := <-errC:
			b.Fatal(err)
		}
		return time.Since(begin)
	}

	ways := []string{"warm", "warm-refilling", "cold", "docker-run", "docker-api"}
	took := map[string][]time.Duration{}
	b.ResetTimer()
	for b.Loop() {
		for _, way := range ways {
			b.StopTimer()
			if p := pools[way]; p != nil {
				ready(p)
			}
			time.Sleep(200 * time.Millisecond) // what the last one left settles
			b.StartTimer()
			var d time.Duration
			switch way {
			case "warm", "warm-refilling":
				d = session(pools[way])
			case "cold":
				d = session(nil)
			case "docker-run":
				d = dockerRun()
			case "docker-api":
				d = dockerAPI()
			}
			took[way] = append(took[way], d)
		}
	}
	b.StopTimer()
	med := map[string]float64{}
	for _, way := range ways {
		med[way] = float64(median(took[way])) / 1e6
		b.ReportMetric(med[way], way+"-ms")
	}
	b.ReportMetric(med["warm"]/med["docker-run"], "warm/docker-run")
	b.ReportMetric(med["warm-refilling"]/med["docker-run"], "warm-refilling/docker-run")
	b.ReportMetric(med["cold"]/med["docker-run"], "cold/docker-run")
	b.ReportMetric(med["warm"]/med["docker-api"], "warm/docker-api")
	b.ReportMetric(0, "ns/op")
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
