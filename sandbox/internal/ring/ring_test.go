package ring

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"
)

func TestBuf(t *testing.T) {
	q := New(10)
	if err := q.Write([]byte("abcdef")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if n, _ := q.Read(buf); string(buf[:n]) != "abcd" {
		t.Errorf("read %q", buf[:n])
	}
	// Wraps around the end of the storage.
	if err := q.Write([]byte("ghijklmn")); err != nil {
		t.Fatal(err)
	}
	if err := q.Write([]byte("o")); !errors.Is(err, ErrOverflow) {
		t.Errorf("overflow: %v", err)
	}
	var got []byte
	for {
		n, done := q.Read(buf)
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
	q.Close()
	if n, done := q.Read(buf); n != 0 || !done {
		t.Errorf("after close: %d %v", n, done)
	}
}

// The ring keeps bytes in order whatever the sizes of writes and reads.
func TestBufRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	q := New(1000)
	var in, out []byte
	next := byte(0)
	for range 20000 {
		if r.IntN(2) == 0 {
			p := make([]byte, r.IntN(300))
			for i := range p {
				p[i] = next
				next++
			}
			if q.Write(p) == nil {
				in = append(in, p...)
			} else {
				next -= byte(len(p))
			}
		} else {
			buf := make([]byte, r.IntN(300)+1)
			n, _ := q.Read(buf)
			out = append(out, buf[:n]...)
		}
	}
	for {
		buf := make([]byte, 100)
		n, _ := q.Read(buf)
		if n == 0 {
			break
		}
		out = append(out, buf[:n]...)
	}
	if !bytes.Equal(in, out) {
		t.Fatal("bytes lost or reordered")
	}
}
