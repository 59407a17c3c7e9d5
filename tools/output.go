package tools

import (
	"bufio"
	"bytes"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Limits of the model's view of a command's output.
const (
	// maxModelOutput caps the output text the model gets, in bytes (so also in
	// characters).
	maxModelOutput = 30_000
	// headBudget is the part of maxModelOutput kept from the start of the output;
	// the rest is the tail, where tests and compilers print their summaries.
	headBudget = 4_000
	// maxLineBytes caps one line of the model's view; the rest of a longer line is
	// counted and dropped (the log keeps it).
	maxLineBytes = 8_000
	// maxTermLine caps one line the terminal keeps, for the full log: a line of
	// minified JSON is whole there. The terminal's memory is bounded by it.
	maxTermLine = 1 << 20
)

// terminal turns a raw PTY stream into the plain lines a person would see:
// escape sequences are removed and carriage-return overwrites (progress bars)
// collapse to their final text. Its memory is bounded by its line cap whatever
// the stream holds.
type terminal struct {
	max     int    // the most characters (and bytes) a line keeps
	line    []rune // the current line
	col     int    // the cursor's column in line
	dropped int    // bytes of the current line past max
	state   escState
	params  []byte // parameters of the CSI sequence being read, capped
	partial []byte // an incomplete UTF-8 sequence carried to the next Write
	out     []byte // reused buffer of the finished line
	// emitLine receives each finished line and how many bytes of it were past
	// the cap.
	emitLine func(line []byte, dropped int)
}

type escState uint8

const (
	stGround    escState = iota
	stEsc                // after ESC
	stEscInter           // after ESC and an intermediate byte: one final byte follows
	stCSI                // after ESC [
	stString             // OSC, DCS, APC, PM, SOS: until BEL or ESC \
	stStringEsc          // ESC seen inside a string
)

// newTerminal returns a terminal that keeps at most max bytes of a line.
func newTerminal(max int, emit func(line []byte, dropped int)) *terminal {
	return &terminal{max: max, emitLine: emit}
}

// Write feeds raw output. It never fails.
func (t *terminal) Write(p []byte) (int, error) {
	n := len(p)
	for len(t.partial) > 0 && len(p) > 0 {
		// Complete the rune split across writes.
		t.partial = append(t.partial, p[0])
		p = p[1:]
		if utf8.FullRune(t.partial) {
			r, size := utf8.DecodeRune(t.partial)
			rest := append([]byte(nil), t.partial[size:]...)
			t.partial = t.partial[:0]
			t.rune(r)
			t.Write(rest) // bytes that were not part of an invalid sequence
		}
	}
	for len(p) > 0 {
		b := p[0]
		if b < utf8.RuneSelf {
			if t.state == stGround {
				// Fast path: printable ASCII appended at the end of the line,
				// and line ends.
				if b >= 0x20 && b < 0x7f && t.col == len(t.line) && t.col < t.max {
					t.line = append(t.line, rune(b))
					t.col++
					p = p[1:]
					continue
				}
				if b == '\n' {
					t.finish()
					p = p[1:]
					continue
				}
			}
			t.rune(rune(b))
			p = p[1:]
			continue
		}
		if !utf8.FullRune(p) {
			t.partial = append(t.partial[:0], p...)
			return n, nil
		}
		r, size := utf8.DecodeRune(p)
		t.rune(r)
		p = p[size:]
	}
	return n, nil
}

// Close ends the stream: a last line without a newline is emitted.
func (t *terminal) Close() {
	if len(t.partial) > 0 {
		t.partial = t.partial[:0]
		t.rune(utf8.RuneError)
	}
	if len(t.line) > 0 || t.dropped > 0 {
		t.finish()
	}
}

func (t *terminal) rune(r rune) {
	if t.state != stGround {
		switch r {
		case '\n':
			// No sequence spans a line break: a malformed or unterminated one
			// must not swallow the line structure, or the rest of the output.
			t.state = stGround
			t.finish()
			return
		case 0x18, 0x1a: // CAN, SUB cancel a sequence
			t.state = stGround
			return
		}
	}
	switch t.state {
	case stEsc:
		switch {
		case r == '[':
			t.state, t.params = stCSI, t.params[:0]
		case r == ']' || r == 'P' || r == '_' || r == '^' || r == 'X':
			t.state = stString
		case r >= 0x20 && r <= 0x2f:
			t.state = stEscInter
		default:
			t.state = stGround
		}
		return
	case stEscInter:
		if r < 0x20 || r > 0x2f {
			t.state = stGround
		}
		return
	case stCSI:
		switch {
		case r >= 0x40 && r <= 0x7e:
			t.state = stGround
			t.csi(byte(r))
		case r >= 0x20 && r <= 0x3f:
			if len(t.params) < 32 {
				t.params = append(t.params, byte(r))
			}
		case r == 0x1b:
			t.state = stEsc // a new sequence cuts this one short
		default:
			t.state = stGround // malformed: drop it
		}
		return
	case stString:
		switch r {
		case 0x07:
			t.state = stGround
		case 0x1b:
			t.state = stStringEsc
		}
		return
	case stStringEsc:
		if r == '\\' {
			t.state = stGround
		} else {
			t.state = stString
		}
		return
	}
	switch r {
	case '\n':
		t.finish()
	case '\r':
		t.col = 0
	case '\b':
		if t.col > 0 {
			t.col--
		}
	case 0x1b:
		t.state = stEsc
	case '\t':
		t.put(r)
	default:
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return // other control characters show nothing
		}
		t.put(r)
	}
}

