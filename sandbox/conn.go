package sandbox

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corralhq/corral/sandbox/internal/netrelay"
	"github.com/corralhq/corral/sandbox/internal/ring"
	"github.com/corralhq/corral/sandbox/proto"
)

// Timings of the host side.
const (
	// stopGrace is the time between SIGTERM and SIGKILL when a command is ended.
	stopGrace = 2 * time.Second
	// cancelBound is how long a cancelled call waits for the command's exit
	// before it returns anyway.
	cancelBound = 2800 * time.Millisecond
	// writeTimeout bounds one write to the engine; a stuck engine breaks the
	// connection instead of hanging a call.
	writeTimeout = 10 * time.Second
	// promptWait bounds how long a shell's input waits for its first output.
	promptWait = 3 * time.Second
)

// errUnresponsive says the agent answered nothing, not even a ping, for
// proto.Silence: it is wedged (stopped, starved, deadlocked).
var errUnresponsive = errors.New("the sandbox agent stopped answering")

// agentConn is the host's side of the protocol with one container's agent,
// over the container's attach stream.
type agentConn struct {
	container string
	conn      net.Conn
	log       *slog.Logger
	stderr    *lineLog // what the agent printed on stderr
	helloCh   chan proto.AgentHelloMsg
	hello     proto.AgentHelloMsg // set by handshake, read-only afterwards
	done      chan struct{}       // closed when the connection ended; err says why
	died      chan struct{}       // closed once death is set
	closing   atomic.Bool         // Close ended the connection on purpose
	egress    Egress              // serves relayed connections; nil refuses them
	nets      *netrelay.Table     // relayed connections
	netCh     chan proto.NetListenMsg
	heard     proto.Heard // when the agent's last frame arrived

	wmu sync.Mutex // guards writes to conn

	mu      sync.Mutex // guards streams, nextID, err and death
	streams map[uint32]*hostStream
	nextID  uint32
	err     error
	death   *DiedError
}

// hostStream is the host's side of one command.
type hostStream struct {
	id       uint32
	out      *ring.Buf          // output received, not yet written to the caller
	exit     chan proto.ExitMsg // cap 1
	gone     chan struct{}
	inCredit atomic.Int64  // input bytes the agent will still accept
	inReady  chan struct{} // cap 1: input credit arrived
	// spoke is closed at the first output (for a shell, its prompt); only
	// the dispatcher touches spokeOnce.
	spoke     chan struct{}
	spokeOnce sync.Once
}

func newAgentConn(container string, conn net.Conn, r io.Reader, egress Egress, log *slog.Logger) *agentConn {
	c := &agentConn{
		container: container,
		conn:      conn,
		log:       log,
		stderr:    &lineLog{log: log},
		helloCh:   make(chan proto.AgentHelloMsg, 1),
		done:      make(chan struct{}),
		died:      make(chan struct{}),
		streams:   map[uint32]*hostStream{},
		egress:    egress,
		netCh:     make(chan proto.NetListenMsg, 1),
	}
	c.nets = netrelay.NewTable(c.send, maxRelayed)
	c.heard.Mark()
	go c.readLoop(r)
	return c
}

// heartbeat pings the agent every proto.PingEvery until the connection ends,
// and ends it when the agent has sent nothing for proto.Silence. The pings
// also tell the agent its host is alive: without them it ends itself.
func (c *agentConn) heartbeat() {
	t := time.NewTicker(proto.PingEvery)
	defer t.Stop()
	var seq uint64
	for {
		select {
		case <-c.done:
			return
		case <-t.C:
		}
		if since := c.heard.Since(); since > proto.Silence {
			c.fail(fmt.Errorf("%w (nothing for %v)", errUnresponsive, since.Round(time.Millisecond)))
			return
		}
		seq++
		var p [8]byte
		binary.BigEndian.PutUint64(p[:], seq)
		_ = c.send(proto.AppendFrame(make([]byte, 0, proto.HeaderSize+8), proto.Ping, 0, p[:]))
	}
}

