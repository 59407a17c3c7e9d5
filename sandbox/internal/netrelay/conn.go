// Package netrelay is one end of a TCP connection relayed over the sandbox
// protocol: the agent's side holds a socket a command connected to a loopback
// listener, the host's side hands a Conn to the egress proxy. Both ends are the
// same type, so the flow control is the same both ways: a sender may have at
// most Window bytes in flight, and the receiver grants credit as its reader
// consumes them, so the frame dispatcher never blocks and nothing buffers
// without bound.
package netrelay

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// Window is how many bytes of one direction may be in flight, by default.
const Window = 512 << 10

// Sender sends a relayed connection's frames to the other end. Its methods
// are called from many goroutines; an error means the whole channel broke.
type Sender interface {
	Data(id uint32, p []byte) error
	Credit(id uint32, n int) error
	// End says the sender will send no more data; close says it is gone and
	// will read no more either.
	End(id uint32, close bool) error
}

// ErrOverflow is returned by Deliver when the other end sent past its window.
var ErrOverflow = errors.New("relayed connection: flow-control window exceeded")

// Chunk bounds the data of one frame, by default.
const Chunk = 32 << 10

// Sizes are a connection's flow-control window and largest frame; both ends
// must use the same.
type Sizes struct {
	Window, Chunk int
}

// DefaultSizes suit a channel that also carries other traffic.
var DefaultSizes = Sizes{Window: Window, Chunk: Chunk}

// WideSizes suit a channel of the relayed connections' own.
var WideSizes = Sizes{Window: 4 << 20, Chunk: 256 << 10}

// Conn is one end of a relayed connection: a net.Conn with CloseWrite and
// deadlines.
type Conn struct {
	id    uint32
	send  Sender
	sizes Sizes

	mu       sync.Mutex // guards everything below
	buf      []byte     // received, not yet read (at most sizes.Window)
	consumed int        // read since the last credit sent
	eof      bool       // the other end ended its data
	gone     bool       // the other end closed: writes fail
	closed   bool       // Close was called
	wrote    bool       // End was sent
	credit   int        // bytes we may still send
	rdl, wdl time.Time  // deadlines
	wake     chan struct{}
	local    net.Addr
	remote   net.Addr
}

// Addr names an end of a relayed connection on the host's side, where it
// has no socket address of its own: "sandbox http", "egress socket".
type Addr string

// Network returns "sandbox".
func (a Addr) Network() string { return "sandbox" }

func (a Addr) String() string { return string(a) }

// New returns one end of connection id with DefaultSizes. local and remote
// are what its LocalAddr and RemoteAddr report.
func New(id uint32, send Sender, local, remote net.Addr) *Conn {
	return NewSized(id, send, DefaultSizes, local, remote)
}

// NewSized is New with other sizes.
func NewSized(id uint32, send Sender, sizes Sizes, local, remote net.Addr) *Conn {
	return &Conn{id: id, send: send, sizes: sizes, credit: sizes.Window, wake: make(chan struct{}), local: local, remote: remote}
}

// ID is the connection's stream id.
func (c *Conn) ID() uint32 { return c.id }

// broadcast wakes every waiter; c.mu is held.
func (c *Conn) broadcast() {
	close(c.wake)
	c.wake = make(chan struct{})
}

// Deliver queues data from the other end. It never blocks.
func (c *Conn) Deliver(p []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.eof {
		return nil // dropped: the reader is gone, or the peer broke its word
	}
	if len(c.buf)+len(p) > c.sizes.Window {
		return ErrOverflow
	}
	c.buf = append(c.buf, p...)
	c.broadcast()
	return nil
}

// AddCredit records that the other end consumed n of our bytes.
func (c *Conn) AddCredit(n int) {
	c.mu.Lock()
	c.credit += n
	c.broadcast()
	c.mu.Unlock()
}

// RemoteEnd records that the other end sends no more (and, when closed,
// reads no more).
func (c *Conn) RemoteEnd(closed bool) {
	c.mu.Lock()
	c.eof = true
	if closed {
		c.gone = true
	}
	c.broadcast()
	c.mu.Unlock()
}

// Fail ends the connection because the channel under it broke.
func (c *Conn) Fail() {
	c.mu.Lock()
	c.eof, c.gone, c.wrote = true, true, true
	c.broadcast()
	c.mu.Unlock()
}

// wait blocks until woken or the deadline passes; c.mu is held and is held
// again on return. It returns false at the deadline.
func (c *Conn) wait(deadline time.Time) bool {
	wake := c.wake
	var timer <-chan time.Time
	if !deadline.IsZero() {
		d := time.Until(deadline)
		if d <= 0 {
			return false
		}
		t := time.NewTimer(d)
		defer t.Stop()
		timer = t.C
	}
	c.mu.Unlock()
	defer c.mu.Lock()
	select {
	case <-wake:
		return true
	case <-timer:
		return false
	}
}