// put writes r at the cursor, as a terminal would.
func (t *terminal) put(r rune) {
	if t.col < len(t.line) {
		t.line[t.col] = r
		t.col++
		return
	}
	if t.col >= t.max {
		t.dropped += utf8.RuneLen(r)
		t.col++
		return
	}
	for len(t.line) < t.col {
		t.line = append(t.line, ' ')
	}
	t.line = append(t.line, r)
	t.col++
}

// csi acts on the control sequences that change what a line shows; the others
// (colours, cursor up, modes) are dropped.
func (t *terminal) csi(final byte) {
	n := t.param()
	switch final {
	case 'K': // erase in line
		switch n {
		case 0:
			if t.col < len(t.line) {
				t.line = t.line[:t.col]
			}
			t.dropped = 0
		case 1:
			for i := 0; i < t.col && i < len(t.line); i++ {
				t.line[i] = ' '
			}
		case 2:
			t.line, t.dropped = t.line[:0], 0
		}
	case 'G': // cursor to column n
		t.col = max(n-1, 0)
	case 'C': // cursor forward
		t.col += max(n, 1)
	case 'D': // cursor back
		t.col = max(t.col-max(n, 1), 0)
	}
	t.col = min(t.col, t.max)
}

// param returns the first numeric parameter of the CSI sequence being read, 0
// when there is none. It saturates past the line cap, as no line is longer: a
// program's "\x1b[99999999999999999999C" must not overflow the column.
func (t *terminal) param() int {
	n := 0
	for _, c := range t.params {
		if c < '0' || c > '9' {
			break
		}
		n = min(n*10+int(c-'0'), t.max+1)
	}
	return n
}

func (t *terminal) finish() {
	end := len(t.line)
	for end > 0 && (t.line[end-1] == ' ' || t.line[end-1] == '\t') {
		end--
	}
	t.out = t.out[:0]
	// The line holds at most max characters; its bytes are capped too.
	for i, r := range t.line[:end] {
		if len(t.out)+utf8.RuneLen(r) > t.max {
			for _, r := range t.line[i:end] {
				t.dropped += utf8.RuneLen(r)
			}
			break
		}
		if r < utf8.RuneSelf {
			t.out = append(t.out, byte(r))
		} else {
			t.out = utf8.AppendRune(t.out, r)
		}
	}
	dropped := t.dropped
	t.line, t.col, t.dropped = t.line[:0], 0, 0
	t.emitLine(t.out, dropped)
}

// transcript keeps the model's view of a command's output — a small head and a
// large tail of its lines — and writes every line to the full log, capped.
type transcript struct {
	head       []byte // the first lines, up to headBudget
	headFull   bool
	tail       []byte // the last lines; trimmed to the budget at line boundaries
	omitLines  int64  // lines dropped between head and tail
	omitBytes  int64
	totalLines int64
	totalBytes int64
	cutBuf     []byte // reused for a long line cut for the model's view

	log        *bufio.Writer
	logBytes   int64 // bytes written to the log
	logMax     int64
	logDropped int64 // bytes past logMax, only counted
}

