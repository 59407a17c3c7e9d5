package tools

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/egress"
	"github.com/corralhq/corral/internal/testenv"
	"github.com/corralhq/corral/sandbox"
)

// The download server of the benchmark: a container on Docker's default
// bridge that answers every request for /big with size zero bytes (sendfile)
// and /small with two on port 8080, and sends size bytes to every connection
// on port 8081 (a stream in a tunnel, as TLS would be).
const benchServer = `import socket, os, threading
size = int(os.environ["SIZE"])
with open("/tmp/big", "wb") as f:
    f.truncate(size)
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 8080)); s.listen(256)
def serve(c):
    try:
        while True:
            req = b""
            while b"\r\n\r\n" not in req:
                d = c.recv(65536)
                if not d: return
                req += d
            small = b" /small" in req.split(b"\r\n")[0]
            n = 2 if small else size
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % n)
            if small:
                c.sendall(b"ok")
            else:
                with open("/tmp/big", "rb") as f:
                    c.sendfile(f)
    except OSError:
        pass
    finally:
        c.close()
def stream():
    r = socket.socket(); r.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    r.bind(("0.0.0.0", 8081)); r.listen(64)
    while True:
        c, _ = r.accept()
        def send(c=c):
            try:
                with open("/tmp/big", "rb") as f:
                    c.sendfile(f)
            except OSError:
                pass
            c.close()
        threading.Thread(target=send, daemon=True).start()
threading.Thread(target=stream, daemon=True).start()
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
`

// streamClient reads port 8081's stream to its end, directly or through a
// CONNECT tunnel, and prints MB/s.
const streamClient = `import socket, sys, time
host, direct = sys.argv[1], sys.argv[2] == "direct"
t = time.monotonic()
if direct:
    s = socket.create_connection((host, 8081))
else:
    s = socket.create_connection(("127.0.0.1", 3128))
    s.sendall(b"CONNECT %s:8081 HTTP/1.1\r\nHost: %s:8081\r\n\r\n" % (host.encode(), host.encode()))
    head = b""
    while b"\r\n\r\n" not in head:
        head += s.recv(1)
    assert head.startswith(b"HTTP/1.1 200"), head
buf = bytearray(1 << 20)
n = 0
while True:
    k = s.recv_into(buf)
    if not k:
        break
    n += k
print(n / 1e6 / (time.monotonic() - t))
`

// startBenchServer runs the server container and returns its address on the
// bridge.
func startBenchServer(b *testing.B, size int) string {
	b.Helper()
	dir := b.TempDir()
	script := filepath.Join(dir, "srv.py")
	if err := os.WriteFile(script, []byte(benchServer), 0o644); err != nil {
		b.Fatal(err)
	}
	out, err := exec.Command("docker", "run", "-d", "--rm", "--network", "bridge", "--label", "corral.test=egress-bench",
		"-e", "SIZE="+strconv.Itoa(size), "-v", script+":/srv.py:ro", testenv.Image, "python3", "/srv.py").Output()
	if err != nil {
		b.Fatalf("starting the download server: %v", err)
	}
	id := strings.TrimSpace(string(out))
	b.Cleanup(func() { exec.Command("docker", "rm", "-f", id).Run() })
	out, err = exec.Command("docker", "inspect", "-f", "{{.NetworkSettings.IPAddress}}", id).Output()
	if err != nil {
		b.Fatal(err)
	}
	addr := strings.TrimSpace(string(out)) + ":8080"
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/small")
		if err == nil {
			resp.Body.Close()
			return addr
		}
		if time.Now().After(deadline) {
			b.Fatalf("the download server does not answer: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// startLocalServer serves size zero bytes at /big on the host's loopback,
// where the proxy's dial is cheap, and returns its port.
func startLocalServer(b *testing.B, size int) string {
	zeros := make([]byte, 1<<20)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(size))
		for left := size; left > 0; left -= len(zeros) {
			if _, err := w.Write(zeros[:min(left, len(zeros))]); err != nil {
				return
			}
		}
	}))
	b.Cleanup(srv.Close)
	_, port, _ := strings.Cut(srv.Listener.Addr().String(), ":")
	return port
}

// benchSession is a session whose sandbox is on the bridge, or behind proxy.
func benchSession(b *testing.B, proxy sandbox.Egress) (*Session, string) {
	b.Helper()
	var box *sandbox.Container
	s, ws := newTestSession(b, nil, func(o *Options) {
		o.Policy = allowAll{}
		cfg := sandbox.Config{Workspace: o.Workspace, Image: testenv.Image, Agent: testenv.Agent(b), Memory: 512 << 20}
		if proxy != nil {
			cfg.Egress = proxy
		} else {
			cfg.Network = "bridge"
		}
		var err error
		if box, err = sandbox.New(cfg); err != nil {
			b.Fatal(err)
		}
		o.Sandbox = box
	})
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		box.Close(ctx)
	})
	return s, ws
}

// benchOutput runs a command and returns its output's last lines.
func benchOutput(b *testing.B, s *Session, command string) []string {
	b.Helper()
	r, err := s.Bash(context.Background(), BashParams{Command: command, Timeout: 600})
	if err != nil {
		b.Fatal(err)
	}
	d := r.Details.(*BashDetails)
	if !d.Ran || d.ExitCode != 0 {
		b.Fatalf("%s:\n%s", command, r.Content)
	}
	_, body := splitResult(r)
	return strings.Fields(body)
}

func medianOf(vs []float64) float64 {
	sort.Float64s(vs)
	return vs[len(vs)/2]
}

