package tools

import (
	"fmt"
	"strings"
	"testing"
)

func termLines(t *testing.T, chunks ...string) []string {
	t.Helper()
	var lines []string
	term := newTerminal(func(l []byte) { lines = append(lines, string(l)) })
	for _, c := range chunks {
		term.Write([]byte(c))
	}
	term.Close()
	return lines
}

func TestTerminal(t *testing.T) {
	tests := []struct {
		name   string
		chunks []string
		want   []string
	}{
		{"plain", []string{"a\nb\n"}, []string{"a", "b"}},
		{"pty line ends", []string{"one\r\ntwo\r\n"}, []string{"one", "two"}},
		{"no final newline", []string{"a\nb"}, []string{"a", "b"}},
		{"colours stripped", []string{"\x1b[31mred\x1b[0m and \x1b[1;32mgreen\x1b[m\n"}, []string{"red and green"}},
		{"progress bar collapses", []string{"  0%\r 50%\r100%\n"}, []string{"100%"}},
		{"progress with erase", []string{"downloading 10%\r\x1b[Kdone\n"}, []string{"done"}},
		{"overwrite keeps the rest", []string{"abcdef\rXY\n"}, []string{"XYcdef"}},
		{"backspace", []string{"abc\b\bZ\n"}, []string{"aZc"}},
		{"cursor to column", []string{"hello\x1b[1Gj\n"}, []string{"jello"}},
		{"osc title dropped", []string{"\x1b]0;title\x07text\n"}, []string{"text"}},
		{"osc with ST", []string{"\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\\n"}, []string{"link"}},
		{"charset designation", []string{"\x1b(Bok\n"}, []string{"ok"}},
		{"sequence split across writes", []string{"\x1b[3", "1mred\x1b", "[0m\n"}, []string{"red"}},
		{"rune split across writes", []string{"caf\xc3", "\xa9\n"}, []string{"café"}},
		{"rune split in three", []string{"\xe2", "\x82", "\xac\n"}, []string{"€"}},
		{"invalid utf8 becomes replacement", []string{"a\xffb\n"}, []string{"a\ufffdb"}},
		{"truncated sequence then ascii", []string{"\xe2", "a\n"}, []string{"\ufffda"}},
		{"bell and other controls dropped", []string{"a\x07b\x00c\n"}, []string{"abc"}},
		{"tabs kept", []string{"a\tb\n"}, []string{"a\tb"}},
		{"trailing spaces trimmed", []string{"a   \n"}, []string{"a"}},
		{"empty lines kept", []string{"a\n\nb\n"}, []string{"a", "", "b"}},
		{"cursor up dropped", []string{"x\n\x1b[1Ay\n"}, []string{"x", "y"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := termLines(t, tt.chunks...)
			if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", tt.want) {
				t.Errorf("lines = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestTerminalLongLineIsCut(t *testing.T) {
	long := strings.Repeat("x", maxLineBytes+500)
	got := termLines(t, long+"\n", "next\n")
	if len(got) != 2 || got[1] != "next" {
		t.Fatalf("got %d lines, want 2 ending in next", len(got))
	}
	want := strings.Repeat("x", maxLineBytes) + " … [line cut: 500 more bytes]"
	if got[0] != want {
		t.Errorf("long line = %.40q... (len %d), want cut with a marker (len %d)", got[0], len(got[0]), len(want))
	}
}

func TestTranscriptKeepsHeadAndTail(t *testing.T) {
	tr := &transcript{}
	const n = 100_000
	for i := 1; i <= n; i++ {
		tr.addLine([]byte(fmt.Sprintf("line %d", i)))
	}
	text := tr.text("/logs/bash-1.log")
	if len(text) > maxModelOutput+200 {
		t.Errorf("model text is %d bytes, want at most about %d", len(text), maxModelOutput)
	}
	if !strings.HasPrefix(text, "line 1\nline 2\n") {
		t.Errorf("head lost: %.40q", text)
	}
	if !strings.HasSuffix(text, fmt.Sprintf("line %d", n)) {
		t.Errorf("tail lost: ...%q", text[len(text)-40:])
	}
	if tr.totalLines != n {
		t.Errorf("totalLines = %d, want %d", tr.totalLines, n)
	}
	kept := strings.Count(text, "\n") // lines kept, plus the marker, less one
	if int64(kept) != n-tr.omitLines {
		t.Errorf("kept %d lines and omitted %d; want them to add up to %d", kept, tr.omitLines, n)
	}
	marker := fmt.Sprintf("[... %d lines (", tr.omitLines)
	if !strings.Contains(text, marker) || !strings.Contains(text, "the full log is /logs/bash-1.log") {
		t.Errorf("no omission marker naming the count and the log in the text")
	}
	// The tail is the larger part.
	head, tail, _ := strings.Cut(text, "[...")
	if len(tail) < 5*len(head) {
		t.Errorf("head %d bytes, tail %d bytes: want a small head and a large tail", len(head), len(tail))
	}
}

func TestTranscriptShortOutputIsWhole(t *testing.T) {
	tr := &transcript{}
	var want []string
	for i := 0; i < 1200; i++ { // about 26 KB: under the cap
		l := fmt.Sprintf("short line number %d", i)
		want = append(want, l)
		tr.addLine([]byte(l))
	}
	if got := tr.text("x"); got != strings.Join(want, "\n") {
		t.Errorf("output under the cap was changed (len %d, want %d)", len(got), len(strings.Join(want, "\n")))
	}
	if tr.omitLines != 0 {
		t.Errorf("omitLines = %d, want 0", tr.omitLines)
	}
}

// BenchmarkShapeFlood measures the model's view of a flood (`yes`-like output and
// coloured log lines) against a baseline that only counts its lines in the same run:
// the ratio is what shaping costs per byte.
func BenchmarkShapeFlood(b *testing.B) {
	chunk := []byte(strings.Repeat("y\r\n", 10_000) + strings.Repeat("\x1b[32mok\x1b[0m  github.com/x/y/pkg  0.123s\r\n", 500))
	b.Run("baseline-count-lines", func(b *testing.B) {
		b.SetBytes(int64(len(chunk)))
		n := 0
		for b.Loop() {
			n += strings.Count(string(chunk), "\n")
		}
	})
	b.Run("shape", func(b *testing.B) {
		b.SetBytes(int64(len(chunk)))
		tr := &transcript{}
		term := newTerminal(tr.addLine)
		for b.Loop() {
			term.Write(chunk)
		}
	})
}
