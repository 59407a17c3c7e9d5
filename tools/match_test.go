package tools

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestPlanEdit(t *testing.T) {
	tests := []struct {
		name          string
		content       string
		old, new      string
		all           bool
		want          string
		tolerant      bool
		normalized    []string
		finalNewline  bool
		failCount     int   // want a failure with this count (0 = not found)
		failLines     []int // and these lines
		fail          bool
		failUnchanged bool
	}{
		{name: "exact once", content: "a\nb\nc\n", old: "b", new: "B", want: "a\nB\nc\n"},
		{name: "multi-line", content: "a\nb\nc\n", old: "a\nb\n", new: "x\n", want: "x\nc\n"},
		{name: "delete", content: "a\nb\nc\n", old: "b\n", new: "", want: "a\nc\n"},
		{name: "twice refused", content: "x\ny\nx\n", old: "x", new: "z", fail: true, failCount: 2, failLines: []int{1, 3}},
		{name: "overlapping counts", content: "aaa", old: "aa", new: "b", fail: true, failCount: 2, failLines: []int{1, 1}},
		{name: "replaceAll", content: "x\ny\nx\n", old: "x", new: "z", all: true, want: "z\ny\nz\n"},
		{name: "replaceAll non-overlapping", content: "aaaa", old: "aa", new: "b", all: true, want: "bb"},
		{name: "not found", content: "a\nb\n", old: "q", new: "r", fail: true},
		{name: "CRLF file, LF text", content: "a\r\nb\r\nc\r\n", old: "a\nb\n", new: "x\ny\nz\n", want: "x\r\ny\r\nz\r\nc\r\n"},
		{name: "CRLF file, CRLF text", content: "a\r\nb\r\n", old: "a\r\n", new: "x\r\n", want: "x\r\nb\r\n"},
		{name: "LF file, CRLF newText", content: "a\nb\n", old: "a", new: "x\r\ny", want: "x\ny\nb\n"},
		{name: "BOM kept", content: "\uFEFFa\nb\n", old: "a", new: "x", want: "\uFEFFx\nb\n"},
		{name: "final newline kept", content: "a\nb\n", old: "b\n", new: "c", want: "a\nc\n", finalNewline: true},
		{name: "final CRLF kept", content: "a\r\nb\r\n", old: "b\n", new: "c", want: "a\r\nc\r\n", finalNewline: true},
		{name: "no final newline stays so", content: "a\nb", old: "b", new: "c", want: "a\nc"},
		{name: "zero-width space added", content: "a\nb\n", old: "b", new: "b\u200b", want: "a\nb\u200b\n"},
		{name: "tolerant trailing space", content: "func f() {  \n\treturn 1\n}\n", old: "func f() {\n\treturn 1\n", new: "func g() {\n\treturn 2\n",
			want: "func g() {\n\treturn 2\n}\n", tolerant: true, normalized: []string{"trailing whitespace"}},
		{name: "tolerant quotes", content: "say(\u201chi\u201d)\nx\n", old: `say("hi")`, new: `say("bye")`,
			want: "say(\"bye\")\nx\n", tolerant: true, normalized: []string{"Unicode quotes"}},
		{name: "tolerant quotes in oldText", content: "say(\"hi\")\n", old: "say(\u201chi\u201d)", new: "ok",
			want: "ok\n", tolerant: true, normalized: []string{"Unicode quotes"}},
		{name: "tolerant dash and nbsp", content: "a \u2014 b\u00a0c\n", old: "a - b c", new: "Z",
			want: "Z\n", tolerant: true, normalized: []string{"Unicode dashes", "Unicode spaces"}},
		{name: "tolerant mixed endings", content: "a\r\nb\nc\r\nd\r\n", old: "a\nb\nc\n", new: "x\n",
			want: "x\r\nd\r\n", tolerant: true, normalized: []string{"line endings"}},
		{name: "exact inside a line with trailing spaces", content: "a  \r\nb\r\n", old: "a", new: "x",
			want: "x  \r\nb\r\n"},
		{name: "tolerant span only", content: "keep \u201cthis\u201d\nfix \u2018me\u2019  \nkeep \u2014\n", old: "fix 'me'\n", new: "fixed\n",
			want: "keep \u201cthis\u201d\nfixed\nkeep \u2014\n", tolerant: true, normalized: []string{"trailing whitespace", "Unicode quotes"}},
		{name: "tolerant twice refused", content: "\u201cx\u201d\n\u201cx\u201d\n", old: `"x"`, new: "y", fail: true, failCount: 2, failLines: []int{1, 2}},
		{name: "whitespace oldText not found", content: "a\n", old: "  ", new: "b", fail: true},
		// An occurrence in the normalized text that starts or ends inside one
		// replaced character has no original span: replaceAll once panicked on
		// it, and a partial match replaced the whole ellipsis.
		{name: "replaceAll inside an ellipsis", content: "wait\u2026\n", old: ".", new: "!", all: true, fail: true},
		{name: "match ends inside an ellipsis", content: "wait\u2026done\n", old: "..done", new: "..finished", fail: true},
		{name: "whole ellipsis matches", content: "wait\u2026done\n", old: "...done", new: "!", want: "wait!\n",
			tolerant: true, normalized: []string{"ellipses"}},
		{name: "replaceAll dashes", content: "x\u2014\u2014y\n", old: "-", new: "+", all: true, want: "x++y\n",
			tolerant: true, normalized: []string{"Unicode dashes"}},
		// A tolerant match that begins at a line break takes the whole CRLF,
		// never leaving a lone "\r" before the replacement's own "\r\n".
		{name: "tolerant match starts at a CRLF", content: "x  \r\nfoo\u201d\r\ny\r\n", old: "\nfoo\"", new: "\nbar",
			want: "x  \r\nbar\r\ny\r\n", tolerant: true},
		// With mixed line endings, oldText's own spelling and the file's both
		// count: neither silently picks one of several occurrences.
		{name: "mixed endings, CRLF oldText, also as LF", content: "a\r\nb\na\nb\nc\nd\n", old: "a\r\nb", new: "X", fail: true, failCount: 2, failLines: []int{1, 3}},
		{name: "mixed endings, LF oldText, also as CRLF", content: "a\r\nb\r\na\nb\r\n", old: "a\nb", new: "X", fail: true, failCount: 2, failLines: []int{1, 3}},
		{name: "mixed endings, replaceAll takes both", content: "a\r\nb\r\na\nb\r\n", old: "a\nb", new: "X", all: true, want: "X\r\nX\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, f := planEdit([]byte(tt.content), tt.old, tt.new, tt.all)
			if tt.fail {
				if f == nil {
					t.Fatalf("succeeded: %q", p.out)
				}
				if f.count != tt.failCount {
					t.Errorf("count = %d, want %d", f.count, tt.failCount)
				}
				if tt.failLines != nil && !reflect.DeepEqual(f.lines, tt.failLines) {
					t.Errorf("lines = %v, want %v", f.lines, tt.failLines)
				}
				return
			}
			if f != nil {
				t.Fatalf("failed: %+v", f)
			}
			if string(p.out) != tt.want {
				t.Errorf("out = %q, want %q", p.out, tt.want)
			}
			if p.tolerant != tt.tolerant {
				t.Errorf("tolerant = %v, want %v", p.tolerant, tt.tolerant)
			}
			if tt.normalized != nil && !reflect.DeepEqual(p.normalized, tt.normalized) {
				t.Errorf("normalized = %q, want %q", p.normalized, tt.normalized)
			}
			if p.finalNewline != tt.finalNewline {
				t.Errorf("finalNewline = %v, want %v", p.finalNewline, tt.finalNewline)
			}
		})
	}
}

