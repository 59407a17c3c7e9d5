package proto

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestFrameRoundTrip(t *testing.T) {
	var b []byte
	b = AppendFrame(b, Data, 7, []byte("hello"))
	b = append(b, JSONFrame(Exit, 7, ExitMsg{ExitCode: 3, Cwd: "/w"})...)
	b = append(b, CreditFrame(9, 123456)...)
	b = append(b, ResizeFrame(9, 120, 40)...)
	b = AppendFrame(b, Input, 1, nil)
	fr := NewReader(bytes.NewReader(b))
	f, err := fr.Next()
	if err != nil || f.Type != Data || f.Stream != 7 || string(f.Payload) != "hello" {
		t.Fatalf("data frame %+v %v", f, err)
	}
	f, _ = fr.Next()
	if f.Type != Exit || !strings.Contains(string(f.Payload), `"cwd":"/w"`) {
		t.Errorf("exit frame %+v", f)
	}
	f, _ = fr.Next()
	if n, err := ParseCredit(f.Payload); err != nil || n != 123456 || f.Stream != 9 {
		t.Errorf("credit %d %v", n, err)
	}
	f, _ = fr.Next()
	if cols, rows, err := ParseResize(f.Payload); err != nil || cols != 120 || rows != 40 {
		t.Errorf("resize %d %d %v", cols, rows, err)
	}
	f, _ = fr.Next()
	if f.Type != Input || len(f.Payload) != 0 {
		t.Errorf("empty frame %+v", f)
	}
	if _, err := fr.Next(); err != io.EOF {
		t.Errorf("end: %v", err)
	}
}

func TestFrameReaderRejects(t *testing.T) {
	var h [HeaderSize]byte
	PutHeader(h[:], Data, 1, MaxPayload+1)
	if _, err := NewReader(bytes.NewReader(h[:])).Next(); !errors.Is(err, ErrProtocol) {
		t.Errorf("oversized frame: %v", err)
	}
	PutHeader(h[:], Data, 1, 10)
	if _, err := NewReader(bytes.NewReader(append(h[:], "short"...))).Next(); err != io.ErrUnexpectedEOF {
		t.Errorf("truncated frame: %v", err)
	}
	if _, err := ParseCredit([]byte{1}); err == nil {
		t.Error("short credit accepted")
	}
}

// A Start frame may carry a command of MaxCommand bytes, however JSON
// escapes it, to the agent's reader alone; every other frame, and every
// frame the host reads, stays within MaxPayload.
func TestStartFrameLimit(t *testing.T) {
	m := StartMsg{Command: strings.Repeat("\x01", MaxCommand-1), Dir: strings.Repeat("d", 4096)}
	if n := CommandSize(m); n != MaxCommand {
		t.Fatalf("CommandSize %d, want %d", n, MaxCommand)
	}
	big := JSONFrame(Start, 1, m)
	if len(big)-HeaderSize > MaxStartPayload {
		t.Fatalf("a command of MaxCommand control bytes takes %d bytes, more than MaxStartPayload", len(big)-HeaderSize)
	}
	f, err := NewReaderFromHost(bytes.NewReader(big)).Next()
	if err != nil || f.Type != Start || len(f.Payload) != len(big)-HeaderSize {
		t.Fatalf("the agent's reader: %v, %d bytes", err, len(f.Payload))
	}
	if _, err := NewReader(bytes.NewReader(big)).Next(); !errors.Is(err, ErrProtocol) {
		t.Errorf("the host's reader took a Start frame of %d bytes: %v", len(big), err)
	}
	var h [HeaderSize]byte
	for _, c := range []struct {
		typ Type
		n   int
	}{{Start, MaxStartPayload + 1}, {Data, MaxPayload + 1}, {FSData, MaxPayload + 1}, {Exit, MaxPayload + 1}} {
		PutHeader(h[:], c.typ, 1, c.n)
		if _, err := NewReaderFromHost(bytes.NewReader(h[:])).Next(); !errors.Is(err, ErrProtocol) {
			t.Errorf("the agent's reader: a frame of type %d of %d bytes: %v", c.typ, c.n, err)
		}
	}
	// The buffer a long Start took is not kept: the next frame's is the
	// usual one.
	fr := NewReaderFromHost(bytes.NewReader(append(big, AppendFrame(nil, Data, 1, []byte("x"))...)))
	if _, err := fr.Next(); err != nil {
		t.Fatal(err)
	}
	if f, err := fr.Next(); err != nil || string(f.Payload) != "x" || cap(fr.buf) > MaxPayload {
		t.Errorf("after a long Start: %q %v, buffer of %d bytes", f.Payload, err, cap(fr.buf))
	}
}

// FuzzFrameReader: arbitrary bytes never panic and never allocate past the
// frame bound.
func FuzzFrameReader(f *testing.F) {
	f.Add(AppendFrame(nil, Data, 1, []byte("x")))
	f.Add([]byte{1, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff})
	f.Add(AppendFrame(nil, Stderr, 1, []byte("e")))
	f.Add(AppendFrame(nil, InputEnd, 1, nil))
	f.Add(JSONFrame(Start, 1, StartMsg{Argv: []string{"a", "b"}, Pipes: true, Stdin: true, OutputLimit: 10, UID: 5, GID: 5}))
	f.Fuzz(func(t *testing.T, b []byte) {
		fr := NewReader(bytes.NewReader(b))
		for {
			fr, err := fr.Next()
			if err != nil {
				return
			}
			if len(fr.Payload) > MaxPayload {
				t.Fatal("payload past the bound")
			}
		}
	})
}

// The frame types of the exec API (21-31) meet none of the others.
func TestExecFrameTypes(t *testing.T) {
	seen := map[Type]string{}
	for name, typ := range map[string]Type{
		"Hello": Hello, "Start": Start, "Data": Data, "Exit": Exit, "Input": Input, "Credit": Credit, "Resize": Resize, "Stop": Stop, "Ping": Ping, "Pong": Pong,
		"NetListen": NetListen, "NetOpen": NetOpen, "NetData": NetData, "NetCredit": NetCredit, "NetEnd": NetEnd,
		"Stderr": Stderr, "StderrCredit": StderrCredit, "InputEnd": InputEnd,
	} {
		if other, dup := seen[typ]; dup {
			t.Errorf("%s and %s are both type %d", name, other, typ)
		}
		seen[typ] = name
	}
	for _, typ := range []Type{Stderr, StderrCredit, InputEnd} {
		if typ < 21 || typ > 31 {
			t.Errorf("%s is type %d, outside 21-31", seen[typ], typ)
		}
	}
}
