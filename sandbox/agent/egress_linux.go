package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"

	"github.com/corralhq/corral/sandbox/internal/netrelay"
	"github.com/corralhq/corral/sandbox/proto"
)

// maxRelayed bounds the relayed connections at once; the host bounds them too.
const maxRelayed = 512

// netListen opens the loopback listeners the host asks for, answers, and
// relays every connection a command makes to them.
func (a *agent) netListen(p []byte) error {
	var m proto.NetListenMsg
	if err := json.Unmarshal(p, &m); err != nil {
		return fmt.Errorf("%w: net listen: %v", proto.ErrProtocol, err)
	}
	var reply proto.NetListenMsg
	var lns []net.Listener
	for _, l := range []struct{ name, addr string }{{"http", m.HTTP}, {"socks", m.SOCKS}} {
		if l.addr == "" {
			continue
		}
		ln, err := net.Listen("tcp", l.addr)
		if err != nil {
			reply.Error = err.Error()
			break
		}
		lns = append(lns, ln)
		go a.relay(ln, l.name)
	}
	if reply.Error != "" {
		for _, ln := range lns {
			ln.Close()
		}
	}
	return a.send(proto.JSONFrame(proto.NetListen, 0, reply))
}

// relay accepts connections on ln until the agent ends, and relays each.
func (a *agent) relay(ln net.Listener, name string) {
	go func() {
		<-a.done
		ln.Close()
	}()
	for {
		sock, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			a.log.Warn("egress listener", "listener", name, "err", err)
			continue
		}
		id := proto.NetStreamBit | a.netSeq.Add(1)&^proto.NetStreamBit
		c, ok := a.nets.Open(id, sock.LocalAddr(), sock.RemoteAddr())
		if !ok {
			sock.Close() // too many at once
			continue
		}
		if err := a.send(proto.JSONFrame(proto.NetOpen, id, proto.NetOpenMsg{Listener: name})); err != nil {
			sock.Close()
			return
		}
		go func() {
			netrelay.Pump(sock, c)
			a.nets.Forget(c)
		}()
	}
}
