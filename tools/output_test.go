package tools

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

func termLines(t *testing.T, chunks ...string) []string {
	t.Helper()
	var lines []string
	// The terminal's tests use the model's line cap, where the marker shows.
	term := newTerminal(maxLineBytes, func(l []byte, dropped int) {
		if dropped > 0 {
			l = fmt.Appendf(l, " … [line cut: %d more bytes]", dropped)
		}
		lines = append(lines, string(l))
	})
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
		tr.addLine([]byte(fmt.Sprintf("line %d", i)), 0)
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
		tr.addLine([]byte(l), 0)
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
		term := newTerminal(maxTermLine, tr.addLine)
		for b.Loop() {
			term.Write(chunk)
		}
	})
}

// TestTranscriptArithmetic: whatever the lines, what the model sees and what is
// left out add up to the whole, in lines and in bytes, and the view stays
// within the cap; output of exactly maxModelOutput bytes is shown whole.
func TestTranscriptArithmetic(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 200; round++ {
		tr := &transcript{}
		var all []string
		n := rng.IntN(3000)
		for i := 0; i < n; i++ {
			var l string
			switch rng.IntN(10) {
			case 0:
				l = ""
			case 1:
				l = strings.Repeat("w", rng.IntN(maxLineBytes))
			default:
				l = fmt.Sprintf("line %d %s", i, strings.Repeat("x", rng.IntN(80)))
			}
			all = append(all, l)
			tr.addLine([]byte(l), 0)
		}
		text := tr.text("/logs/x.log")
		var wantBytes int64
		for _, l := range all {
			wantBytes += int64(len(l)) + 1
		}
		if tr.totalLines != int64(n) || tr.totalBytes != wantBytes {
			t.Fatalf("round %d: totals %d lines %d bytes, want %d and %d", round, tr.totalLines, tr.totalBytes, n, wantBytes)
		}
		if tr.omitLines == 0 {
			if text != strings.TrimRight(strings.Join(all, "\n"), "\n") {
				t.Fatalf("round %d: nothing left out, yet the text differs from the output", round)
			}
			continue
		}
		head, tail := string(tr.head), string(tr.tail)
		marker := fmt.Sprintf("[... %d lines (%s) left out; the full log is /logs/x.log ...]\n", tr.omitLines, byteSize(tr.omitBytes))
		if text != strings.TrimRight(head+marker+tail, "\n") {
			t.Fatalf("round %d: the text is not head, marker, tail", round)
		}
		shownLines := int64(strings.Count(head, "\n") + strings.Count(tail, "\n"))
		shownBytes := int64(len(head) + len(tail))
		if shownLines+tr.omitLines != tr.totalLines {
			t.Errorf("round %d: %d lines shown + %d left out != %d", round, shownLines, tr.omitLines, tr.totalLines)
		}
		if shownBytes+tr.omitBytes != tr.totalBytes {
			t.Errorf("round %d: %d bytes shown + %d left out != %d", round, shownBytes, tr.omitBytes, tr.totalBytes)
		}
		if shownBytes > maxModelOutput {
			t.Errorf("round %d: %d bytes of output shown, over %d", round, shownBytes, maxModelOutput)
		}
		// The head is a prefix of the output, the tail a suffix.
		whole := strings.Join(all, "\n") + "\n"
		if !strings.HasPrefix(whole, head) || !strings.HasSuffix(whole, tail) || tail == "" {
			t.Errorf("round %d: head or tail is not the output's own", round)
		}
	}

	// Exactly at the cap: whole; one byte more: one line left out.
	for _, extra := range []int{0, 1} {
		tr := &transcript{}
		line := strings.Repeat("z", 99) // 100 bytes with its newline
		for i := 0; i < maxModelOutput/100-1; i++ {
			tr.addLine([]byte(line), 0)
		}
		tr.addLine([]byte(strings.Repeat("z", 99+extra)), 0)
		text := tr.text("x")
		if got := tr.omitLines; got != int64(extra) {
			t.Errorf("%d bytes of output: %d lines left out, want %d", maxModelOutput+extra, got, extra)
		}
		if extra == 0 && len(text) != maxModelOutput-1 {
			t.Errorf("output of exactly %d bytes shown as %d", maxModelOutput, len(text))
		}
	}
}

