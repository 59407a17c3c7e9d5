package docker

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/corralhq/corral/egress"
	"github.com/corralhq/corral/sandbox/internal/netrelay"
)

// pathRecorder is the real egress proxy, noting which data path brought each
// connection: "fd" (the command's own socket, handed over the side
// connection), "socket" (frames on the side connection) or "stream" (frames
// on the attach stream).
type pathRecorder struct {
	*egress.Proxy
	mu    sync.Mutex
	paths []string
}

func (r *pathRecorder) note(c net.Conn) {
	path := "stream"
	switch c := c.(type) {
	case *net.TCPConn:
		path = "fd"
	case *netrelay.Conn:
		if c.LocalAddr().String() == "egress socket" {
			path = "socket"
		}
	}
	r.mu.Lock()
	r.paths = append(r.paths, path)
	r.mu.Unlock()
}

func (r *pathRecorder) ServeHTTP(c net.Conn)  { r.note(c); r.Proxy.ServeHTTP(c) }
func (r *pathRecorder) ServeSOCKS(c net.Conn) { r.note(c); r.Proxy.ServeSOCKS(c) }

func (r *pathRecorder) seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.paths...)
}

// rawUpstream serves a line to every connection on the host's loopback, and
// returns its port: a stream that is neither TLS nor HTTP, as ssh's is.
func rawUpstream(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			fmt.Fprintln(c, "raw upstream says hi")
			c.Close()
		}
	}()
	return l.Addr().(*net.TCPAddr).Port
}

// proxyCommand is what git's ssh runs to connect: the ProxyCommand of
// GIT_SSH_COMMAND (the corral binary in the sandbox, as the command's user).
const proxyCommand = `eval "set -- $GIT_SSH_COMMAND"; pc=${3#ProxyCommand=}; ${pc%% %%h %%p} up.test %d </dev/null`

// reachSocket is what a hostile command tries: to reach the host through the
// egress socket itself, by every name it may have.
const reachSocket = `import os, socket
for p in ["/.corral/net/egress.sock", "/proc/1/root/.corral/net/egress.sock"]:
    try:
        s = socket.socket(socket.AF_UNIX)
        s.connect(p)
        s.sendall(b"h")
        print("REACHED", p)
    except OSError as e:
        print("refused", p, e)
try:
    print("LISTED", os.listdir("/.corral/net"))
except OSError as e:
    print("no listing:", e)
`

// The egress relay's data paths, each under runc and gVisor: commands reach
// an allowed host over HTTP and SOCKS, the path is the one the runtime
// allows (a descriptor handed over under runc, frames on the socket under
// gVisor with --host-uds, the attach stream where forced or where gVisor
// cannot open host sockets), and no command reaches the socket.
func TestEgressPaths(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "upstream says %s\n", r.URL.Path)
	}))
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	// A tunnel takes TLS, not plain HTTP.
	tlsSrv := httptest.NewTLSServer(srv.Config.Handler)
	defer tlsSrv.Close()
	tlsPort := tlsSrv.Listener.Addr().(*net.TCPAddr).Port
	raw := rawUpstream(t)
	for _, tc := range []struct {
		name, runtime string
		stream        bool
		// rootWorkspace leaves the workspace root's: commands then keep
		// CAP_DAC_OVERRIDE and may see the socket, never connect to it.
		rootWorkspace bool
		readOnlyRoot  bool
	}{
		{"runc", "", false, false, false},
		{"runc-root-workspace", "", false, true, false},
		{"runc-read-only-root", "", false, false, true},
		{"runc-stream", "", true, false, false},
		{"runsc", "runsc", false, false, false},
		{"runsc-stream", "runsc", true, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			need(t)
			if tc.runtime != "" && !hasRuntime(t, tc.runtime) {
				t.Skip(tc.runtime + " is not registered with the Docker engine")
			}
			proxy, err := egress.New(egress.Config{Allow: []string{"up.test:*"}, Hosts: []string{"up.test:127.0.0.1"}})
			if err != nil {
				t.Fatal(err)
			}
			defer proxy.Close()
			rec := &pathRecorder{Proxy: proxy}
			cfg := testConfig(t)
			cfg.Runtime, cfg.Egress, cfg.EgressStream, cfg.ReadOnlyRoot = tc.runtime, rec, tc.stream, tc.readOnlyRoot
			if !tc.rootWorkspace {
				gVisorWorkspace(t, cfg) // owned by commands' default user
			}
			c := newSandbox(t, cfg)
			want := "stream"
			if !tc.stream {
				api, _ := engine()
				info, err := api.Info(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				switch ok, passFD := socketEgress(&info, tc.runtime); {
				case ok && passFD:
					want = "fd"
				case ok:
					want = "socket"
				}
			}
			for _, cmd := range []string{
				fmt.Sprintf("curl -sS http://up.test:%d/plain", port),
				fmt.Sprintf("curl -sSk --proxy socks5h://127.0.0.1:1080 https://up.test:%d/socks", tlsPort),
			} {
				if out := sh(t, c, cmd); !strings.Contains(out, "upstream says /") {
					t.Errorf("%s: %q", cmd, out)
				}
			}
			paths := rec.seen()
			if len(paths) != 2 || paths[0] != want || paths[1] != want {
				t.Errorf("data paths %v, want %s for both", paths, want)
			}
			if out := sh(t, c, fmt.Sprintf(proxyCommand, raw)); out != "raw upstream says hi" {
				t.Errorf("ssh's ProxyCommand: %q", out)
			}
			if err := os.WriteFile(filepath.Join(cfg.Workspace, "reach.py"), []byte(reachSocket), 0o644); err != nil {
				t.Fatal(err)
			}
			out := sh(t, c, "python3 reach.py")
			t.Logf("the command's attempts:\n%s", out)
			if strings.Contains(out, "REACHED") || (!tc.rootWorkspace && strings.Contains(out, "LISTED")) {
				t.Errorf("a command reached the egress socket:\n%s", out)
			}
		})
	}
}