func (c *Conn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.buf) == 0 {
		switch {
		case c.closed:
			return 0, net.ErrClosed
		case c.eof:
			return 0, io.EOF
		}
		if !c.rdl.IsZero() && !time.Now().Before(c.rdl) {
			return 0, os.ErrDeadlineExceeded
		}
		c.wait(c.rdl)
	}
	n := copy(p, c.buf)
	c.buf = c.buf[n:]
	if len(c.buf) == 0 {
		c.buf = nil // let a drained buffer go
	}
	return n, c.consume(n)
}

// consume grants the other end credit for n bytes read, in batches; c.mu is
// held, and released while the credit is sent.
func (c *Conn) consume(n int) error {
	c.consumed += n
	if c.consumed < c.sizes.Window/4 && len(c.buf) > 0 {
		return nil
	}
	k := c.consumed
	c.consumed = 0
	c.mu.Unlock()
	err := c.send.Credit(c.id, k)
	c.mu.Lock()
	return err
}

// WriteTo writes what arrives to w until the other end ends its data, each
// time all that has arrived in one write: fewer, larger writes than io.Copy's
// 32 KiB, which counts where every system call is dear (gVisor).
func (c *Conn) WriteTo(w io.Writer) (int64, error) {
	var total int64
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		for len(c.buf) == 0 {
			switch {
			case c.closed:
				return total, net.ErrClosed
			case c.eof:
				return total, nil
			}
			if !c.rdl.IsZero() && !time.Now().Before(c.rdl) {
				return total, os.ErrDeadlineExceeded
			}
			c.wait(c.rdl)
		}
		b := c.buf
		c.buf = nil
		c.mu.Unlock()
		n, err := w.Write(b)
		c.mu.Lock()
		total += int64(n)
		if cerr := c.consume(n); err == nil {
			err = cerr
		}
		if err != nil {
			return total, err
		}
	}
}

func (c *Conn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	done := 0
	for done < len(p) {
		switch {
		case c.closed:
			return done, net.ErrClosed
		case c.wrote:
			return done, errors.New("relayed connection: write after CloseWrite")
		case c.gone:
			return done, errors.New("relayed connection: closed by the other end")
		}
		if !c.wdl.IsZero() && !time.Now().Before(c.wdl) {
			return done, os.ErrDeadlineExceeded
		}
		if c.credit <= 0 {
			c.wait(c.wdl)
			continue
		}
		k := min(len(p)-done, c.credit, c.sizes.Chunk)
		c.credit -= k
		c.mu.Unlock()
		err := c.send.Data(c.id, p[done:done+k])
		c.mu.Lock()
		if err != nil {
			return done, err
		}
		done += k
	}
	return done, nil
}

// CloseWrite tells the other end no more data comes; reading goes on.
func (c *Conn) CloseWrite() error {
	c.mu.Lock()
	if c.wrote || c.closed {
		c.mu.Unlock()
		return nil
	}
	c.wrote = true
	c.broadcast()
	c.mu.Unlock()
	return c.send.End(c.id, false)
}

// Close ends the connection both ways.
func (c *Conn) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.buf = nil
	gone := c.gone
	c.broadcast()
	c.mu.Unlock()
	if gone {
		return nil
	}
	return c.send.End(c.id, true)
}

// Closed reports whether Close was called.
func (c *Conn) Closed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

func (c *Conn) LocalAddr() net.Addr  { return c.local }
func (c *Conn) RemoteAddr() net.Addr { return c.remote }

func (c *Conn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	c.rdl, c.wdl = t, t
	c.broadcast()
	c.mu.Unlock()
	return nil
}

func (c *Conn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	c.rdl = t
	c.broadcast()
	c.mu.Unlock()
	return nil
}

func (c *Conn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	c.wdl = t
	c.broadcast()
	c.mu.Unlock()
	return nil
}

// Pump copies between two connections until both directions end, passing
// on each half-close, then closes both: the agent's socket and its relayed
// end, or two sockets (the kernel splices what it can).
func Pump(a, b net.Conn) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		copyHalf(a, b)
	}()
	copyHalf(b, a)
	wg.Wait()
	a.Close()
	b.Close()
}

// copyHalf copies src to dst; at src's end it half-closes dst, and after a
// failure it closes both, which ends the other direction too.
func copyHalf(dst, src net.Conn) {
	_, err := io.Copy(dst, src)
	if err == nil {
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
			return
		}
	}
	dst.Close()
	src.Close()
}
