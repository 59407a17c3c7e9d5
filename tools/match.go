package tools

import (
	"bytes"
	"sort"
	"strings"
	"unicode/utf8"
)

// This file holds edit's pure core: find oldText in a file's content, exactly or
// tolerantly, and build the new content. It touches no file.

var bom = []byte{0xEF, 0xBB, 0xBF}

// isCRLF reports whether content's line endings are mostly CRLF.
func isCRLF(content []byte) bool {
	crlf := bytes.Count(content, []byte("\r\n"))
	if crlf == 0 {
		return false
	}
	lf := bytes.Count(content, []byte("\n"))
	return crlf*2 >= lf
}

// toEOL rewrites s's line endings as LF, or CRLF when crlf.
func toEOL(s string, crlf bool) string {
	if crlf {
		if !strings.Contains(s, "\n") {
			return s
		}
		return strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\n", "\r\n")
	}
	if !strings.Contains(s, "\r\n") {
		return s
	}
	return strings.ReplaceAll(s, "\r\n", "\n")
}

// span is a byte range [start, end).
type span struct{ start, end int }

// editPlan is a successful match: the new content and where the change is.
type editPlan struct {
	out []byte
	// old are the replaced ranges of the old content, new the inserted ranges
	// of out, in order.
	old, new []span
	// tolerant is set when oldText matched only after normalising; normalized
	// says what differed.
	tolerant   bool
	normalized []string
	// finalNewline is set when a newline the replacement dropped at the end of
	// the file was put back.
	finalNewline bool
}

// matchFailure says why oldText could not be applied.
type matchFailure struct {
	// count is 0 when oldText was not found, else the number of occurrences.
	count int
	// lines are the first line of each occurrence.
	lines []int
	// tolerant is set when the occurrences were found only after normalising.
	tolerant bool
	// similar are the lines of the file closest to oldText (count == 0);
	// differs is the first of them that differs from oldText, 0 if unknown.
	similar []numberedLine
	differs int
	// unchanged is set when the replacement would leave the file as it is.
	unchanged bool
}

type numberedLine struct {
	n    int
	text string
}

// planEdit replaces oldText with newText in content: exactly once, or every
// occurrence when all. newText takes the file's line endings. Without an exact
// occurrence it tries once more after normalising line endings, trailing
// whitespace and Unicode punctuation and spaces, and then replaces the original
// bytes of the matched span only.
func planEdit(content []byte, oldText, newText string, all bool) (editPlan, *matchFailure) {
	start := 0
	if bytes.HasPrefix(content, bom) {
		start = len(bom)
	}
	body := content[start:]
	crlf := isCRLF(body)
	repl := toEOL(newText, crlf)

	// The exact text, and the text with the file's line endings: a model
	// writes "\n" whatever the file uses. Both count, so that in a file with
	// mixed line endings neither spelling silently picks one occurrence out of
	// several.
	cands := []string{oldText}
	if c := toEOL(oldText, crlf); c != oldText {
		cands = append(cands, c)
	}
	var spans []span
	for _, c := range cands {
		for _, j := range findAll(body, []byte(c), !all) {
			spans = append(spans, span{start + j, start + j + len(c)})
		}
	}
	if len(spans) > 0 {
		sort.Slice(spans, func(i, j int) bool { return spans[i].start < spans[j].start })
		if len(spans) > 1 && !all {
			return editPlan{}, ambiguous(content, spans, false)
		}
		spans = disjoint(spans)
		if unchanged(content, spans, repl) {
			return editPlan{}, &matchFailure{count: len(spans), unchanged: true}
		}
		return apply(content, spans, repl, crlf), nil
	}

	// Tolerant match.
	nOld, oldKinds := normalize([]byte(oldText), false)
	if len(bytes.TrimSpace(nOld.out)) == 0 {
		return editPlan{}, notFound(content, oldText)
	}
	nBody, _ := normalize(body, true)
	// Every occurrence, overlapping ones too; one that starts or ends inside a
	// replaced character (one dot of an ellipsis) is no occurrence: it has no
	// span of the original of its own.
	spans = nil
	for _, j := range findAll(nBody.out, nOld.out, true) {
		if s, ok := nBody.span(j, j+len(nOld.out)); ok {
			spans = append(spans, span{start + s.start, start + s.end})
		}
	}
	if len(spans) == 0 {
		return editPlan{}, notFound(content, oldText)
	}
	if len(spans) > 1 && !all {
		return editPlan{}, ambiguous(content, spans, true)
	}
	spans = disjoint(spans)
	kinds := oldKinds
	for _, s := range spans {
		_, k := normalize(content[s.start:s.end], false)
		kinds |= k
	}
	if unchanged(content, spans, repl) {
		return editPlan{}, &matchFailure{count: len(spans), unchanged: true, tolerant: true}
	}
	p := apply(content, spans, repl, crlf)
	p.tolerant = true
	p.normalized = kinds.names()
	if len(p.normalized) == 0 {
		p.normalized = []string{"line endings"}
	}
	return p, nil
}

