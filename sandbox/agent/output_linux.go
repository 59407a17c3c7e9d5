package agent

import (
	"os"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/corralhq/corral/sandbox/internal/ring"
	"github.com/corralhq/corral/sandbox/proto"
)

// outStream is one output of a command on its way to the host: its terminal,
// or, with Pipes, its stdout or its stderr. Each has a window of its own.
type outStream struct {
	c           *agentCmd
	f           *os.File   // the agent's read end; closed by pump
	typ         proto.Type // the frames it travels in: Data, or Stderr
	credit      atomic.Int64
	creditReady chan struct{} // cap 1: credit arrived or the stream detached
	total       atomic.Int64  // bytes read from f so far
	readingFrom atomic.Int64  // unix ns since pump has been blocked in read; 0 when not
	done        chan struct{} // closed when pump has read f to its end
}

func newOutStream(c *agentCmd, typ proto.Type, f *os.File) *outStream {
	o := &outStream{c: c, f: f, typ: typ, creditReady: make(chan struct{}, 1), done: make(chan struct{})}
	o.credit.Store(proto.OutputWindow)
	return o
}

// addCredit records n bytes the host consumed.
func (o *outStream) addCredit(n int) {
	o.credit.Add(int64(n))
	ring.Notify(o.creditReady)
}

// quiet reports whether pump has read everything or has been waiting for
// more for at least d.
func (o *outStream) quiet(d time.Duration) bool {
	select {
	case <-o.done:
		return true
	default:
	}
	since := o.readingFrom.Load()
	return since != 0 && time.Since(time.Unix(0, since)) >= d
}

// pump copies f to the host within the credit the host gave, up to the
// command's OutputLimit; past it, and after the exit frame, it reads on
// (discarding, counting) until every process holding the terminal or the
// pipe is gone, so that their writes never fail.
func (o *outStream) pump() {
	defer close(o.done)
	defer o.f.Close()
	c := o.c
	limit := c.msg.OutputLimit
	var kept int64 // bytes sent, or to be sent, within limit
	buf := make([]byte, proto.HeaderSize+proto.MaxChunk)
	for {
		n := proto.MaxChunk
		if avail := o.waitCredit(limit > 0 && kept >= limit); avail > 0 {
			n = int(min(int64(n), avail))
		}
		o.readingFrom.Store(time.Now().UnixNano())
		k, err := o.f.Read(buf[proto.HeaderSize : proto.HeaderSize+n])
		o.readingFrom.Store(0)
		if err == nil && k > 0 {
			// Take what else is there already: fewer, larger frames.
			k += readMore(o.f, buf[proto.HeaderSize+k:proto.HeaderSize+n])
		}
		if k > 0 {
			o.total.Add(int64(k))
			send := k
			if limit > 0 {
				send = int(min(int64(k), max(limit-kept, 0)))
				kept += int64(send)
			}
			c.mu.Lock()
			if !c.detached && send > 0 {
				o.credit.Add(-int64(send))
				proto.PutHeader(buf, o.typ, c.id, send)
				_ = c.a.send(buf[:proto.HeaderSize+send])
			}
			c.mu.Unlock()
		}
		if err != nil {
			return // EIO, EOF: no process holds the terminal or the pipe any more
		}
	}
}

// waitCredit blocks until the host accepts output; it returns 0 at once when
// full (the output limit is reached), and once the stream is detached or the
// agent is shutting down.
func (o *outStream) waitCredit(full bool) int64 {
	c := o.c
	for {
		c.mu.Lock()
		detached := c.detached
		c.mu.Unlock()
		if detached || full {
			return 0
		}
		if v := o.credit.Load(); v > 0 {
			return v
		}
		select {
		case <-o.creditReady:
		case <-c.a.done:
			// Shutting down: read on, sending nothing.
			c.mu.Lock()
			c.detached = true
			c.mu.Unlock()
			return 0
		}
	}
}

// readMore reads from f without waiting, as long as data is there and p has
// room; it returns how much it read.
func readMore(f *os.File, p []byte) int {
	sc, err := f.SyscallConn()
	if err != nil {
		return 0
	}
	total := 0
	_ = sc.Read(func(fd uintptr) bool {
		for total < len(p) {
			n, err := unix.Read(int(fd), p[total:])
			if n <= 0 || err != nil {
				break
			}
			total += n
		}
		return true
	})
	return total
}