// speed is curl's download speed of url in MB/s, the best of runs.
func speed(b *testing.B, s *Session, curlFlags, url string, runs int) float64 {
	var best float64
	for range runs {
		f := benchOutput(b, s, fmt.Sprintf("curl -sS %s -o /dev/null -w '%%{speed_download}\\n' %s", curlFlags, url))
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			b.Fatal(err)
		}
		best = max(best, v/1e6)
	}
	return best
}

// latency is the median time of a small request, in ms, over n requests.
func latency(b *testing.B, s *Session, url string, n int) float64 {
	f := benchOutput(b, s, fmt.Sprintf("for i in $(seq %d); do curl -sS -o /dev/null -w '%%{time_total}\\n' %s; done", n, url))
	var ms []float64
	for _, x := range f {
		if v, err := strconv.ParseFloat(x, 64); err == nil {
			ms = append(ms, v*1000)
		}
	}
	return medianOf(ms)
}

// heap is the Go heap and stacks in use, in MiB, after a collection.
func heap() float64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return float64(m.HeapInuse+m.StackInuse) / (1 << 20)
}

// BenchmarkEgress measures --network allow against --network bridge in one
// run: the throughput of a large download from a container on the bridge
// (plain HTTP forwarded by the proxy, and the same through a CONNECT tunnel),
// the latency a request gains (p50 of 30), and the proxy's memory with 100
// tunnels open. The host's own download from the server is reported too: the
// proxy's traffic makes that hop. CORRAL_BENCH_EGRESS_MB sizes the download
// (256 by default).
func BenchmarkEgress(b *testing.B) {
	testenv.NeedsDocker(b)
	mb := 256
	if v, err := strconv.Atoi(os.Getenv("CORRAL_BENCH_EGRESS_MB")); err == nil && v > 0 {
		mb = v
	}
	addr := startBenchServer(b, mb<<20)
	ip, _, _ := strings.Cut(addr, ":")
	local := startLocalServer(b, mb<<20)
	proxy, err := egress.New(egress.Config{
		Allow: []string{"big.test:8080", "big.test:8081", "local.test:*"},
		Hosts: []string{"big.test:" + ip, "local.test:127.0.0.1"},
	})
	if err != nil {
		b.Fatal(err)
	}
	defer proxy.Close()
	bridge, bws := benchSession(b, nil)
	allow, ws := benchSession(b, proxy)
	for _, dir := range []string{bws, ws} {
		if err := os.WriteFile(filepath.Join(dir, "stream.py"), []byte(streamClient), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	stream := func(s *Session, args string) float64 {
		var best float64
		for range 2 {
			f := benchOutput(b, s, "python3 stream.py "+args)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			if err != nil {
				b.Fatal(err)
			}
			best = max(best, v)
		}
		return best
	}
	big := "http://" + addr + "/big"
	for range b.N {
		start := time.Now()
		resp, err := http.Get(big)
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		host := float64(n) / 1e6 / time.Since(start).Seconds()

		bridgeMBs := speed(b, bridge, "", big, 2)
		forwardMBs := speed(b, allow, "", "http://big.test:8080/big", 2)
		localMBs := speed(b, allow, "", "http://local.test:"+local+"/big", 2)
		bridgeStream := stream(bridge, ip+" direct")
		tunnelMBs := stream(allow, "big.test tunnel")
		b.ReportMetric(bridgeMBs, "bridge-MB/s")
		b.ReportMetric(forwardMBs, "proxy-MB/s")
		b.ReportMetric(bridgeStream, "bridge-stream-MB/s")
		b.ReportMetric(tunnelMBs, "tunnel-MB/s")
		b.ReportMetric(host, "host-MB/s")
		b.ReportMetric(localMBs, "proxy-local-MB/s")
		b.ReportMetric(forwardMBs/bridgeMBs, "proxy/bridge")
		b.ReportMetric(localMBs/bridgeMBs, "proxy-local/bridge")
		b.ReportMetric(tunnelMBs/bridgeStream, "tunnel/bridge")

		lb := latency(b, bridge, "http://"+addr+"/small", 30)
		la := latency(b, allow, "http://big.test:8080/small", 30)
		b.ReportMetric(lb, "bridge-p50-ms")
		b.ReportMetric(la, "proxy-p50-ms")
		b.ReportMetric(la-lb, "added-p50-ms")

		// 100 tunnels held open at once by one script in the sandbox.
		before := heap()
		hold := `import socket, time
socks = []
for i in range(100):
    s = socket.create_connection(("127.0.0.1", 3128))
    s.sendall(b"CONNECT big.test:8081 HTTP/1.1\r\nHost: big.test:8080\r\n\r\n")
    assert s.recv(1024).startswith(b"HTTP/1.1 200")
    socks.append(s)
open("opened", "w").close()
for _ in range(600):
    if os.path.exists("release"):
        break
    time.sleep(0.1)
`
		os.Remove(filepath.Join(ws, "opened"))
		os.Remove(filepath.Join(ws, "release"))
		if err := os.WriteFile(filepath.Join(ws, "hold.py"), []byte("import os\n"+hold), 0o644); err != nil {
			b.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			_, err := allow.Bash(context.Background(), BashParams{Command: "python3 hold.py", Timeout: 120})
			done <- err
		}()
		for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
			if _, err := os.Stat(filepath.Join(ws, "opened")); err == nil {
				break
			}
			if time.Now().After(deadline) {
				b.Fatal("the 100 tunnels did not open")
			}
		}
		during := heap()
		os.WriteFile(filepath.Join(ws, "release"), nil, 0o644)
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(during-before, "100-tunnels-MiB")
	}
}