// findAll returns the offsets of needle in hay; overlapping occurrences count
// when overlap is set (to judge uniqueness), else the scan resumes after each
// one (to replace them all).
func findAll(hay, needle []byte, overlap bool) []int {
	var idx []int
	for off := 0; off <= len(hay)-len(needle); {
		i := bytes.Index(hay[off:], needle)
		if i < 0 {
			break
		}
		idx = append(idx, off+i)
		if overlap {
			off += i + 1
		} else {
			off += i + len(needle)
		}
	}
	return idx
}

// disjoint keeps the spans, sorted by start, that do not overlap one kept
// before them: replaceAll replaces "aa" in "aaa" once.
func disjoint(spans []span) []span {
	out := spans[:1]
	for _, s := range spans[1:] {
		if s.start >= out[len(out)-1].end {
			out = append(out, s)
		}
	}
	return out
}

// unchanged reports whether replacing every span of content with repl would
// leave content as it is.
func unchanged(content []byte, spans []span, repl string) bool {
	for _, s := range spans {
		if string(content[s.start:s.end]) != repl {
			return false
		}
	}
	return true
}

// lineRanges returns the 1-based first and last line of each span of content.
func lineRanges(content []byte, spans []span) [][2]int {
	out := make([][2]int, len(spans))
	line, at := 1, 0
	for i, sp := range spans {
		line += bytes.Count(content[at:sp.start], []byte("\n"))
		at = sp.start
		last := line
		if sp.end > sp.start {
			inner := content[sp.start:sp.end]
			last += bytes.Count(inner, []byte("\n"))
			if inner[len(inner)-1] == '\n' {
				last-- // the span ends with its line
			}
		}
		out[i] = [2]int{line, last}
	}
	return out
}

// ambiguous is the failure of an edit whose oldText occurs at every one of
// spans, sorted by start.
func ambiguous(content []byte, spans []span, tolerant bool) *matchFailure {
	lines := make([]int, len(spans))
	for i, r := range lineRanges(content, spans) {
		lines[i] = r[0]
	}
	return &matchFailure{count: len(spans), lines: lines, tolerant: tolerant}
}

// notFound is the failure of an edit whose oldText does not occur in content.
func notFound(content []byte, oldText string) *matchFailure {
	sim, differs := similarLines(content, oldText)
	return &matchFailure{similar: sim, differs: differs}
}