func TestPlanEditUnchanged(t *testing.T) {
	// A tolerant match whose replacement equals the original span changes
	// nothing: an error, not an empty edit.
	_, f := planEdit([]byte("say(\u201chi\u201d)\n"), `say("hi")`, "say(\u201chi\u201d)", false)
	if f == nil || !f.unchanged {
		t.Fatalf("failure = %+v, want unchanged", f)
	}
}

func TestNormalizeMapsBack(t *testing.T) {
	in := "a\u2019b  \r\nc\u2014\u00a0\nd\u2026"
	nz, kinds := normalize([]byte(in), true)
	if got, want := string(nz.out), "a'b\nc-\nd..."; got != want {
		t.Fatalf("normalized %q, want %q", got, want)
	}
	if kinds&kindTrailing == 0 || kinds&kindEOL == 0 || kinds&kindQuotes == 0 || kinds&kindDashes == 0 || kinds&kindEllipsis == 0 {
		t.Errorf("kinds = %b", kinds)
	}
	// Every normalized byte maps into the original, in order.
	prev := 0
	for i := range nz.out {
		s, e := nz.startOf(i), nz.endOf(i)
		if s < prev || e <= s || e > len(in) {
			t.Fatalf("byte %d maps to [%d,%d) after %d", i, s, e, prev)
		}
		prev = s
	}
	if s, e := nz.startOf(1), nz.endOf(1); in[s:e] != "\u2019" {
		t.Errorf("quote maps to %q", in[s:e])
	}
}

