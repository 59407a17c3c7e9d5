package docker

import (
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/system"

	"github.com/corralhq/corral/sandbox/proto"
)

// countingEgress counts the connections handed to it and closes them.
type countingEgress struct{ n atomic.Int32 }

func (e *countingEgress) ServeHTTP(c net.Conn)  { e.n.Add(1); c.Close() }
func (e *countingEgress) ServeSOCKS(c net.Conn) { e.n.Add(1); c.Close() }

// agentSide connects to a new side socket as the agent would, and has the
// host serve it; addrs, when given, are the test's listeners that stand for
// the agent's.
func agentSide(t *testing.T, passFD bool, addrs map[byte]string) (*egressSide, *countingEgress, *net.UnixConn) {
	t.Helper()
	e := &countingEgress{}
	s, err := listenEgressSide(e, passFD, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	u, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: s.path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.Close() })
	if addrs != nil {
		s.addrs = addrs
	}
	if err := s.Serve(); err != nil {
		t.Fatal(err)
	}
	return s, e, u
}

// hostEnded reports whether the host closed the side connection.
func hostEnded(t *testing.T, u *net.UnixConn) bool {
	t.Helper()
	u.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := u.Read(make([]byte, 1))
	return err == io.EOF
}

// The socket takes one connection, the agent's, and is gone from the host's
// file system the moment it has it.
func TestEgressSideTakesOneConnection(t *testing.T) {
	s, _, _ := agentSide(t, true, nil)
	if _, err := os.Stat(s.dir); !os.IsNotExist(err) {
		t.Errorf("the socket's directory is still there: %v", err)
	}
	if c, err := net.Dial("unix", s.path); err == nil {
		c.Close()
		t.Error("a second connection to the socket was taken")
	}
}

// What a broken or hostile agent may send over the side connection: the host
// takes none of it, and ends the side connection (the agent falls back to
// its stream).
func TestEgressSideRefusesWhatItDoesNotTake(t *testing.T) {
	// The test's listener stands for the agent's HTTP listener.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	other, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	accepted := func(t *testing.T, l net.Listener) int {
		d, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		a, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		f, err := a.(*net.TCPConn).File()
		a.Close()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return int(f.Fd())
	}
	tcp := func(t *testing.T) int { return accepted(t, l) }
	pipe := func(t *testing.T) int {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close(); w.Close() })
		return int(r.Fd())
	}
	for _, tc := range []struct {
		name string
		send func(t *testing.T, u *net.UnixConn) error
	}{
		{"a pipe", func(t *testing.T, u *net.UnixConn) error {
			_, _, err := u.WriteMsgUnix([]byte{proto.NetSocketHTTP}, syscall.UnixRights(pipe(t)), nil)
			return err
		}},
		{"a connection no listener accepted", func(t *testing.T, u *net.UnixConn) error {
			_, _, err := u.WriteMsgUnix([]byte{proto.NetSocketHTTP}, syscall.UnixRights(accepted(t, other)), nil)
			return err
		}},
		{"the other listener's connection", func(t *testing.T, u *net.UnixConn) error {
			_, _, err := u.WriteMsgUnix([]byte{proto.NetSocketSOCKS}, syscall.UnixRights(tcp(t)), nil)
			return err
		}},
		{"two descriptors", func(t *testing.T, u *net.UnixConn) error {
			_, _, err := u.WriteMsgUnix([]byte{proto.NetSocketHTTP}, syscall.UnixRights(tcp(t), tcp(t)), nil)
			return err
		}},
		{"no descriptor", func(t *testing.T, u *net.UnixConn) error {
			_, err := u.Write([]byte{proto.NetSocketHTTP})
			return err
		}},
		{"another listener's name", func(t *testing.T, u *net.UnixConn) error {
			_, _, err := u.WriteMsgUnix([]byte{'x'}, syscall.UnixRights(tcp(t)), nil)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, e, u := agentSide(t, true, map[byte]string{proto.NetSocketHTTP: l.Addr().String(), proto.NetSocketSOCKS: other.Addr().String()})
			if err := tc.send(t, u); err != nil {
				t.Fatal(err)
			}
			if !hostEnded(t, u) {
				t.Error("the host kept the side connection")
			}
			if n := e.n.Load(); n != 0 {
				t.Errorf("the proxy was handed %d connections", n)
			}
		})
	}
	t.Run("frames of another kind", func(t *testing.T) {
		_, e, u := agentSide(t, false, nil)
		if _, err := u.Write(proto.JSONFrame(proto.Exit, 1, proto.ExitMsg{})); err != nil {
			t.Fatal(err)
		}
		if !hostEnded(t, u) {
			t.Error("the host kept the side connection")
		}
		if n := e.n.Load(); n != 0 {
			t.Errorf("the proxy was handed %d connections", n)
		}
	})
	t.Run("a stream id of the host's", func(t *testing.T) {
		_, e, u := agentSide(t, false, nil)
		if _, err := u.Write(proto.JSONFrame(proto.NetOpen, 7, proto.NetOpenMsg{Listener: "http"})); err != nil {
			t.Fatal(err)
		}
		if !hostEnded(t, u) {
			t.Error("the host kept the side connection")
		}
		if n := e.n.Load(); n != 0 {
			t.Errorf("the proxy was handed %d connections", n)
		}
	})
}