// apply replaces spans of content with repl. When the last span reaches the end
// of a file that ended with a line ending and the result no longer does, the
// line ending is put back: an edit does not drop the final newline by accident.
func apply(content []byte, spans []span, repl string, crlf bool) editPlan {
	size := len(content) + len(spans)*len(repl)
	for _, s := range spans {
		size -= s.end - s.start
	}
	out := make([]byte, 0, size+2)
	p := editPlan{old: spans, new: make([]span, len(spans))}
	prev := 0
	for i, s := range spans {
		out = append(out, content[prev:s.start]...)
		p.new[i] = span{len(out), len(out) + len(repl)}
		out = append(out, repl...)
		prev = s.end
	}
	out = append(out, content[prev:]...)
	if last := spans[len(spans)-1]; last.end == len(content) && bytes.HasSuffix(content, []byte("\n")) &&
		len(out) > 0 && !bytes.HasSuffix(out, []byte("\n")) {
		if crlf {
			out = append(out, '\r', '\n')
		} else {
			out = append(out, '\n')
		}
		p.finalNewline = true
	}
	p.out = out
	return p
}

// normKind is a set of the differences normalize smoothed over.
type normKind uint8

const (
	kindEOL normKind = 1 << iota
	kindTrailing
	kindQuotes
	kindDashes
	kindSpaces
	kindEllipsis
)

func (k normKind) names() []string {
	var out []string
	for _, n := range []struct {
		k    normKind
		name string
	}{
		{kindEOL, "line endings"},
		{kindTrailing, "trailing whitespace"},
		{kindQuotes, "Unicode quotes"},
		{kindDashes, "Unicode dashes"},
		{kindSpaces, "Unicode spaces"},
		{kindEllipsis, "ellipses"},
	} {
		if k&n.k != 0 {
			out = append(out, n.name)
		}
	}
	return out
}

// normalized is text after normalize, with the map back to the original bytes.
type normalized struct {
	out  []byte
	segs []seg
}

// seg maps normalized bytes [n, n+nlen) to original bytes [o, o+olen). An
// identity run has nlen == olen and maps byte for byte; a replaced character
// maps as a whole. Deleted original bytes fall between segments.
type seg struct {
	n, o, nlen, olen int
	replaced         bool
}

// startOf returns the original offset where normalized byte n begins.
func (nz *normalized) startOf(n int) int {
	s := nz.segAt(n)
	if s.replaced {
		return s.o
	}
	return s.o + n - s.n
}

// endOf returns the original offset just past normalized byte n.
func (nz *normalized) endOf(n int) int {
	s := nz.segAt(n)
	if s.replaced {
		return s.o + s.olen
	}
	return s.o + n - s.n + 1
}

// span maps the normalized bytes [from, to) back to the original. It fails
// when the range starts or ends inside a replaced character: "..." matched
// within an ellipsis has no original bytes of its own.
func (nz *normalized) span(from, to int) (span, bool) {
	if s := nz.segAt(from); s.replaced && s.n != from {
		return span{}, false
	}
	if s := nz.segAt(to - 1); s.replaced && s.n+s.nlen != to {
		return span{}, false
	}
	return span{nz.startOf(from), nz.endOf(to - 1)}, true
}

func (nz *normalized) segAt(n int) seg {
	i := sort.Search(len(nz.segs), func(i int) bool { return nz.segs[i].n+nz.segs[i].nlen > n })
	return nz.segs[i]
}

func (nz *normalized) keep(o int, b []byte) {
	if len(b) == 0 {
		return
	}
	if k := len(nz.segs) - 1; k >= 0 {
		if l := &nz.segs[k]; !l.replaced && l.o+l.olen == o && l.n+l.nlen == len(nz.out) {
			l.nlen += len(b)
			l.olen += len(b)
			nz.out = append(nz.out, b...)
			return
		}
	}
	nz.segs = append(nz.segs, seg{n: len(nz.out), o: o, nlen: len(b), olen: len(b)})
	nz.out = append(nz.out, b...)
}

func (nz *normalized) replace(o, olen int, rep string) {
	nz.segs = append(nz.segs, seg{n: len(nz.out), o: o, nlen: len(rep), olen: olen, replaced: true})
	nz.out = append(nz.out, rep...)
}

