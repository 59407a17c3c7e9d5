package docker

import (
	"bufio"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/system"

	"github.com/corralhq/corral/sandbox"
	"github.com/corralhq/corral/sandbox/internal/netrelay"
	"github.com/corralhq/corral/sandbox/proto"
)

// The egress socket inside a container, in a tmpfs of its own that only root
// (the agent) may enter: commands, which never run as root, cannot even see
// it before the host stops listening.
const (
	egressSocketDir  = "/.corral/net"
	egressSocketPath = egressSocketDir + "/egress.sock"
)

// sideAcceptTimeout bounds the wait for the agent's connection once it said
// it made it.
const sideAcceptTimeout = 10 * time.Second

// egressSide is the second data path of one container's egress: a Unix socket
// on the host, bind-mounted into the container, to which the agent makes one
// connection while it opens its listeners, before any command runs. The host
// then stops listening and removes the socket, so nothing else in the
// container can ever connect to it. Over that connection the agent hands
// over the descriptor of each connection a command makes to its listeners
// (runc: the host's proxy then speaks to the command's socket itself), or,
// where it cannot (gVisor), relays them in the frames the attach stream would
// carry. Either way the attach stream carries none of their bytes.
type egressSide struct {
	egress sandbox.Egress
	passFD bool // the agent hands descriptors over, else frames
	log    *slog.Logger
	dir    string // a private directory of the host's, holding the socket
	path   string // the socket on the host
	ln     *net.UnixListener
	got    chan *net.UnixConn // the agent's connection; cap 1
	// addrs are the local addresses of the connections each listener
	// accepts, by the byte that names it.
	addrs map[byte]string

	wmu sync.Mutex // guards writes to u

	mu     sync.Mutex // guards u, conns and closed
	u      *net.UnixConn
	nets   *netrelay.Table       // the frames' connections; nil under passFD
	conns  map[net.Conn]struct{} // connections handed over, being served
	closed bool
}

// listenEgressSide listens on a new Unix socket in a private temporary
// directory, for one connection.
func listenEgressSide(e sandbox.Egress, passFD bool, log *slog.Logger) (*egressSide, error) {
	dir, err := os.MkdirTemp("", "corral-net-")
	if err != nil {
		return nil, fmt.Errorf("sandbox: egress socket: %w", err)
	}
	path := filepath.Join(dir, "egress.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err == nil {
		// The agent is root in the container but has no capability to
		// override permissions; the directory keeps everyone else of the
		// host out.
		err = os.Chmod(path, 0o666)
	}
	if err != nil {
		if ln != nil {
			ln.Close()
		}
		os.RemoveAll(dir)
		return nil, fmt.Errorf("sandbox: egress socket: %w", err)
	}
	s := &egressSide{
		egress: e, passFD: passFD, log: log, dir: dir, path: path, ln: ln,
		got:   make(chan *net.UnixConn, 1),
		addrs: map[byte]string{proto.NetSocketHTTP: sandbox.EgressHTTPAddr, proto.NetSocketSOCKS: sandbox.EgressSOCKSAddr},
		conns: map[net.Conn]struct{}{},
	}
	go s.acceptOne()
	return s, nil
}

// mounts are the container's mounts of the socket: a root-only tmpfs and the
// socket in it.
func (s *egressSide) mounts() []mount.Mount {
	return []mount.Mount{
		{Type: mount.TypeTmpfs, Target: egressSocketDir, TmpfsOptions: &mount.TmpfsOptions{SizeBytes: 64 << 10, Mode: 0o700}},
		{Type: mount.TypeBind, Source: s.path, Target: egressSocketPath, ReadOnly: true},
	}
}

// egressSide opens the socket of a new container's egress where the runtime
// can mount it (see socketEgress); nil for the stream relay.
func (c *Container) egressSide(info *system.Info) (*egressSide, error) {
	if c.cfg.Egress == nil || c.cfg.EgressStream {
		return nil, nil
	}
	ok, passFD := socketEgress(info, c.cfg.Runtime)
	if !ok {
		return nil, nil
	}
	return listenEgressSide(c.cfg.Egress, passFD, c.log)
}

// acceptOne takes the first connection, and stops listening.
func (s *egressSide) acceptOne() {
	u, err := s.ln.AcceptUnix()
	s.ln.Close()
	os.RemoveAll(s.dir)
	if err == nil {
		s.got <- u
	}
}

// Path is where the agent finds the socket inside the container.
func (s *egressSide) Path() string { return egressSocketPath }

// PassFD says the agent hands descriptors over, else frames.
func (s *egressSide) PassFD() bool { return s.passFD }

// Serve waits for the agent's connection and serves it: descriptors under
// passFD, else frames. It returns at once; Close ends it.
func (s *egressSide) Serve() error {
	var u *net.UnixConn
	select {
	case u = <-s.got:
	case <-time.After(sideAcceptTimeout):
		return fmt.Errorf("no connection within %v", sideAcceptTimeout)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		u.Close()
		return sandbox.ErrClosed
	}
	s.u = u
	if !s.passFD {
		s.nets = netrelay.NewSizedTable(s.send, sandbox.MaxRelayed, netrelay.WideSizes)
	}
	s.mu.Unlock()
	if s.passFD {
		go s.readFDs(u)
	} else {
		go s.readFrames(u)
	}
	return nil
}

// send writes one frame to the agent.
func (s *egressSide) send(b []byte) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	_, err := s.u.Write(b)
	return err
}

