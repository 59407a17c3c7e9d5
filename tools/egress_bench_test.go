package tools

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
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
	"github.com/corralhq/corral/sandbox/docker"
)

// The download server of the benchmark: a container on Docker's default
// bridge that answers every request for /big with size zero bytes (sendfile;
// /big?N with N of them) and /small with two on port 8080, and sends size
// bytes to every connection on port 8081 (a stream in a tunnel, as TLS would
// be).
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
            target = req.split(b"\r\n")[0].split(b" ")[1]
            small = target == b"/small"
            n = 2 if small else int(target.partition(b"?")[2] or size)
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % n)
            if small:
                c.sendall(b"ok")
            else:
                with open("/tmp/big", "rb") as f:
                    c.sendfile(f, 0, n)
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
target, direct = sys.argv[1], sys.argv[2] == "direct"
t = time.monotonic()
if direct:
    host, port = target.rsplit(":", 1)
    s = socket.create_connection((host, int(port)))
else:
    s = socket.create_connection(("127.0.0.1", 3128))
    s.sendall(b"CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target.encode(), target.encode()))
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
// bridge, and the bridge's gateway (the host's address there).
func startBenchServer(b *testing.B, size int) (string, string) {
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
	out, err = exec.Command("docker", "inspect", "-f", "{{.NetworkSettings.IPAddress}} {{.NetworkSettings.Gateway}}", id).Output()
	if err != nil {
		b.Fatal(err)
	}
	ip, gateway, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	addr := ip + ":8080"
	testenv.WaitFor(b, 30*time.Second, "the download server to answer", func() bool {
		resp, err := http.Get("http://" + addr + "/small")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return true
	})
	return addr, gateway
}

// startRelay relays every connection to a port of the host's on the bridge's
// gateway address to addr, as any proxy on the host would at the least (the
// kernel splices): the bound of what a proxy on the host can do, measured
// beside it. It returns the relay's address.
func startRelay(b *testing.B, gateway, addr string) string {
	l, err := net.Listen("tcp", net.JoinHostPort(gateway, "0"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				up, err := net.Dial("tcp", addr)
				if err != nil {
					return
				}
				defer up.Close()
				go func() {
					io.Copy(up, c)
					up.(*net.TCPConn).CloseWrite()
				}()
				io.Copy(c, up)
			}()
		}
	}()
	return l.Addr().String()
}