// normalize smooths over what a model gets wrong when it retypes text: CRLF
// becomes LF, whitespace at the end of a line goes (also at the end of the text
// when trimEnd), and typographic quotes, dashes, spaces and ellipses become
// ASCII.
func normalize(b []byte, trimEnd bool) (normalized, normKind) {
	nz := normalized{out: make([]byte, 0, len(b))}
	var kinds normKind
	for pos := 0; pos < len(b); {
		nl := bytes.IndexByte(b[pos:], '\n')
		lineEnd, next := len(b), len(b)
		if nl >= 0 {
			lineEnd, next = pos+nl, pos+nl+1
		}
		body := lineEnd
		crlf := body > pos && b[body-1] == '\r' && nl >= 0
		if crlf {
			body--
			kinds |= kindEOL
		}
		if nl >= 0 || trimEnd {
			trimmed := trimTrailingSpace(b[pos:body])
			if pos+trimmed < body {
				kinds |= kindTrailing
			}
			body = pos + trimmed
		}
		kinds |= normLine(&nz, b, pos, body)
		switch {
		case crlf:
			// "\r\n" maps as one: a match never takes or leaves half of it.
			nz.replace(lineEnd-1, 2, "\n")
		case nl >= 0:
			nz.keep(lineEnd, b[lineEnd:next])
		}
		pos = next
	}
	return nz, kinds
}

// normLine appends b[from:to] to nz, replacing typographic characters.
func normLine(nz *normalized, b []byte, from, to int) normKind {
	var kinds normKind
	run := from
	for i := from; i < to; {
		c := b[i]
		if c < utf8.RuneSelf {
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:to])
		rep, k := typographic(r)
		if k == 0 {
			i += size
			continue
		}
		nz.keep(run, b[run:i])
		nz.replace(i, size, rep)
		kinds |= k
		i += size
		run = i
	}
	nz.keep(run, b[run:to])
	return kinds
}

func typographic(r rune) (string, normKind) {
	switch r {
	case '\u2018', '\u2019', '\u201A', '\u201B', '\u2032', '\u2035':
		return "'", kindQuotes
	case '\u201C', '\u201D', '\u201E', '\u201F', '\u2033', '\u2036', '\u00AB', '\u00BB':
		return `"`, kindQuotes
	case '\u2010', '\u2011', '\u2012', '\u2013', '\u2014', '\u2015', '\u2212':
		return "-", kindDashes
	case '\u00A0', '\u2000', '\u2001', '\u2002', '\u2003', '\u2004', '\u2005', '\u2006',
		'\u2007', '\u2008', '\u2009', '\u200A', '\u202F', '\u205F', '\u3000':
		return " ", kindSpaces
	case '\u2026':
		return "...", kindEllipsis
	}
	return "", 0
}

// trimTrailingSpace returns the length of line without its trailing blanks
// (ASCII and Unicode spaces).
func trimTrailingSpace(line []byte) int {
	n := len(line)
	for n > 0 {
		c := line[n-1]
		if c == ' ' || c == '\t' {
			n--
			continue
		}
		if c < utf8.RuneSelf {
			break
		}
		r, size := utf8.DecodeLastRune(line[:n])
		if _, k := typographic(r); k == kindSpaces {
			n -= size
			continue
		}
		break
	}
	return n
}

// Similar lines.

const (
	maxSimilarShown = 8   // lines quoted when oldText was not found
	maxQuotedLine   = 200 // characters of a quoted line
	minSimilarity   = 0.5
)