// readFDs takes the descriptor of each connection the agent hands over and
// serves it. Nothing the sandbox sends is trusted: a message must be one
// byte that names a listener, with exactly one descriptor, a TCP socket that
// listener accepted; anything else ends the side connection (the agent then
// relays over its stream).
func (s *egressSide) readFDs(u *net.UnixConn) {
	defer s.Close()
	var b [1]byte
	oob := make([]byte, syscall.CmsgSpace(4*4))
	for {
		n, oobn, _, _, err := u.ReadMsgUnix(b[:], oob)
		fds := receivedFDs(oob[:oobn])
		if err != nil || n != 1 || len(fds) != 1 {
			closeFDs(fds)
			return
		}
		addr, ok := s.addrs[b[0]]
		c := tcpConn(fds[0])
		if !ok || c == nil || c.LocalAddr().String() != addr {
			if c != nil {
				c.Close()
			}
			s.log.Warn("sandbox agent sent a connection the egress socket does not take: relaying egress over its stream")
			return
		}
		go s.serveConn(c, b[0] == proto.NetSocketSOCKS)
	}
}

// readFrames dispatches the agent's frames of relayed connections until the
// side connection ends; a frame of another kind ends it.
func (s *egressSide) readFrames(u *net.UnixConn) {
	defer s.Close()
	fr := proto.NewReader(bufio.NewReaderSize(u, 64<<10))
	for {
		f, err := fr.Next()
		if err != nil {
			return
		}
		if f.Type == proto.NetOpen {
			var m proto.NetOpenMsg
			if json.Unmarshal(f.Payload, &m) != nil || f.Stream&proto.NetStreamBit == 0 || (m.Listener != "http" && m.Listener != "socks") {
				return
			}
			c, ok := s.nets.Open(f.Stream, netrelay.Addr("egress socket"), netrelay.Addr("sandbox "+m.Listener))
			if !ok {
				go func() { _ = s.send(proto.NetEndFrame(f.Stream, true)) }()
				continue
			}
			go func() {
				defer s.nets.Forget(c)
				s.serveConn(c, m.Listener == "socks")
			}()
			continue
		}
		if ok, err := s.nets.Dispatch(f); !ok || err != nil {
			if err != nil {
				s.log.Warn("egress socket", "err", err)
			}
			return
		}
	}
}

// serveConn hands one connection to the proxy until it ends.
func (s *egressSide) serveConn(c net.Conn, socks bool) {
	s.mu.Lock()
	if s.closed || len(s.conns) >= sandbox.MaxRelayed {
		s.mu.Unlock()
		c.Close()
		return
	}
	s.conns[c] = struct{}{}
	s.mu.Unlock()
	if socks {
		s.egress.ServeSOCKS(c)
	} else {
		s.egress.ServeHTTP(c)
	}
	c.Close()
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// receivedFDs returns the descriptors of SCM_RIGHTS messages in oob.
func receivedFDs(oob []byte) []int {
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var fds []int
	for i := range msgs {
		if got, err := syscall.ParseUnixRights(&msgs[i]); err == nil {
			fds = append(fds, got...)
		}
	}
	return fds
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		syscall.Close(fd)
	}
}

// tcpConn takes over fd when it is a TCP socket, and closes it.
func tcpConn(fd int) net.Conn {
	f := os.NewFile(uintptr(fd), "egress")
	defer f.Close()
	c, err := net.FileConn(f)
	if err != nil {
		return nil
	}
	if _, ok := c.(*net.TCPConn); !ok {
		c.Close()
		return nil
	}
	return c
}

// Close stops listening and ends the side connection and every connection
// it brought.
func (s *egressSide) Close() {
	s.ln.Close()
	os.RemoveAll(s.dir)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	u, nets, conns := s.u, s.nets, s.conns
	s.conns = nil
	s.mu.Unlock()
	if u != nil {
		u.Close()
	}
	if nets != nil {
		nets.Fail()
	}
	for c := range conns {
		c.Close()
	}
	select {
	case u := <-s.got:
		u.Close()
	default:
	}
}

// socketEgress says whether the engine can give a container of runtime the
// egress socket, and whether the agent can hand descriptors over it: runc and
// its likes can (the container's sockets are the host kernel's); gVisor can
// only when it is allowed to open host sockets (runsc --host-uds=open or all;
// without it a container with the socket mounted does not even start), and
// never hands descriptors over; other runtimes, and engines on another
// machine than corral's (Docker Desktop), keep to the stream.
func socketEgress(info *system.Info, name string) (ok, passFD bool) {
	if runtime.GOOS != "linux" || info.OperatingSystem == "Docker Desktop" {
		return false, false
	}
	program, args := runtimeProgram(info, name)
	switch program {
	case "runc", "crun", "youki", "io.containerd.runc.v2":
		return true, true
	case "runsc":
		return hostUDS(args), false
	}
	return false, false
}

// runtimeProgram names the program of the engine's OCI runtime name (its
// default when empty), and its arguments.
func runtimeProgram(info *system.Info, name string) (string, []string) {
	if name == "" {
		name = info.DefaultRuntime
	}
	if name == "" {
		name = "runc"
	}
	rt, found := info.Runtimes[name]
	path := rt.Path
	if !found || path == "" {
		path = name
	}
	return filepath.Base(path), rt.Args
}

// hostUDS says whether runsc's arguments let a sandbox open host sockets.
func hostUDS(args []string) bool {
	ok := false
	for i, a := range args {
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !hasValue && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			value = args[i+1]
		}
		switch name {
		case "host-uds":
			ok = slices.Contains([]string{"open", "all"}, value)
		case "fsgofer-host-uds": // a boolean: only "=" gives it a value
			ok = !hasValue || value == "true"
		}
	}
	return ok
}
