package sandbox

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func TestFrameRoundTrip(t *testing.T) {
	var b []byte
	b = appendFrame(b, frameData, 7, []byte("hello"))
	b = append(b, jsonFrame(frameExit, 7, exitMsg{ExitCode: 3, Cwd: "/w"})...)
	b = append(b, creditFrame(9, 123456)...)
	b = append(b, resizeFrame(9, 120, 40)...)
	b = appendFrame(b, frameInput, 1, nil)
	fr := newFrameReader(bytes.NewReader(b))
	f, err := fr.next()
	if err != nil || f.typ != frameData || f.stream != 7 || string(f.payload) != "hello" {
		t.Fatalf("data frame %+v %v", f, err)
	}
	f, _ = fr.next()
	if f.typ != frameExit || !strings.Contains(string(f.payload), `"cwd":"/w"`) {
		t.Errorf("exit frame %+v", f)
	}
	f, _ = fr.next()
	if n, err := parseCredit(f.payload); err != nil || n != 123456 || f.stream != 9 {
		t.Errorf("credit %d %v", n, err)
	}
	f, _ = fr.next()
	if cols, rows, err := parseResize(f.payload); err != nil || cols != 120 || rows != 40 {
		t.Errorf("resize %d %d %v", cols, rows, err)
	}
	f, _ = fr.next()
	if f.typ != frameInput || len(f.payload) != 0 {
		t.Errorf("empty frame %+v", f)
	}
	if _, err := fr.next(); err != io.EOF {
		t.Errorf("end: %v", err)
	}
}

func TestFrameReaderRejects(t *testing.T) {
	var h [headerSize]byte
	putHeader(h[:], frameData, 1, maxPayload+1)
	if _, err := newFrameReader(bytes.NewReader(h[:])).next(); !errors.Is(err, errProtocol) {
		t.Errorf("oversized frame: %v", err)
	}
	putHeader(h[:], frameData, 1, 10)
	if _, err := newFrameReader(bytes.NewReader(append(h[:], "short"...))).next(); err != io.ErrUnexpectedEOF {
		t.Errorf("truncated frame: %v", err)
	}
	if _, err := parseCredit([]byte{1}); err == nil {
		t.Error("short credit accepted")
	}
}

// FuzzFrameReader: arbitrary bytes never panic and never allocate past the
// frame bound.
func FuzzFrameReader(f *testing.F) {
	f.Add(appendFrame(nil, frameData, 1, []byte("x")))
	f.Add([]byte{1, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		fr := newFrameReader(bytes.NewReader(b))
		for {
			fr, err := fr.next()
			if err != nil {
				return
			}
			if len(fr.payload) > maxPayload {
				t.Fatal("payload past the bound")
			}
		}
	})
}

// FuzzDispatch: whatever the agent sends, the host's dispatcher returns an
// error or nothing; it never panics.
func FuzzDispatch(f *testing.F) {
	f.Add(byte(frameExit), uint32(1), []byte(`{"exitCode":1}`))
	f.Add(byte(frameData), uint32(1), []byte("data"))
	f.Add(byte(frameCredit), uint32(1), []byte{0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, typ byte, stream uint32, p []byte) {
		c := &agentConn{streams: map[uint32]*hostStream{}, helloCh: make(chan agentHelloMsg, 1), log: slog.New(slog.DiscardHandler)}
		c.streams[1] = &hostStream{id: 1, out: newRingBuf(outputWindow), exit: make(chan exitMsg, 1), inReady: make(chan struct{}, 1), spoke: make(chan struct{})}
		_ = c.dispatch(frame{typ: typ, stream: stream, payload: p})
	})
}

