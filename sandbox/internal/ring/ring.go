// Package ring is the bounded byte queue both ends of the sandbox protocol use
// for flow-controlled streams.
package ring

import (
	"errors"
	"sync"
)

// ErrOverflow is returned when a peer sends more than its window allows.
var ErrOverflow = errors.New("flow-control window exceeded")

// Buf is a bounded byte queue between a producer that must never block (a
// frame dispatcher serving many streams) and one consumer that waits for data.
// Its storage grows on demand up to max bytes, so a quiet stream costs little.
type Buf struct {
	max int
	// Ready has capacity 1; it is signalled after every write and on close.
	Ready chan struct{}

	mu     sync.Mutex // guards buf, r, n and closed
	buf    []byte
	r, n   int // read offset and length of the queued bytes in buf
	closed bool
}

// New returns an empty queue that holds at most max bytes.
func New(max int) *Buf {
	return &Buf{max: max, Ready: make(chan struct{}, 1)}
}

// Write queues a copy of p, or fails with ErrOverflow when it does not fit.
func (q *Buf) Write(p []byte) error {
	if len(p) == 0 {
		return nil
	}
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return nil
	}
	if q.n+len(p) > q.max {
		q.mu.Unlock()
		return ErrOverflow
	}
	if q.n+len(p) > len(q.buf) {
		q.grow(q.n + len(p))
	}
	w := (q.r + q.n) % len(q.buf)
	c := copy(q.buf[w:], p)
	copy(q.buf, p[c:])
	q.n += len(p)
	q.mu.Unlock()
	Notify(q.Ready)
	return nil
}

// grow resizes buf to hold at least need bytes; q.mu is held.
func (q *Buf) grow(need int) {
	size := max(len(q.buf), 4096)
	for size < need {
		size *= 2
	}
	size = min(size, q.max)
	nb := make([]byte, size)
	if q.n > 0 {
		c := copy(nb, q.buf[q.r:min(q.r+q.n, len(q.buf))])
		copy(nb[c:], q.buf[:q.n-c])
	}
	q.buf, q.r = nb, 0
}

// Read moves queued bytes into p. It returns 0 and done=true once the queue is
// closed and empty; 0 and false when there is nothing yet (wait on Ready).
func (q *Buf) Read(p []byte) (n int, done bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.n == 0 {
		return 0, q.closed
	}
	n = copy(p, q.buf[q.r:min(q.r+q.n, len(q.buf))])
	if n < len(p) && n < q.n {
		n += copy(p[n:], q.buf[:q.n-n])
	}
	q.r = (q.r + n) % len(q.buf)
	q.n -= n
	if q.n == 0 {
		q.r = 0
	}
	return n, false
}

// Len reports how many bytes are queued.
func (q *Buf) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.n
}

// Close ends the queue: the consumer reads what is left, then done.
func (q *Buf) Close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	Notify(q.Ready)
}

// Notify signals ch, a channel of capacity 1, without blocking: a signal
// already pending stands for this one too.
func Notify(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