func TestSimilarLines(t *testing.T) {
	var b strings.Builder
	for i := 1; i <= 60; i++ {
		switch i {
		case 42:
			b.WriteString("  return parse(input, options);\n")
		case 43:
			b.WriteString("}\n")
		default:
			b.WriteString("filler line number " + strings.Repeat("x", i%7) + "\n")
		}
	}
	content := []byte(b.String())
	lines, differs := similarLines(content, "return parse(input, opts);")
	if len(lines) != 1 || lines[0].n != 42 || lines[0].text != "  return parse(input, options);" || differs != 0 {
		t.Errorf("single line: %+v differs %d", lines, differs)
	}
	lines, differs = similarLines(content, "  return parse(input, options);\n}\nextra\n")
	if len(lines) != 3 || lines[0].n != 42 || differs != 44 {
		t.Errorf("block: %+v differs %d", lines, differs)
	}
	if lines, _ := similarLines(content, "zzzzqqqq"); lines != nil {
		t.Errorf("nothing similar: %+v", lines)
	}
}

// FuzzEdit: the matcher never panics; what it changes is exactly the spans it
// reports, never other bytes; and an exact edit followed by its inverse
// restores the file byte for byte.
func FuzzEdit(f *testing.F) {
	f.Add("a\nb\nc\n", "b", "B", false)
	f.Add("a\r\nb\r\n", "a\n", "x\ny\n", false)
	f.Add("\uFEFFx \u201cy\u201d  \r\nz", "x \"y\"\n", "q", false)
	f.Add("aaaa", "aa", "a", true)
	f.Add("a\nb\n", "b\n", "", false)
	f.Add("\xff\xfe\x00", "\xfe", "\u2019", true)
	f.Add("wait\u2026\n", ".", "!", true)
	f.Add("x\r\nfoo\u201d\r\n", "\nfoo\"", "\nbar", false)
	f.Fuzz(func(t *testing.T, content, old, new string, all bool) {
		if old == "" || old == new {
			return
		}
		p, fail := planEdit([]byte(content), old, new, all)
		if fail != nil {
			if fail.count == 0 && !fail.unchanged {
				for _, l := range fail.similar {
					if !utf8.ValidString(l.text) {
						t.Fatalf("quoted line is not UTF-8: %q", l.text)
					}
				}
			}
			return
		}
		// Outside the spans, every byte is the old one.
		c := []byte(content)
		prevOld, prevNew := 0, 0
		for i, s := range p.old {
			n := p.new[i]
			if !bytes.Equal(c[prevOld:s.start], p.out[prevNew:n.start]) {
				t.Fatalf("bytes between spans changed")
			}
			prevOld, prevNew = s.end, n.end
		}
		tail := p.out[prevNew:]
		if p.finalNewline {
			tail = bytes.TrimSuffix(bytes.TrimSuffix(tail, []byte("\n")), []byte("\r"))
		}
		if !bytes.Equal(c[prevOld:], tail) {
			t.Fatalf("bytes after the last span changed")
		}
		// The inverse of an exact single edit restores the file.
		if p.tolerant || p.finalNewline || len(p.old) != 1 {
			return
		}
		oldSpan := content[p.old[0].start:p.old[0].end]
		newSpan := string(p.out[p.new[0].start:p.new[0].end])
		if newSpan == "" || oldSpan == newSpan {
			return
		}
		crlf := isCRLF(bytes.TrimPrefix(p.out, bom))
		if toEOL(oldSpan, crlf) != oldSpan || toEOL(newSpan, crlf) != newSpan {
			return // the file's line-ending style flipped: the inverse converts
		}
		back, fail := planEdit(p.out, newSpan, oldSpan, false)
		if fail != nil {
			return // newText occurs elsewhere too: the inverse is ambiguous
		}
		if back.finalNewline {
			return // the inverse would drop a final newline: kept by design
		}
		if back.tolerant {
			t.Fatalf("inverse edit of an exact unique span matched tolerantly")
		}
		if !bytes.Equal(back.out, c) {
			t.Fatalf("inverse edit: got %q, want %q", back.out, c)
		}
	})
}