func TestRingBuf(t *testing.T) {
	q := newRingBuf(10)
	if err := q.write([]byte("abcdef")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if n, _ := q.read(buf); string(buf[:n]) != "abcd" {
		t.Errorf("read %q", buf[:n])
	}
	// Wraps around the end of the storage.
	if err := q.write([]byte("ghijklmn")); err != nil {
		t.Fatal(err)
	}
	if err := q.write([]byte("o")); !errors.Is(err, errOverflow) {
		t.Errorf("overflow: %v", err)
	}
	var got []byte
	for {
		n, done := q.read(buf)
		if n == 0 {
			if done {
				t.Fatal("done before close")
			}
			break
		}
		got = append(got, buf[:n]...)
	}
	if string(got) != "efghijklmn" {
		t.Errorf("got %q", got)
	}
	q.close()
	if n, done := q.read(buf); n != 0 || !done {
		t.Errorf("after close: %d %v", n, done)
	}
}

// The ring keeps bytes in order whatever the sizes of writes and reads.
func TestRingBufRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	q := newRingBuf(1000)
	var in, out []byte
	next := byte(0)
	for range 20000 {
		if r.IntN(2) == 0 {
			p := make([]byte, r.IntN(300))
			for i := range p {
				p[i] = next
				next++
			}
			if q.write(p) == nil {
				in = append(in, p...)
			} else {
				next -= byte(len(p))
			}
		} else {
			buf := make([]byte, r.IntN(300)+1)
			n, _ := q.read(buf)
			out = append(out, buf[:n]...)
		}
	}
	for {
		buf := make([]byte, 100)
		n, _ := q.read(buf)
		if n == 0 {
			break
		}
		out = append(out, buf[:n]...)
	}
	if !bytes.Equal(in, out) {
		t.Fatal("bytes lost or reordered")
	}
}

func TestDemuxReader(t *testing.T) {
	var b bytes.Buffer
	put := func(stream byte, s string) {
		var h [8]byte
		h[0] = stream
		binary.BigEndian.PutUint32(h[4:], uint32(len(s)))
		b.Write(h[:])
		b.WriteString(s)
	}
	put(1, "hello ")
	put(2, "agent says\nhi\n")
	put(1, "")
	put(1, "world")
	log := &lineLog{log: slog.New(slog.DiscardHandler)}
	got, err := io.ReadAll(&demuxReader{r: &b, stderr: log})
	if err != nil || string(got) != "hello world" {
		t.Errorf("stdout %q %v", got, err)
	}
	if tail := log.tail(); tail != "agent says; hi" {
		t.Errorf("stderr tail %q", tail)
	}
}

func TestLineLogBounded(t *testing.T) {
	l := &lineLog{log: slog.New(slog.DiscardHandler)}
	l.Write(bytes.Repeat([]byte("x"), 1<<20))
	l.Write([]byte("\n"))
	for i := range 20 {
		l.Write([]byte(strings.Repeat("y", i) + "\n"))
	}
	if len(l.part) != 0 || len(l.last) != lineLogLines || len(l.tail()) > lineLogLines*lineLogMax+20 {
		t.Errorf("unbounded: part %d, %d lines", len(l.part), len(l.last))
	}
}

func TestCommandEnv(t *testing.T) {
	env := commandEnv(
		[]string{"PATH=/image/bin", "LANG=en_US.UTF-8", "HOME=/root", "GOPATH=/go"},
		[]string{"FOO=bar", "PATH=/mine"},
	)
	want := []string{"LANG=en_US.UTF-8", "GOPATH=/go", "HOME=/tmp/home", "TERM=xterm-256color", "FOO=bar", "PATH=/mine"}
	if !slices.Equal(env, want) {
		t.Errorf("env %q, want %q", env, want)
	}
	env = commandEnv(nil, nil)
	for _, w := range []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8", "HOME=/tmp/home", "TERM=xterm-256color"} {
		if !slices.Contains(env, w) {
			t.Errorf("default env %q lacks %q", env, w)
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
		if got := within(tt.root, tt.p); got != tt.want {
			t.Errorf("within(%q, %q) = %v", tt.root, tt.p, got)
		}
	}
}