// TestTerminalHostileSequences: sequences a program may print on purpose never
// crash the terminal (a huge cursor move once overflowed the column and
// panicked) and never let one line grow past maxLineBytes bytes.
func TestTerminalHostileSequences(t *testing.T) {
	tests := []struct {
		name   string
		chunks []string
		want   []string
	}{
		{"huge cursor forward", []string{"abc\x1b[9999999999999999999Cx\n"}, []string{"abc … [line cut: 1 more bytes]"}},
		{"huge cursor back", []string{"abc\x1b[99999999999999999999999999999Dx\n"}, []string{"xbc"}},
		{"huge column", []string{"abc\x1b[9223372036854775807Gx\nok\n"}, []string{"abc … [line cut: 1 more bytes]", "ok"}},
		{"huge erase", []string{"abc\x1b[99999999999999999999Kd\n"}, []string{"abcd"}},
		{"negative looking", []string{"abc\x1b[-5Cx\n"}, []string{"abc x"}},
		{"unterminated CSI ends at the line break", []string{"a\x1b[12;", "34", "\n", "b\n"}, []string{"a", "b"}},
		{"CSI cut short by another", []string{"a\x1b[12\x1b[31mb\n"}, []string{"ab"}},
		{"unterminated OSC ends at the line break", []string{"a\x1b]0;ti", "tle\nstill", "\x07b\n"}, []string{"a", "stillb"}},
		{"OSC then a flood stays visible", []string{"\x1b]", strings.Repeat("out\n", 3)}, []string{"", "out", "out"}},
		{"ESC at the end of a write", []string{"a\x1b", "[1mb\n"}, []string{"ab"}},
		{"CR flood", []string{strings.Repeat("\r", 100_000) + "done\n"}, []string{"done"}},
		{"C1 CSI as UTF-8 dropped", []string{"a\u009bb\n"}, []string{"ab"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := termLines(t, tt.chunks...)
			if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", tt.want) {
				t.Errorf("lines = %q, want %q", got, tt.want)
			}
		})
	}

	// A line of four-byte characters is cut at maxLineBytes bytes, not characters.
	got := termLines(t, strings.Repeat("😀", maxLineBytes)+"\n")
	if len(got) != 1 {
		t.Fatalf("got %d lines", len(got))
	}
	body, marker, _ := strings.Cut(got[0], " … [line cut: ")
	if len(body) > maxLineBytes || marker != fmt.Sprintf("%d more bytes]", 4*maxLineBytes-len(body)) {
		t.Errorf("a line of %d bytes became %d bytes with marker %q", 4*maxLineBytes, len(body), marker)
	}
}

// TestTranscriptLogCap: the log keeps the output's first lines up to the cap
// and only counts the rest — a short line after a long one that did not fit is
// not written either, so the log never has a hole.
func TestTranscriptLogCap(t *testing.T) {
	var buf bytes.Buffer
	tr := &transcript{log: bufio.NewWriter(&buf), logMax: 20}
	for _, l := range []string{"0123456789", "this line does not fit", "short", "x"} {
		tr.addLine([]byte(l), 0)
	}
	tr.log.Flush()
	if got, want := buf.String(), "0123456789\n"; got != want {
		t.Errorf("log = %q, want %q", got, want)
	}
	if tr.logBytes+tr.logDropped != tr.totalBytes {
		t.Errorf("%d bytes logged + %d dropped != %d", tr.logBytes, tr.logDropped, tr.totalBytes)
	}
}

// FuzzTerminal: whatever a program prints, split however across writes, the
// terminal never panics, emits valid UTF-8, keeps each line within its cap,
// and the transcript's view and what it left out add up to the whole.
func FuzzTerminal(f *testing.F) {
	f.Add([]byte("a\x1b[31mb\x1b[0m\r\nc\rd\n"), uint8(3))
	f.Add([]byte("abc\x1b[9999999999999999999Cx\n"), uint8(1))
	f.Add([]byte("\x1b]0;t\x07\xe2\x82\xac\b\b\x1b[2K\x1b[5G!\n"), uint8(2))
	f.Fuzz(func(t *testing.T, raw []byte, split uint8) {
		tr := &transcript{}
		term := newTerminal(maxTermLine, func(line []byte, dropped int) {
			if !utf8.Valid(line) {
				t.Fatalf("line is not UTF-8: %q", line)
			}
			if len(line) > maxTermLine {
				t.Fatalf("line of %d bytes", len(line))
			}
			tr.addLine(line, dropped)
		})
		step := int(split)%7 + 1
		for i := 0; i < len(raw); i += step {
			term.Write(raw[i:min(i+step, len(raw))])
		}
		term.Close()
		tr.text("log")
		shown := int64(strings.Count(string(tr.head), "\n") + strings.Count(string(tr.tail), "\n"))
		if shown+tr.omitLines != tr.totalLines {
			t.Fatalf("%d lines shown + %d left out != %d", shown, tr.omitLines, tr.totalLines)
		}
	})
}

// TestLongLineWholeInLog: the model's view cuts a long line; the log keeps it
// whole, up to the terminal's cap, past which the log says how much is left out.
func TestLongLineWholeInLog(t *testing.T) {
	var buf bytes.Buffer
	tr := &transcript{log: bufio.NewWriter(&buf), logMax: 10 << 20}
	term := newTerminal(maxTermLine, tr.addLine)
	long := strings.Repeat("j", 50_000)
	huge := strings.Repeat("h", maxTermLine+7)
	term.Write([]byte(long + "\r\n" + huge + "\nend\n"))
	term.Close()
	tr.log.Flush()
	want := long + "\n" + strings.Repeat("h", maxTermLine) + " … [line cut: 7 more bytes]\nend\n"
	if buf.String() != want {
		t.Errorf("log is %d bytes, want %d: the long line whole, the huge one cut at %d with a marker", buf.Len(), len(want), maxTermLine)
	}
	view := tr.text("log")
	wantView := strings.Repeat("j", maxLineBytes) + " … [line cut: 42000 more bytes]\n" +
		strings.Repeat("h", maxLineBytes) + fmt.Sprintf(" … [line cut: %d more bytes]\nend", maxTermLine+7-maxLineBytes)
	if view != wantView {
		t.Errorf("model's view is %d bytes, want %d: each long line cut at %d with the count of what the log has", len(view), len(wantView), maxLineBytes)
	}
	if tr.totalBytes != int64(len(long)+len(huge)+len("end")+3) {
		t.Errorf("totalBytes = %d", tr.totalBytes)
	}
}
