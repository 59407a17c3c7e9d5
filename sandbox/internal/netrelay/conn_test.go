package netrelay

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"
)

// wire delivers one end's frames to the other, in order, from one goroutine
// as a frame dispatcher would.
type wire struct {
	ch   chan func()
	peer *Conn
}

func (w *wire) Data(_ uint32, p []byte) error {
	b := append([]byte(nil), p...)
	w.ch <- func() {
		if err := w.peer.Deliver(b); err != nil {
			panic(err)
		}
	}
	return nil
}
func (w *wire) Credit(_ uint32, n int) error { w.ch <- func() { w.peer.AddCredit(n) }; return nil }
func (w *wire) End(_ uint32, close bool) error {
	w.ch <- func() { w.peer.RemoteEnd(close) }
	return nil
}

type addr string

func (a addr) Network() string { return "relay" }
func (a addr) String() string  { return string(a) }

func pair(t *testing.T) (*Conn, *Conn) { return sizedPair(t, DefaultSizes) }

func sizedPair(t *testing.T, sizes Sizes) (*Conn, *Conn) {
	wa := &wire{ch: make(chan func(), 1024)}
	wb := &wire{ch: make(chan func(), 1024)}
	a := NewSized(1, wa, sizes, addr("a"), addr("b"))
	b := NewSized(1, wb, sizes, addr("b"), addr("a"))
	wa.peer, wb.peer = b, a
	stop := make(chan struct{})
	for _, w := range []*wire{wa, wb} {
		go func() {
			for {
				select {
				case f := <-w.ch:
					f()
				case <-stop:
					return
				}
			}
		}()
	}
	t.Cleanup(func() { close(stop) })
	return a, b
}

func TestTransferBothWaysWithHalfClose(t *testing.T) {
	a, b := pair(t)
	data := make([]byte, 2<<20+123)
	rand.Read(data)
	var wg sync.WaitGroup
	for _, c := range []struct{ from, to *Conn }{{a, b}, {b, a}} {
		wg.Add(2)
		go func() {
			defer wg.Done()
			if _, err := c.from.Write(data); err != nil {
				t.Error(err)
			}
			c.from.CloseWrite()
		}()
		go func() {
			defer wg.Done()
			got, err := io.ReadAll(c.to)
			if err != nil || !bytes.Equal(got, data) {
				t.Errorf("read %d bytes, %v", len(got), err)
			}
		}()
	}
	wg.Wait()
}

// countingWriter counts its writes.
type countingWriter struct {
	buf    bytes.Buffer
	writes int
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.writes++
	return w.buf.Write(p)
}

// io.Copy from a Conn writes what arrived in writes as large as the window
// allows, and everything arrives, in both sizes.
func TestWriteTo(t *testing.T) {
	for _, sizes := range []Sizes{DefaultSizes, WideSizes} {
		a, b := sizedPair(t, sizes)
		data := make([]byte, 16<<20+5)
		rand.Read(data)
		go func() {
			a.Write(data)
			a.CloseWrite()
		}()
		var w countingWriter
		n, err := io.Copy(&w, b)
		if err != nil || n != int64(len(data)) || !bytes.Equal(w.buf.Bytes(), data) {
			t.Fatalf("%+v: copied %d bytes, %v", sizes, n, err)
		}
		if w.writes > len(data)/(64<<10) {
			t.Errorf("%+v: %d writes for %d bytes: as many as io.Copy's own 32 KiB buffer would make", sizes, w.writes, len(data))
		}
	}
}

func TestDeadlineAndClose(t *testing.T) {
	a, b := pair(t)
	a.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	if _, err := a.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past the deadline: %v", err)
	}
	var ne net.Error
	a.SetReadDeadline(time.Now().Add(time.Hour))
	done := make(chan error)
	go func() { _, err := a.Read(make([]byte, 1)); done <- err }()
	time.Sleep(10 * time.Millisecond)
	a.SetReadDeadline(time.Unix(1, 0)) // what net/http does to abort a read
	if err := <-done; !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("an aborted read: %v", err)
	}
	// A writer without credit waits; the other end's Close makes it fail.
	a.SetReadDeadline(time.Time{})
	go func() { a.Write(make([]byte, 2*Window)); done <- nil }()
	time.Sleep(10 * time.Millisecond)
	b.Close()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("a writer outlived the other end's Close")
	}
	if _, err := a.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("read after the other end closed: %v", err)
	}
}

func TestOverflow(t *testing.T) {
	c := New(1, &wire{ch: make(chan func(), 1)}, addr("a"), addr("b"))
	if err := c.Deliver(make([]byte, Window)); err != nil {
		t.Fatal(err)
	}
	if err := c.Deliver(make([]byte, 1)); !errors.Is(err, ErrOverflow) {
		t.Fatalf("past the window: %v", err)
	}
}

func TestPump(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	a, b := pair(t)
	go func() {
		s, err := l.Accept()
		if err == nil {
			Pump(s, a)
		}
	}()
	s, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s.Write([]byte("ping"))
	s.(*net.TCPConn).CloseWrite()
	got, _ := io.ReadAll(io.LimitReader(b, 4))
	if string(got) != "ping" {
		t.Fatalf("got %q", got)
	}
	if _, err := b.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("no EOF after the socket's half-close: %v", err)
	}
	b.Write([]byte("pong"))
	b.Close()
	s.SetDeadline(time.Now().Add(5 * time.Second))
	got, err = io.ReadAll(s)
	if string(got) != "pong" || err != nil {
		t.Fatalf("socket read %q, %v", got, err)
	}
}