func (tr *transcript) addLine(line []byte, dropped int) {
	tr.totalLines++
	tr.totalBytes += int64(len(line)+dropped) + 1
	tr.writeLog(line, dropped)
	if len(line) > maxLineBytes || dropped > 0 {
		// The model's view of a long line: its start, and how much is left
		// out (the log has it).
		cut := min(len(line), maxLineBytes)
		for cut > 0 && cut < len(line) && !utf8.RuneStart(line[cut]) {
			cut--
		}
		tr.cutBuf = fmt.Appendf(append(tr.cutBuf[:0], line[:cut]...), " … [line cut: %d more bytes]", len(line)-cut+dropped)
		line = tr.cutBuf
	}
	if !tr.headFull {
		if len(tr.head)+len(line)+1 <= headBudget {
			tr.head = append(append(tr.head, line...), '\n')
			return
		}
		tr.headFull = true
	}
	tr.tail = append(append(tr.tail, line...), '\n')
	if budget := tr.tailBudget(); len(tr.tail) > 2*budget {
		tr.trimTail(budget)
	}
}

func (tr *transcript) tailBudget() int { return maxModelOutput - len(tr.head) }

// trimTail drops the oldest lines of the tail until it fits budget.
func (tr *transcript) trimTail(budget int) {
	if len(tr.tail) <= budget {
		return
	}
	cut := len(tr.tail) - budget
	// Cut at the start of a line.
	if i := bytes.IndexByte(tr.tail[cut-1:], '\n'); i >= 0 {
		cut += i
	} else {
		cut = len(tr.tail)
	}
	dropped := tr.tail[:cut]
	tr.omitLines += int64(bytes.Count(dropped, []byte{'\n'}))
	tr.omitBytes += int64(len(dropped))
	tr.tail = append(tr.tail[:0], tr.tail[cut:]...)
}

func (tr *transcript) writeLog(line []byte, dropped int) {
	if tr.log == nil {
		return
	}
	n := int64(len(line)) + 1
	// Past the cap everything is only counted, short lines too: the log is
	// the output's start, never a start with holes.
	if tr.logDropped > 0 || tr.logBytes+n > tr.logMax {
		tr.logDropped += n + int64(dropped)
		return
	}
	tr.log.Write(line)
	if dropped > 0 {
		m, _ := fmt.Fprintf(tr.log, " … [line cut: %d more bytes]", dropped)
		n += int64(m)
	}
	tr.log.WriteByte('\n')
	tr.logBytes += n
}

// text is the model's view: head, the omission marker, tail.
func (tr *transcript) text(logPath string) string {
	tr.trimTail(tr.tailBudget())
	var b bytes.Buffer
	b.Write(tr.head)
	if tr.omitLines > 0 {
		fmt.Fprintf(&b, "[... %d lines (%s) left out; the full log is %s ...]\n", tr.omitLines, byteSize(tr.omitBytes), logPath)
	}
	b.Write(tr.tail)
	return string(bytes.TrimRight(b.Bytes(), "\n"))
}

// byteSize renders n bytes for a person: 812 B, 14.2 KB, 3.1 MB.
func byteSize(n int64) string {
	switch {
	case n < 1000:
		return fmt.Sprintf("%d B", n)
	case n < 1000_000:
		return fmt.Sprintf("%.1f KB", float64(n)/1000)
	case n < 1000_000_000:
		return fmt.Sprintf("%.1f MB", float64(n)/1000_000)
	}
	return fmt.Sprintf("%.1f GB", float64(n)/1000_000_000)
}

// PlainText renders raw terminal output as a person would see it: escape
// sequences removed, carriage-return overwrites collapsed.
func PlainText(raw string) string {
	var b bytes.Buffer
	t := newTerminal(maxLineBytes, func(line []byte, dropped int) {
		b.Write(line)
		if dropped > 0 {
			fmt.Fprintf(&b, " … [line cut: %d more bytes]", dropped)
		}
		b.WriteByte('\n')
	})
	t.Write([]byte(raw))
	t.Close()
	return strings.TrimSuffix(b.String(), "\n")
}
