package sanitize

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestText(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"plain name.go", "plain name.go"},
		{"sleep 30\nExit code: 0", `sleep 30\nExit code: 0`},
		{"\x1b]52;c;ZXZpbA==\x07", `\x1b]52;c;ZXZpbA==\x07`},
		{"\x1b]0;title\x1b\\", `\x1b]0;title\x1b\`},
		{"a\rb\tc\x7f", `a\rb\tc\x7f`},
		{"\u009b31m", `\x9b31m`},
		{"bad\xffbyte", `bad\xffbyte`},
		{"txt.\u202egnp", `txt.\u202egnp`},
		{"é ü 日本 🙂", "é ü 日本 🙂"},
		{`back\slash`, `back\slash`},
	} {
		got := Text(tt.in)
		if got != tt.want {
			t.Errorf("Text(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if Text(got) != got {
			t.Errorf("Text is not idempotent on %q", got)
		}
	}
}

func FuzzText(f *testing.F) {
	f.Add("a\x1b[2Jb\nc\u202e\xff")
	f.Fuzz(func(t *testing.T, s string) {
		out := Text(s)
		if !utf8.ValidString(out) {
			t.Fatalf("Text(%q) = %q is not UTF-8", s, out)
		}
		for _, r := range out {
			if unsafe(r, utf8.RuneLen(r)) {
				t.Fatalf("Text(%q) = %q keeps %U", s, out, r)
			}
		}
		if strings.ContainsAny(out, "\n\r\x1b") {
			t.Fatalf("Text(%q) = %q", s, out)
		}
		if Text(out) != out {
			t.Fatalf("not idempotent on %q", s)
		}
	})
}
