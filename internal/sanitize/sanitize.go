// Package sanitize makes untrusted text — process names, file names, paths,
// messages from inside the sandbox — safe to put in what a model or a
// terminal reads: every character that could start a new line, move the
// cursor, set a window title or the clipboard (an escape sequence), or
// reorder the text around it is shown as a visible escape instead (ESC as
// \x1b, a newline as \n, U+202E as \u202e), and bytes that are not UTF-8
// as \xNN. Other text, backslashes included, is left as it is, so Text is
// idempotent and costs one scan when there is nothing to escape.
package sanitize

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Text returns s with every control, line-breaking and bidirectional
// formatting character, and every invalid byte, made visible.
func Text(s string) string {
	i := 0
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		if unsafe(r, size) {
			break
		}
		i += size
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:i])
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case !unsafe(r, size):
			b.WriteString(s[i : i+size])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x100:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
		i += size
	}
	return b.String()
}

// unsafe reports whether rune r (of size bytes; an invalid byte decodes as
// RuneError of size 1) must be escaped.
func unsafe(r rune, size int) bool {
	switch {
	case r == utf8.RuneError && size == 1:
		return true
	case r < 0x20, r == 0x7f, 0x80 <= r && r < 0xa0: // C0, DEL, C1 (CSI, OSC as one byte)
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f, // bidi marks
		0x202a <= r && r <= 0x202e, // embeddings and overrides
		0x2066 <= r && r <= 0x2069, // isolates
		r == 0x2028, r == 0x2029,   // line and paragraph separators
		r == 0xfeff: // a zero-width no-break space, a BOM
		return true
	}
	return false
}