// benchSession is a session whose sandbox is on the bridge, or behind proxy
// (over the agent's stream when stream is set).
func benchSession(b *testing.B, proxy sandbox.Egress, stream bool, runtime string) (*Session, string) {
	b.Helper()
	var box *docker.Container
	s, ws := newTestSession(b, nil, func(o *Options) {
		o.Policy = allowAll{}
		cfg := sandbox.Config{Workspace: o.Workspace, Image: testenv.Image, Agent: testenv.Agent(b), Memory: 512 << 20, Runtime: runtime}
		if runtime == "runsc" && os.Getuid() == 0 {
			// gVisor before 2023 has no ambient capabilities: commands
			// could not write a workspace of root's.
			if err := os.Chown(o.Workspace, 65532, 65532); err != nil {
				b.Fatal(err)
			}
		}
		if proxy != nil {
			cfg.Egress, cfg.EgressStream = proxy, stream
		} else {
			cfg.Network = "bridge"
		}
		var err error
		if box, err = docker.New(cfg); err != nil {
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

// speed is curl's download speed of url in MB/s.
func speed(b *testing.B, s *Session, url string) float64 {
	f := benchOutput(b, s, fmt.Sprintf("curl -sS -o /dev/null -w '%%{speed_download}\\n' %s", url))
	v, err := strconv.ParseFloat(f[len(f)-1], 64)
	if err != nil {
		b.Fatal(err)
	}
	return v / 1e6
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
// run, the two taking turns so that the machine's load falls on both alike:
// the best throughput of each over the rounds for a large download from a
// container on the bridge, plain HTTP forwarded by the proxy and a stream
// through a CONNECT tunnel (as TLS would be); beside them the same download
// through the least a proxy on the host does (a plain relay, the kernel
// splicing: the bound of any design that relays); the same through the agent's
// stream (the path where the socket cannot be mounted: Kubernetes, gVisor
// without --host-uds), on a smaller download; the latency a request gains
// (p50 of 30); and the host's memory with 100 tunnels open.
// CORRAL_BENCH_EGRESS_MB sizes the download (1024 by default),
// CORRAL_BENCH_EGRESS_ROUNDS the rounds (3).
func BenchmarkEgress(b *testing.B) {
	testenv.NeedsDocker(b)
	mb, rounds := 1024, 3
	if v, err := strconv.Atoi(os.Getenv("CORRAL_BENCH_EGRESS_MB")); err == nil && v > 0 {
		mb = v
	}
	if v, err := strconv.Atoi(os.Getenv("CORRAL_BENCH_EGRESS_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	addr, gateway := startBenchServer(b, mb<<20)
	ip, _, _ := strings.Cut(addr, ":")
	proxy, err := egress.New(egress.Config{
		Allow: []string{"big.test:8080", "big.test:8081"},
		Hosts: []string{"big.test:" + ip},
	})
	if err != nil {
		b.Fatal(err)
	}
	defer proxy.Close()
	bridge, bws := benchSession(b, nil, false, "")
	allow, ws := benchSession(b, proxy, false, "")
	relayed, rws := benchSession(b, proxy, true, "")
	for _, dir := range []string{bws, ws, rws} {
		if err := os.WriteFile(filepath.Join(dir, "stream.py"), []byte(streamClient), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	relay := startRelay(b, gateway, addr)
	streamRelay := startRelay(b, gateway, ip+":8081")
	stream := func(s *Session, args string) float64 {
		f := benchOutput(b, s, "python3 stream.py "+args)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			b.Fatal(err)
		}
		return v
	}
	for range b.N {
		var bridgeMBs, relayMBs, proxyMBs, bridgeStream, relayStream, tunnelMBs float64
		for range rounds {
			bridgeMBs = max(bridgeMBs, speed(b, bridge, "http://"+addr+"/big"))
			relayMBs = max(relayMBs, speed(b, bridge, "http://"+relay+"/big"))
			proxyMBs = max(proxyMBs, speed(b, allow, "http://big.test:8080/big"))
			bridgeStream = max(bridgeStream, stream(bridge, ip+":8081 direct"))
			relayStream = max(relayStream, stream(bridge, streamRelay+" direct"))
			tunnelMBs = max(tunnelMBs, stream(allow, "big.test:8081 tunnel"))
		}
		b.ReportMetric(bridgeMBs, "bridge-MB/s")
		b.ReportMetric(proxyMBs, "proxy-MB/s")
		b.ReportMetric(bridgeStream, "bridge-stream-MB/s")
		b.ReportMetric(tunnelMBs, "tunnel-MB/s")
		b.ReportMetric(relayMBs, "host-relay-MB/s")
		b.ReportMetric(proxyMBs/bridgeMBs, "proxy/bridge")
		b.ReportMetric(relayMBs/bridgeMBs, "host-relay/bridge")
		b.ReportMetric(relayStream, "host-relay-stream-MB/s")
		b.ReportMetric(proxyMBs/relayMBs, "proxy/host-relay")
		b.ReportMetric(tunnelMBs/relayStream, "tunnel/host-relay")
		b.ReportMetric(tunnelMBs/bridgeStream, "tunnel/bridge")
		// The stream relay, on an eighth of the download: it is slow.
		small := fmt.Sprintf("http://big.test:8080/big?%d", mb<<17)
		relayedMBs := speed(b, relayed, small)
		b.ReportMetric(relayedMBs, "stream-relay-MB/s")
		b.ReportMetric(relayedMBs/bridgeMBs, "stream-relay/bridge")

		lb := latency(b, bridge, "http://"+addr+"/small", 30)
		la := latency(b, allow, "http://big.test:8080/small", 30)
		lr := latency(b, relayed, "http://big.test:8080/small", 30)
		b.ReportMetric(lb, "bridge-p50-ms")
		b.ReportMetric(la, "proxy-p50-ms")
		b.ReportMetric(la-lb, "added-p50-ms")
		b.ReportMetric(lr-lb, "stream-relay-added-p50-ms")
		b.ReportMetric(hundredTunnels(b, allow, ws), "100-tunnels-MiB")
		b.ReportMetric(hundredTunnels(b, relayed, rws), "stream-relay-100-tunnels-MiB")
	}
}

// hundredTunnels is the growth of the host's heap while a script in the
// sandbox holds 100 tunnels open at once.
func hundredTunnels(b *testing.B, s *Session, ws string) float64 {
	hold := `import os, socket, time
socks = []
for i in range(100):
    s = socket.create_connection(("127.0.0.1", 3128))
    s.sendall(b"CONNECT big.test:8081 HTTP/1.1\r\nHost: big.test:8081\r\n\r\n")
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
	if err := os.WriteFile(filepath.Join(ws, "hold.py"), []byte(hold), 0o644); err != nil {
		b.Fatal(err)
	}
	before := heap()
	done := make(chan error, 1)
	go func() {
		_, err := s.Bash(context.Background(), BashParams{Command: "python3 hold.py", Timeout: 120})
		done <- err
	}()
	testenv.WaitFor(b, 2*time.Minute, "the 100 tunnels to open", func() bool {
		_, err := os.Stat(filepath.Join(ws, "opened"))
		return err == nil
	})
	during := heap()
	os.WriteFile(filepath.Join(ws, "release"), nil, 0o644)
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	return during - before
}

// BenchmarkEgressGVisor measures --network allow under gVisor, which cannot
// run a sandbox on the bridge here (runsc is registered with
// --network=none): the download through the socket (frames, with runsc's
// --host-uds=open) against the same through the agent's stream, taking turns.
func BenchmarkEgressGVisor(b *testing.B) {
	testenv.NeedsDocker(b)
	out, _ := exec.Command("docker", "info", "--format", "{{json .Runtimes.runsc}}").Output()
	if !strings.Contains(string(out), "runsc") {
		b.Skip("runsc is not registered with the Docker engine")
	}
	mb, rounds := 256, 2
	if v, err := strconv.Atoi(os.Getenv("CORRAL_BENCH_EGRESS_MB")); err == nil && v > 0 {
		mb = v / 4
	}
	addr, _ := startBenchServer(b, mb<<20)
	ip, _, _ := strings.Cut(addr, ":")
	proxy, err := egress.New(egress.Config{Allow: []string{"big.test:8080"}, Hosts: []string{"big.test:" + ip}})
	if err != nil {
		b.Fatal(err)
	}
	defer proxy.Close()
	socket, _ := benchSession(b, proxy, false, "runsc")
	relayed, _ := benchSession(b, proxy, true, "runsc")
	for range b.N {
		var socketMBs, relayedMBs float64
		for range rounds {
			socketMBs = max(socketMBs, speed(b, socket, "http://big.test:8080/big"))
			relayedMBs = max(relayedMBs, speed(b, relayed, "http://big.test:8080/big"))
		}
		b.ReportMetric(socketMBs, "socket-MB/s")
		b.ReportMetric(relayedMBs, "stream-relay-MB/s")
		b.ReportMetric(socketMBs/relayedMBs, "socket/stream-relay")
		b.ReportMetric(latency(b, socket, "http://big.test:8080/small", 30), "socket-p50-ms")
		b.ReportMetric(latency(b, relayed, "http://big.test:8080/small", 30), "stream-relay-p50-ms")
	}
}