// A descriptor a listener's connection has, with the byte that names that
// listener, reaches the proxy; the side connection goes on.
func TestEgressSideDescriptors(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, e, u := agentSide(t, true, map[byte]string{proto.NetSocketHTTP: l.Addr().String(), proto.NetSocketSOCKS: l.Addr().String()})
	for i, kind := range []byte{proto.NetSocketHTTP, proto.NetSocketSOCKS} {
		d, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		a, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		f, _ := a.(*net.TCPConn).File()
		a.Close()
		if _, _, err := u.WriteMsgUnix([]byte{kind}, syscall.UnixRights(int(f.Fd())), nil); err != nil {
			t.Fatal(err)
		}
		f.Close()
		// The proxy closes what it is handed: the command's end sees it.
		d.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := d.Read(make([]byte, 1)); err != io.EOF {
			t.Fatalf("connection %d: %v", i, err)
		}
	}
	if n := e.n.Load(); n != 2 {
		t.Errorf("the proxy was handed %d connections", n)
	}
}

// Frames on the side connection reach the proxy as the stream's would.
func TestEgressSideFrames(t *testing.T) {
	_, e, u := agentSide(t, false, nil)
	if _, err := u.Write(proto.JSONFrame(proto.NetOpen, proto.NetStreamBit|1, proto.NetOpenMsg{Listener: "socks"})); err != nil {
		t.Fatal(err)
	}
	// The proxy closes it: the host says so.
	u.SetReadDeadline(time.Now().Add(5 * time.Second))
	f, err := proto.NewReader(u).Next()
	if err != nil || f.Type != proto.NetEnd || f.Stream != proto.NetStreamBit|1 {
		t.Fatalf("frame %+v, %v", f, err)
	}
	if n := e.n.Load(); n != 1 {
		t.Errorf("the proxy was handed %d connections", n)
	}
}

// Which runtimes get the socket, and which hand descriptors over it.
func TestSocketEgress(t *testing.T) {
	info := &system.Info{
		DefaultRuntime: "runc",
		Runtimes: map[string]system.RuntimeWithStatus{
			"runc":      {Runtime: system.Runtime{Path: "runc"}},
			"runsc":     {Runtime: system.Runtime{Path: "/usr/bin/runsc", Args: []string{"--network=none", "--platform=ptrace"}}},
			"runsc-uds": {Runtime: system.Runtime{Path: "/usr/bin/runsc", Args: []string{"--host-uds=open", "--network=none"}}},
			"runsc-all": {Runtime: system.Runtime{Path: "/usr/bin/runsc", Args: []string{"--host-uds", "all"}}},
			"runsc-old": {Runtime: system.Runtime{Path: "/usr/bin/runsc", Args: []string{"-fsgofer-host-uds"}}},
			"runsc-cr":  {Runtime: system.Runtime{Path: "/usr/bin/runsc", Args: []string{"--host-uds=create"}}},
			"kata":      {Runtime: system.Runtime{Path: "/usr/bin/kata-runtime"}},
			"crun":      {Runtime: system.Runtime{Path: filepath.Join("/usr/local/bin", "crun")}},
		},
	}
	for name, want := range map[string][2]bool{
		"": {true, true}, "runc": {true, true}, "crun": {true, true},
		"runsc": {false, false}, "runsc-uds": {true, false}, "runsc-all": {true, false},
		"runsc-old": {true, false}, "runsc-cr": {false, false}, "kata": {false, false},
	} {
		ok, passFD := socketEgress(info, name)
		if ok != want[0] || passFD != want[1] {
			t.Errorf("runtime %q: socket %v, descriptors %v; want %v", name, ok, passFD, want)
		}
	}
	desktop := *info
	desktop.OperatingSystem = "Docker Desktop"
	if ok, _ := socketEgress(&desktop, ""); ok {
		t.Error("Docker Desktop's engine, on another machine, got the socket")
	}
}
