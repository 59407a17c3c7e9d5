package netrelay

import (
	"fmt"
	"net"
	"sync"

	"github.com/corralhq/corral/sandbox/proto"
)

// Table holds the relayed connections of one protocol connection, on either
// side, and speaks their frames. Its methods are safe for concurrent use.
type Table struct {
	send  func([]byte) error
	max   int
	sizes Sizes

	mu     sync.Mutex // guards conns and failed
	conns  map[uint32]*Conn
	failed bool
}

// NewTable returns an empty table whose frames go out through send (which
// must be safe for concurrent use), holding at most max connections.
func NewTable(send func([]byte) error, max int) *Table {
	return NewSizedTable(send, max, DefaultSizes)
}

// NewSizedTable is NewTable whose connections have other sizes.
func NewSizedTable(send func([]byte) error, max int, sizes Sizes) *Table {
	return &Table{send: send, max: max, sizes: sizes, conns: map[uint32]*Conn{}}
}

// Open registers connection id; ok is false when the id is taken, the table
// is full or the protocol connection failed.
func (t *Table) Open(id uint32, local, remote net.Addr) (c *Conn, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, dup := t.conns[id]; dup || t.failed || len(t.conns) >= t.max {
		return nil, false
	}
	c = NewSized(id, t, t.sizes, local, remote)
	t.conns[id] = c
	return c, true
}

// Forget drops a connection once its user is done with it; frames that still
// come for it are ignored.
func (t *Table) Forget(c *Conn) {
	t.mu.Lock()
	if t.conns[c.id] == c {
		delete(t.conns, c.id)
	}
	t.mu.Unlock()
}

// Len is the number of connections held.
func (t *Table) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.conns)
}

func (t *Table) get(id uint32) *Conn {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.conns[id]
}

// Dispatch handles a NetData, NetCredit or NetEnd frame, and reports whether f
// was one. It never blocks: the other side sends within its window.
func (t *Table) Dispatch(f proto.Frame) (bool, error) {
	switch f.Type {
	case proto.NetData:
		if c := t.get(f.Stream); c != nil {
			if err := c.Deliver(f.Payload); err != nil {
				return true, fmt.Errorf("%w: relayed connection %#x: %v", proto.ErrProtocol, f.Stream, err)
			}
		}
	case proto.NetCredit:
		n, err := proto.ParseCredit(f.Payload)
		if err != nil {
			return true, err
		}
		if c := t.get(f.Stream); c != nil {
			c.AddCredit(n)
		}
	case proto.NetEnd:
		closed, err := proto.ParseNetEnd(f.Payload)
		if err != nil {
			return true, err
		}
		if c := t.get(f.Stream); c != nil {
			c.RemoteEnd(closed)
		}
	default:
		return false, nil
	}
	return true, nil
}

// Fail ends every connection: the protocol connection under them broke.
func (t *Table) Fail() {
	t.mu.Lock()
	t.failed = true
	conns := t.conns
	t.conns = map[uint32]*Conn{}
	t.mu.Unlock()
	for _, c := range conns {
		c.Fail()
	}
}

// Data, Credit and End make Table the Sender of its connections.

func (t *Table) Data(id uint32, p []byte) error {
	return t.send(proto.AppendFrame(make([]byte, 0, proto.HeaderSize+len(p)), proto.NetData, id, p))
}

func (t *Table) Credit(id uint32, n int) error { return t.send(proto.NetCreditFrame(id, n)) }

func (t *Table) End(id uint32, close bool) error { return t.send(proto.NetEndFrame(id, close)) }
