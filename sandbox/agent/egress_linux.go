package agent

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/corralhq/corral/sandbox/internal/netrelay"
	"github.com/corralhq/corral/sandbox/proto"
)

// maxRelayed bounds the relayed connections at once; the host bounds them too.
const maxRelayed = 512

// socketDialTimeout bounds the connection to the host's Unix socket.
const socketDialTimeout = 5 * time.Second

// sideConn is the agent's one connection to the host's Unix socket: it carries
// the descriptors of connections (passFD), or their bytes in the frames the
// stream would carry (nets).
type sideConn struct {
	u      *net.UnixConn
	passFD bool
	nets   *netrelay.Table // frames' connections; nil under passFD

	wmu    sync.Mutex // guards writes to u
	broken atomic.Bool
}

// send writes one frame to the host, or one descriptor message.
func (s *sideConn) send(b []byte) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.broken.Load() {
		return net.ErrClosed
	}
	if _, err := s.u.Write(b); err != nil {
		s.fail()
		return err
	}
	return nil
}

// fail ends the side connection: later connections go over the stream.
func (s *sideConn) fail() {
	if s.broken.Swap(true) {
		return
	}
	s.u.Close()
	if s.nets != nil {
		s.nets.Fail()
	}
}

// read dispatches the host's frames of relayed connections until the side
// connection ends; anything else ends it.
func (s *sideConn) read() {
	defer s.fail()
	fr := proto.NewReader(bufio.NewReaderSize(s.u, 64<<10))
	for {
		f, err := fr.Next()
		if err != nil {
			return
		}
		if ok, err := s.nets.Dispatch(f); !ok || err != nil {
			return
		}
	}
}

// passFD sends kind and c's descriptor to the host.
func (s *sideConn) passConn(kind byte, c net.Conn) error {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return errors.New("not a socket")
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return err
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.broken.Load() {
		return net.ErrClosed
	}
	var werr error
	err = raw.Control(func(fd uintptr) {
		_, _, werr = s.u.WriteMsgUnix([]byte{kind}, syscall.UnixRights(int(fd)), nil)
	})
	return errors.Join(err, werr)
}

// netListen opens the loopback listeners the host asks for, connects to the
// host's Unix socket when it offers one, answers, and relays every connection
// a command makes to the listeners.
func (a *agent) netListen(p []byte) error {
	var m proto.NetListenMsg
	if err := json.Unmarshal(p, &m); err != nil {
		return fmt.Errorf("%w: net listen: %v", proto.ErrProtocol, err)
	}
	var reply proto.NetListenMsg
	var side *sideConn
	if m.Socket != "" {
		u, err := net.DialTimeout("unix", m.Socket, socketDialTimeout)
		if err != nil {
			reply.SocketError = err.Error()
		} else {
			side = &sideConn{u: u.(*net.UnixConn), passFD: m.PassFD}
			if !m.PassFD {
				side.nets = netrelay.NewSizedTable(side.send, maxRelayed, netrelay.WideSizes)
				go side.read()
			}
			go func() {
				<-a.done
				side.fail()
			}()
		}
	}
	var lns []net.Listener
	for _, l := range []struct {
		name string
		kind byte
		addr string
	}{{"http", proto.NetSocketHTTP, m.HTTP}, {"socks", proto.NetSocketSOCKS, m.SOCKS}} {
		if l.addr == "" {
			continue
		}
		ln, err := net.Listen("tcp", l.addr)
		if err != nil {
			reply.Error = err.Error()
			break
		}
		lns = append(lns, ln)
		go a.relay(ln, l.name, l.kind, side)
	}
	if reply.Error != "" {
		for _, ln := range lns {
			ln.Close()
		}
	}
	return a.send(proto.JSONFrame(proto.NetListen, 0, reply))
}

// relay accepts connections on ln until the agent ends, and relays each:
// through the side connection while it works, else over the stream.
func (a *agent) relay(ln net.Listener, name string, kind byte, side *sideConn) {
	go func() {
		<-a.done
		ln.Close()
	}()
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			a.log.Warn("egress listener", "listener", name, "err", err)
			continue
		}
		if side != nil && !side.broken.Load() {
			if side.passFD {
				err := side.passConn(kind, c)
				if err == nil {
					c.Close() // the host holds it now
					continue
				}
				a.log.Warn("egress socket: relaying over the stream", "err", err)
				side.fail()
			} else if a.relayOver(side.nets, side.send, c, name) {
				continue
			}
		}
		if !a.relayOver(a.nets, a.send, c, name) {
			c.Close() // too many at once, or the host is gone
		}
	}
}

// relayOver relays one connection in the frames of a table, and reports
// whether the table took it.
func (a *agent) relayOver(nets *netrelay.Table, send func([]byte) error, sock net.Conn, name string) bool {
	id := proto.NetStreamBit | a.netSeq.Add(1)&^proto.NetStreamBit
	c, ok := nets.Open(id, sock.LocalAddr(), sock.RemoteAddr())
	if !ok {
		return false
	}
	if err := send(proto.JSONFrame(proto.NetOpen, id, proto.NetOpenMsg{Listener: name})); err != nil {
		nets.Forget(c)
		return false
	}
	go func() {
		netrelay.Pump(sock, c)
		nets.Forget(c)
	}()
	return true
}
