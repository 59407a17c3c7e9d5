package control

import (
	"context"
	"net/http/httptest"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/corralhq/corral"
	"github.com/corralhq/corral/internal/testenv"
	"github.com/corralhq/corral/sandbox"
)

// BenchmarkAPIFirstCommand is a session's first command through the control
// API — session.create on a fresh workspace, then an exec of `true`, over
// HTTP — four ways, taking turns in each iteration so that the machine's
// load weighs on all alike:
//
//   - warm: a server with Warm 1 and MaxSessions 1, whose sandbox is ready
//     and whose pool cannot start another under the measured command;
//   - warm-refilling: Warm 1 without a limit: the pool starts the next
//     sandbox as soon as the session takes this one;
//   - cold: a server without Warm: the session's container is created and
//     started by session.create;
//   - docker-run: `docker run --rm --network none IMAGE true`.
//
// It reports each one's median in ms and the ratios to docker run. Closing
// the session, and the pools' refills, are not timed.
func BenchmarkAPIFirstCommand(b *testing.B) {
	testenv.NeedsDocker(b)
	agent := testenv.Agent(b) // built once, outside the run's TMPDIR
	b.Setenv("TMPDIR", b.TempDir())
	ctx := context.Background()
	server := func(warm, max int) (*Server, *Client) {
		s, err := NewServer(Options{
			Config: corral.Config{
				Workspace: b.TempDir(),
				Sandbox:   sandbox.Config{Agent: agent, Image: testenv.Image},
			},
			Warm:        warm,
			MaxSessions: max,
			WorkDir:     b.TempDir(),
		})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		ts := httptest.NewServer(s.Handler(HTTPOptions{}))
		b.Cleanup(ts.Close)
		c := NewClient(ts.URL, "")
		b.Cleanup(func() { c.Close() })
		return s, c
	}
	servers := map[string]*Server{}
	clients := map[string]*Client{}
	for way, o := range map[string][2]int{"warm": {1, 1}, "warm-refilling": {1, 0}, "cold": {0, 0}} {
		servers[way], clients[way] = server(o[0], o[1])
	}
	ready := func(s *Server) {
		testenv.WaitFor(b, 2*time.Minute, "a ready sandbox in the pool, none starting", func() bool {
			st := s.pool.Stats()
			return st.Ready >= 1 && st.Starting == 0
		})
	}
	first := func(way string) time.Duration {
		c := clients[way]
		begin := time.Now()
		info, err := c.Create(ctx, SessionOptions{})
		if err != nil {
			b.Fatal(err)
		}
		res, err := c.Exec(ctx, info.ID, ExecRequest{Argv: []string{"true"}}, nil, nil)
		took := time.Since(begin)
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("exec true: %+v %v", res, err)
		}
		if info.Warm != (way != "cold") {
			b.Fatalf("%s: the session says warm %v", way, info.Warm)
		}
		if err := c.CloseSession(ctx, info.ID); err != nil {
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

	ways := []string{"warm", "warm-refilling", "cold", "docker-run"}
	took := map[string][]time.Duration{}
	b.ResetTimer()
	for b.Loop() {
		for _, way := range ways {
			b.StopTimer()
			if s := servers[way]; s != nil && s.pool != nil {
				ready(s)
			}
			time.Sleep(200 * time.Millisecond) // what the last one left settles
			b.StartTimer()
			var d time.Duration
			if way == "docker-run" {
				d = dockerRun()
			} else {
				d = first(way)
			}
			took[way] = append(took[way], d)
		}
	}
	b.StopTimer()
	med := map[string]float64{}
	for _, way := range ways {
		s := slices.Clone(took[way])
		slices.Sort(s)
		med[way] = float64(s[len(s)/2]) / 1e6
		b.ReportMetric(med[way], way+"-ms")
	}
	b.ReportMetric(med["warm"]/med["docker-run"], "warm/docker-run")
	b.ReportMetric(med["warm-refilling"]/med["docker-run"], "warm-refilling/docker-run")
	b.ReportMetric(med["cold"]/med["docker-run"], "cold/docker-run")
	b.ReportMetric(med["warm"]/med["cold"], "warm/cold")
	b.ReportMetric(0, "ns/op")
}