// similarLines finds the lines of content that look most like oldText: the best
// match of one of oldText's longest lines, widened to oldText's height. differs
// is the first shown line that differs from its counterpart in oldText.
func similarLines(content []byte, oldText string) (lines []numberedLine, differs int) {
	content = bytes.TrimPrefix(content, bom)
	file := splitLines(content)
	old := splitLines([]byte(toEOL(oldText, false)))
	type anchor struct {
		j    int
		text []byte
	}
	var anchors []anchor
	for j, l := range old {
		if t := bytes.TrimSpace(l); len(t) > 0 {
			anchors = append(anchors, anchor{j, t})
		}
	}
	sort.SliceStable(anchors, func(a, b int) bool { return len(anchors[a].text) > len(anchors[b].text) })
	if len(anchors) > 3 {
		anchors = anchors[:3]
	}
	best, bestJ, bestI := 0.0, -1, -1
	sc := newScorer()
	for _, a := range anchors {
		sc.setTarget(a.text)
		for i, l := range file {
			if s := sc.score(bytes.TrimSpace(l), best); s > best {
				best, bestJ, bestI = s, a.j, i
			}
		}
	}
	if bestI < 0 || best < minSimilarity {
		return nil, 0
	}
	off := bestI - bestJ // file line of oldText's first line (may be < 0)
	first := max(off, 0)
	last := min(off+len(old), len(file)) // exclusive
	for k := first; k < last; k++ {
		if !bytes.Equal(bytes.TrimRight(file[k], " \t\r"), bytes.TrimRight(old[k-off], " \t\r")) {
			differs = k + 1
			break
		}
	}
	if last-first > maxSimilarShown {
		from := first
		if differs > 0 {
			from = max(differs-1-2, first)
		}
		first, last = from, min(from+maxSimilarShown, last)
	}
	for k := first; k < last; k++ {
		lines = append(lines, numberedLine{n: k + 1, text: quoteLine(trimCR(file[k]))})
	}
	if len(old) == 1 {
		differs = 0
	}
	return lines, differs
}

func splitLines(b []byte) [][]byte {
	if len(b) == 0 {
		return nil
	}
	lines := bytes.Split(b, []byte("\n"))
	if len(lines[len(lines)-1]) == 0 {
		lines = lines[:len(lines)-1]
	}
	return lines
}

func trimCR(l []byte) []byte { return bytes.TrimSuffix(l, []byte("\r")) }

func quoteLine(l []byte) string {
	s := strings.ToValidUTF8(string(l), "\uFFFD")
	if utf8.RuneCountInString(s) <= maxQuotedLine {
		return s
	}
	return string([]rune(s)[:maxQuotedLine]) + "…"
}

// scorer measures how alike two lines are: the Dice coefficient of their byte
// bigrams, with tables reused across the lines of a file.
type scorer struct {
	want    []uint16 // bigram counts of the target
	used    []uint16 // bigrams of the current line matched so far
	touched []uint16
	n       int // bigrams in the target
	target  []byte
}

func newScorer() *scorer {
	return &scorer{want: make([]uint16, 1<<16), used: make([]uint16, 1<<16)}
}

func (s *scorer) setTarget(t []byte) {
	for i := 1; i < len(s.target); i++ {
		s.want[bigram(s.target, i)] = 0
	}
	s.target = t
	for i := 1; i < len(t); i++ {
		s.want[bigram(t, i)]++
	}
	s.n = max(len(t)-1, 0)
}

func bigram(b []byte, i int) uint16 { return uint16(b[i-1])<<8 | uint16(b[i]) }

// score returns the similarity of line to the target, or 0 when it cannot beat
// floor.
func (s *scorer) score(line []byte, floor float64) float64 {
	if bytes.Equal(line, s.target) {
		return 1
	}
	m := max(len(line)-1, 0)
	if m+s.n == 0 || 2*float64(min(m, s.n))/float64(m+s.n) <= floor {
		return 0
	}
	common := 0
	for i := 1; i < len(line); i++ {
		g := bigram(line, i)
		if s.used[g] < s.want[g] {
			if s.used[g] == 0 {
				s.touched = append(s.touched, g)
			}
			s.used[g]++
			common++
		}
	}
	for _, g := range s.touched {
		s.used[g] = 0
	}
	s.touched = s.touched[:0]
	// Identical trimmed lines score 1; anything else stays just below.
	return min(2*float64(common)/float64(m+s.n), 0.999)
}
