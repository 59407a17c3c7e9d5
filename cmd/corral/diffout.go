package main

import (
	"bytes"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/corralhq/corral/internal/sanitize"
)

// diffOutput is where corral diff writes: on a terminal, through an
// escaper, so that a file's content cannot drive the reviewer's terminal (an
// ESC[2K or a carriage return erasing the lines around it, a title set,
// the clipboard written): control characters are shown as \x1b, \r, ...
// (as the read tool shows them) and the diff keeps its lines. Elsewhere —
// a pipe to git apply, a patch file — the bytes go as git wrote them: an
// escaped patch would apply cleanly with the wrong content (a CRLF file's
// every line would gain a literal \r). done flushes a last line without a
// newline.
func diffOutput(w io.Writer) (out io.Writer, done func() error) {
	if !isTerminal(w) {
		return w, func() error { return nil }
	}
	e := &lineEscaper{w: w}
	return e, e.flush
}

// lineEscaper writes what it is given line by line, each line's content
// escaped with sanitize.Text but for tabs (a diff's indentation) and a
// carriage return just before the newline (a CRLF file's ending, which
// moves nothing that matters).
type lineEscaper struct {
	w   io.Writer
	buf []byte
}

// maxLine bounds what a line without a newline holds before it is written.
const maxLine = 64 << 10

func (e *lineEscaper) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			e.buf = append(e.buf, p...)
			if len(e.buf) > maxLine {
				// Write up to a rune's start, so that no character is cut.
				cut := len(e.buf) - utf8.UTFMax
				for cut > 0 && !utf8.RuneStart(e.buf[cut]) {
					cut--
				}
				if _, err := io.WriteString(e.w, escapeLine(string(e.buf[:cut]))); err != nil {
					return 0, err
				}
				e.buf = append(e.buf[:0], e.buf[cut:]...)
			}
			break
		}
		e.buf = append(e.buf, p[:i]...)
		line := escapeLine(string(e.buf)) + "\n"
		e.buf = e.buf[:0]
		if _, err := io.WriteString(e.w, line); err != nil {
			return 0, err
		}
		p = p[i+1:]
	}
	return n, nil
}

func (e *lineEscaper) flush() error {
	if len(e.buf) == 0 {
		return nil
	}
	_, err := io.WriteString(e.w, escapeLine(string(e.buf)))
	e.buf = e.buf[:0]
	return err
}

// escapeLine escapes one line (without its newline) for a terminal.
func escapeLine(s string) string {
	cr := strings.HasSuffix(s, "\r")
	if cr {
		s = s[:len(s)-1]
	}
	parts := strings.Split(s, "\t")
	for i, p := range parts {
		parts[i] = sanitize.Text(p)
	}
	s = strings.Join(parts, "\t")
	if cr {
		s += "\r"
	}
	return s
}