// fail ends the connection (once) and records why.
func (c *agentConn) fail(err error) {
	c.mu.Lock()
	first := c.err == nil
	if first {
		c.err = err
		close(c.done)
	}
	c.mu.Unlock()
	if first {
		c.conn.Close()
		c.nets.Fail()
	}
}

// broken reports whether the connection has ended.
func (c *agentConn) broken() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// close ends the connection on purpose; the agent sees its stdin close and
// exits, ending the container.
func (c *agentConn) close() {
	c.closing.Store(true)
	c.fail(ErrClosed)
}

// setDeath records why the container died and wakes the calls waiting for it.
func (c *agentConn) setDeath(d *DiedError) {
	c.mu.Lock()
	c.death = d
	c.mu.Unlock()
	close(c.died)
}

// deathErr waits (briefly) for the cause of death and returns it.
func (c *agentConn) deathErr() error {
	t := time.NewTimer(10 * time.Second)
	defer t.Stop()
	select {
	case <-c.died:
	case <-t.C:
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.death != nil {
		return c.death
	}
	if c.closing.Load() {
		return ErrClosed
	}
	return &DiedError{Container: c.container, Reason: fmt.Sprintf("the connection to its agent broke: %v", c.err)}
}

// send writes one encoded frame.
func (c *agentConn) send(b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	select {
	case <-c.done:
		return net.ErrClosed
	default:
	}
	_ = c.conn.SetWriteDeadline(time.Now().Add(writeTimeout))
	if _, err := c.conn.Write(b); err != nil {
		c.fail(fmt.Errorf("write to the agent: %w", err))
		return err
	}
	return nil
}

func (c *agentConn) stream(id uint32) *hostStream {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.streams[id]
}

// open registers a new stream.
func (c *agentConn) open() (*hostStream, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return nil, net.ErrClosed
	}
	c.nextID++
	s := &hostStream{
		id:      c.nextID,
		out:     ring.New(proto.OutputWindow),
		exit:    make(chan proto.ExitMsg, 1),
		gone:    make(chan struct{}),
		inReady: make(chan struct{}, 1),
		spoke:   make(chan struct{}),
	}
	s.inCredit.Store(proto.InputWindow)
	c.streams[s.id] = s
	return s, nil
}

// forget drops a stream: frames that still arrive for it are ignored.
func (c *agentConn) forget(s *hostStream) {
	c.mu.Lock()
	delete(c.streams, s.id)
	c.mu.Unlock()
	close(s.gone)
}

// readLoop dispatches the agent's frames until the connection ends. It never
// blocks on a stream: the agent sends no more than each stream's window.
func (c *agentConn) readLoop(r io.Reader) {
	fr := proto.NewReader(&demuxReader{r: r, stderr: c.stderr})
	for {
		f, err := fr.Next()
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
				err = io.EOF
			}
			c.fail(err)
			return
		}
		c.heard.Mark()
		if err := c.dispatch(f); err != nil {
			c.fail(err)
			return
		}
	}
}

func (c *agentConn) dispatch(f proto.Frame) error {
	switch f.Type {
	case proto.Hello:
		var h proto.AgentHelloMsg
		if err := json.Unmarshal(f.Payload, &h); err != nil {
			return fmt.Errorf("%w: hello: %v", proto.ErrProtocol, err)
		}
		select {
		case c.helloCh <- h:
		default:
		}
	case proto.Data:
		if s := c.stream(f.Stream); s != nil {
			if err := s.out.Write(f.Payload); err != nil {
				return fmt.Errorf("%w: stream %d: %v", proto.ErrProtocol, f.Stream, err)
			}
			s.spokeOnce.Do(func() { close(s.spoke) })
		}
	case proto.Exit:
		var m proto.ExitMsg
		if err := json.Unmarshal(f.Payload, &m); err != nil {
			return fmt.Errorf("%w: exit: %v", proto.ErrProtocol, err)
		}
		if s := c.stream(f.Stream); s != nil {
			select {
			case s.exit <- m:
			default:
			}
		}
	case proto.Pong:
		// heard is all a pong is for.
	case proto.Credit:
		n, err := proto.ParseCredit(f.Payload)
		if err != nil {
			return err
		}
		if s := c.stream(f.Stream); s != nil {
			s.inCredit.Add(int64(n))
			ring.Notify(s.inReady)
		}
	default:
		if ok, err := c.dispatchNet(f); ok {
			return err
		}
		return fmt.Errorf("%w: unknown frame type %d", proto.ErrProtocol, f.Type)
	}
	return nil
}

