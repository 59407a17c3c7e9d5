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
