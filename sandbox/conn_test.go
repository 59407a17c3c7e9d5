package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corralhq/corral/sandbox/internal/envpath"
	"github.com/corralhq/corral/sandbox/internal/ring"
	"github.com/corralhq/corral/sandbox/proto"
)

// FuzzDispatch: whatever the agent sends, the host's dispatcher returns an
// error or nothing; it never panics.
func FuzzDispatch(f *testing.F) {
	f.Add(byte(proto.Exit), uint32(1), []byte(`{"exitCode":1}`))
	f.Add(byte(proto.Data), uint32(1), []byte("data"))
	f.Add(byte(proto.Credit), uint32(1), []byte{0, 0, 0, 1})
	f.Add(byte(proto.Stderr), uint32(2), []byte("stderr"))
	f.Add(byte(proto.Stderr), uint32(1), []byte("stderr on a terminal"))
	f.Add(byte(proto.Exit), uint32(2), []byte(`{"exitCode":0,"outBytes":5,"errBytes":7}`))
	f.Fuzz(func(t *testing.T, typ byte, stream uint32, p []byte) {
		// A client as Dial makes it, its read loop not started.
		c := newClient(discardConn{}, ClientConfig{Hello: proto.HelloMsg{Workspace: "/w"}})
		c.streams[1] = &hostStream{id: 1, out: ring.New(proto.OutputWindow), exit: make(chan proto.ExitMsg, 1), inReady: make(chan struct{}, 1), spoke: make(chan struct{})}
		// Stream 2 runs with pipes.
		c.streams[2] = &hostStream{id: 2, out: ring.New(proto.OutputWindow), errOut: ring.New(proto.OutputWindow), exit: make(chan proto.ExitMsg, 1), inReady: make(chan struct{}, 1), spoke: make(chan struct{})}
		_ = c.dispatch(proto.Frame{Type: proto.Type(typ), Stream: stream, Payload: p})
	})
}

// discardConn takes every write and has nothing to read.
type discardConn struct{}

func (discardConn) Read([]byte) (int, error)    { return 0, io.EOF }
func (discardConn) Write(p []byte) (int, error) { return len(p), nil }
func (discardConn) Close() error                { return nil }

// Stderr frames are for streams with pipes; on a terminal's stream, or past
// the stream's window, they are a broken protocol.
func TestDispatchStderr(t *testing.T) {
	c := &Client{streams: map[uint32]*hostStream{}, log: slog.New(slog.DiscardHandler)}
	c.streams[1] = &hostStream{id: 1, out: ring.New(proto.OutputWindow)}
	c.streams[2] = &hostStream{id: 2, out: ring.New(proto.OutputWindow), errOut: ring.New(proto.OutputWindow)}
	if err := c.dispatch(proto.Frame{Type: proto.Stderr, Stream: 2, Payload: []byte("e")}); err != nil || c.streams[2].errOut.Len() != 1 || c.streams[2].out.Len() != 0 {
		t.Errorf("stderr on a stream with pipes: %v", err)
	}
	if err := c.dispatch(proto.Frame{Type: proto.Stderr, Stream: 1, Payload: []byte("e")}); !errors.Is(err, proto.ErrProtocol) {
		t.Errorf("stderr on a terminal's stream: %v", err)
	}
	big := make([]byte, proto.MaxChunk)
	var err error
	for i := 0; i < proto.OutputWindow/proto.MaxChunk+1 && err == nil; i++ {
		err = c.dispatch(proto.Frame{Type: proto.Stderr, Stream: 2, Payload: big})
	}
	if !errors.Is(err, proto.ErrProtocol) {
		t.Errorf("stderr past its window: %v", err)
	}
	if err := c.dispatch(proto.Frame{Type: proto.Stderr, Stream: 9, Payload: []byte("late")}); err != nil {
		t.Errorf("stderr of a stream that ended: %v", err)
	}
}

func TestLineLogBounded(t *testing.T) {
	l := NewAgentLog(nil)
	l.Write(bytes.Repeat([]byte("x"), 1<<20))
	l.Write([]byte("\n"))
	for i := range 20 {
		l.Write([]byte(strings.Repeat("y", i) + "\n"))
	}
	if len(l.part) != 0 || len(l.first) != agentLogLines || len(l.last) != agentLogLines || len(l.Tail()) > 2*agentLogLines*520+20 {
		t.Errorf("unbounded: part %d, %d+%d lines, tail of %d bytes", len(l.part), len(l.first), len(l.last), len(l.Tail()))
	}
}

// An agent that crashes says why in its first lines and then dumps its
// stacks: the error keeps both ends.
func TestAgentLogKeepsACrashsCause(t *testing.T) {
	l := NewAgentLog(nil)
	fmt.Fprint(l, "runtime: failed to create new OS thread (have 17 already; errno=11)\nruntime: may need to increase max user processes (ulimit -u)\nfatal error: newosproc\n\n")
	for i := range 200 {
		fmt.Fprintf(l, "goroutine %d [running]:\n\truntime.throw(...)\n", i)
	}
	fmt.Fprint(l, "exit status 2")
	tail := l.Tail()
	for _, want := range []string{"runtime: failed to create new OS thread", "fatal error: newosproc", "[393 lines]", "exit status 2"} {
		if !strings.Contains(tail, want) {
			t.Errorf("%q is not in %q", want, tail)
		}
	}
}

func TestWithin(t *testing.T) {
	for _, tt := range []struct {
		root, p string
		want    bool
	}{
		{"/w", "/w", true},
		{"/w", "/w/a", true},
		{"/w", "/wa", false},
		{"/w", "/", false},
		{"/", "/x", true},
		{"/w/", "/w/a", false}, // roots are clean
	} {
		if got := envpath.Within(tt.root, tt.p); got != tt.want {
			t.Errorf("envpath.Within(%q, %q) = %v", tt.root, tt.p, got)
		}
	}
}

// stuckConn takes no write until it is closed, like a stream whose far end
// stopped reading.
type stuckConn struct {
	closed chan struct{}
	once   sync.Once
}

func (s *stuckConn) Read(p []byte) (int, error) {
	<-s.closed
	return 0, io.EOF
}

func (s *stuckConn) Write(p []byte) (int, error) {
	<-s.closed
	return 0, io.ErrClosedPipe
}

func (s *stuckConn) Close() error {
	s.once.Do(func() { close(s.closed) })
	return nil
}

// On a stream without write deadlines, a write stuck past writeTimeout ends
// the connection: Dial returns rather than hang.
func TestDialStuckWrite(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the write timeout")
	}
	conn := &stuckConn{closed: make(chan struct{})}
	done := make(chan error, 1)
	go func() {
		_, err := Dial(context.Background(), conn, ClientConfig{Name: "stuck", Hello: proto.HelloMsg{Workspace: "/w"}, HandshakeTimeout: time.Hour})
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "stuck") {
			t.Fatalf("Dial on a stream that takes nothing: %v", err)
		}
		t.Logf("Dial: %v", err)
	case <-time.After(writeTimeout + time.Minute):
		t.Fatalf("Dial still waits %v after its write got stuck", writeTimeout+time.Minute)
	}
	select {
	case <-conn.closed:
	default:
		t.Error("the stream was not closed")
	}
}