// handshake exchanges hellos.
func (c *agentConn) handshake(ctx context.Context, h proto.HelloMsg, timeout time.Duration) error {
	if err := c.send(proto.JSONFrame(proto.Hello, 0, h)); err != nil {
		return fmt.Errorf("sandbox agent: %w", err)
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case a := <-c.helloCh:
		if a.Error != "" {
			return fmt.Errorf("sandbox agent: %s", a.Error)
		}
		if a.Version != proto.Version {
			return fmt.Errorf("sandbox agent speaks protocol %d, want %d", a.Version, proto.Version)
		}
		c.hello = a
		return nil
	case <-c.done:
		msg := "the sandbox agent ended before it answered"
		if tail := c.stderr.tail(); tail != "" {
			msg += ": " + tail
		}
		return errors.New(msg)
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return fmt.Errorf("the sandbox agent did not answer within %v", timeout)
	}
}

// runParams describes one command (or interactive shell) to run.
type runParams struct {
	start   proto.StartMsg
	output  io.Writer
	timeout time.Duration
	stdin   io.Reader         // interactive input, or nil
	resize  <-chan WindowSize // window size changes, or nil
}

// runResult is how a command ended.
type runResult struct {
	exit     proto.ExitMsg
	got      bool // the agent reported the exit
	timedOut bool
	canceled bool
}

// run runs one command to its end. Output is written to p.output from one
// goroutine, in order, before run returns.
func (c *agentConn) run(ctx context.Context, p runParams) (runResult, error) {
	var res runResult
	s, err := c.open()
	if err != nil {
		return res, c.deathErr()
	}
	defer c.forget(s)
	if p.output == nil {
		p.output = io.Discard
	}
	if err := c.send(proto.JSONFrame(proto.Start, s.id, p.start)); err != nil {
		return res, c.deathErr()
	}
	pumpDone := make(chan struct{})
	var discard atomic.Bool
	go c.pump(s, p.output, &discard, pumpDone)
	if p.stdin != nil {
		go c.feed(s, p.stdin)
	}
	finish := func() {
		s.out.Close()
		<-pumpDone
	}
	var timer <-chan time.Time
	if p.timeout > 0 {
		t := time.NewTimer(p.timeout)
		defer t.Stop()
		timer = t.C
	}
	var hard <-chan time.Time
	stop := func(bound time.Duration) {
		_ = c.send(proto.JSONFrame(proto.Stop, s.id, proto.StopMsg{GraceMS: int(stopGrace / time.Millisecond)}))
		t := time.NewTimer(bound)
		hard = t.C
	}
	ctxDone := ctx.Done()
	resize := p.resize
	for {
		select {
		case m := <-s.exit:
			res.exit, res.got = m, true
			finish()
			return res, nil
		case <-timer:
			timer, res.timedOut = nil, true
			if hard == nil {
				stop(stopGrace + 5*time.Second)
			}
		case <-ctxDone:
			ctxDone, res.canceled = nil, true
			stop(cancelBound)
		case <-hard:
			res.exit.ExitCode = -1
			discard.Store(true)
			finish()
			return res, nil
		case <-c.done:
			finish()
			return res, c.deathErr()
		case ws, ok := <-resize:
			if !ok {
				resize = nil
				continue
			}
			_ = c.send(proto.ResizeFrame(s.id, ws.Cols, ws.Rows))
		}
	}
}

// pump writes a stream's output to w and gives the agent credit for it.
func (c *agentConn) pump(s *hostStream, w io.Writer, discard *atomic.Bool, done chan<- struct{}) {
	defer close(done)
	buf := make([]byte, proto.MaxChunk)
	consumed := 0
	for {
		n, fin := s.out.Read(buf)
		if n > 0 {
			if !discard.Load() {
				if _, err := w.Write(buf[:n]); err != nil {
					c.log.Warn("sandbox output writer failed; discarding the rest", "err", err)
					discard.Store(true)
				}
			}
			consumed += n
			if consumed >= proto.OutputWindow/4 || s.out.Len() == 0 {
				_ = c.send(proto.CreditFrame(s.id, consumed))
				consumed = 0
			}
			continue
		}
		if fin {
			return
		}
		<-s.out.Ready
	}
}

// feed sends an interactive shell's input within the agent's credit. At the
// end of input it sends ^D, the terminal's end of file. It starts once the
// shell has printed something (its prompt), as a person would: input that
// arrives while the shell is still setting up its terminal can lose the ^D.
func (c *agentConn) feed(s *hostStream, in io.Reader) {
	t := time.NewTimer(promptWait)
	select {
	case <-s.spoke:
	case <-t.C:
	case <-s.gone:
	}
	t.Stop()
	buf := make([]byte, 4096)
	for {
		n, err := in.Read(buf)
		p := buf[:n]
		if err != nil {
			p = append(p, 4)
		}
		for len(p) > 0 {
			for s.inCredit.Load() <= 0 {
				select {
				case <-s.inReady:
				case <-s.gone:
					return
				}
			}
			k := int(min(int64(len(p)), s.inCredit.Load()))
			s.inCredit.Add(-int64(k))
			if c.send(proto.AppendFrame(make([]byte, 0, proto.HeaderSize+k), proto.Input, s.id, p[:k])) != nil {
				return
			}
			p = p[k:]
		}
		if err != nil {
			return
		}
		select {
		case <-s.gone:
			return
		default:
		}
	}
}

// demuxReader yields the container's stdout out of the attach stream (which,
// without a TTY, interleaves stdout and stderr in frames with 8-byte headers)
// and sends stderr to a sink.
type demuxReader struct {
	r      io.Reader
	stderr io.Writer
	left   int // bytes left in the current stdout frame
}

func (d *demuxReader) Read(p []byte) (int, error) {
	for d.left == 0 {
		var h [8]byte
		if _, err := io.ReadFull(d.r, h[:]); err != nil {
			return 0, err
		}
		n := int(binary.BigEndian.Uint32(h[4:]))
		switch h[0] {
		case 1:
			d.left = n
		case 2:
			if _, err := io.CopyN(d.stderr, d.r, int64(n)); err != nil {
				return 0, err
			}
		default:
			if _, err := io.CopyN(io.Discard, d.r, int64(n)); err != nil {
				return 0, err
			}
		}
	}
	if len(p) > d.left {
		p = p[:d.left]
	}
	n, err := d.r.Read(p)
	d.left -= n
	if err == io.EOF && d.left > 0 {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

// lineLog passes what the agent prints on stderr to the logger line by line
// and keeps the last few lines for error messages. Its memory is bounded.
type lineLog struct {
	log *slog.Logger

	mu   sync.Mutex // guards part and last
	part []byte
	last []string
}

// lineLogMax bounds the bytes kept of one line, lineLogLines the lines kept.
const (
	lineLogMax   = 2048
	lineLogLines = 5
)

func (l *lineLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			room := lineLogMax - len(l.part)
			l.part = append(l.part, p[:min(len(p), max(room, 0))]...)
			break
		}
		l.part = append(l.part, p[:min(i, max(lineLogMax-len(l.part), 0))]...)
		l.line(string(l.part))
		l.part = l.part[:0]
		p = p[i+1:]
	}
	return n, nil
}

// line handles one complete line; l.mu is held.
func (l *lineLog) line(s string) {
	s = strings.TrimSpace(s)
	if s == "" {
		return
	}
	l.log.Info("sandbox agent", "line", s)
	l.last = append(l.last, s)
	if len(l.last) > lineLogLines {
		l.last = l.last[1:]
	}
}

// tail returns the last lines seen, joined.
func (l *lineLog) tail() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	last := l.last
	if len(l.part) > 0 {
		last = append(append([]string(nil), last...), strings.TrimSpace(string(l.part)))
	}
	return strings.Join(last, "; ")
}
