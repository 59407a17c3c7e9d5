package tools

import (
	"bytes"
	"fmt"
	"strings"
	"time"

	"github.com/sergi/go-diff/diffmatchpatch"
)

const (
	// diffContext is the number of unchanged lines around each hunk.
	diffContext = 3
	// maxDiffBytes caps a diff in Details; past it the diff is cut at a line.
	maxDiffBytes = 1 << 20
	// maxDiffLines caps the lines given to the line diff algorithm; a larger
	// changed region is shown as all removed and all added.
	maxDiffLines = 200_000
	// diffTimeout bounds the line diff algorithm; past it go-diff returns a
	// valid, coarser diff.
	diffTimeout = time.Second
)

// lineDiff is a unified diff and its line counts.
type lineDiff struct {
	text           string
	added, removed int
	truncated      bool
}

type lineOp struct {
	kind byte // ' ', '-' or '+'
	text []byte
}

// unifiedDiff returns the unified diff from old to new, labelled with name. Only
// the region between the common leading and trailing lines is diffed, so an edit
// in a large file costs a scan of it and a small diff, not a diff of the file.
func unifiedDiff(name string, old, new []byte, created bool) lineDiff {
	if bytes.Equal(old, new) {
		return lineDiff{}
	}
	pre := commonPrefix(old, new)
	return unifiedDiffAround(name, old, new, pre, commonSuffix(old[pre:], new[pre:]), created)
}

// unifiedDiffAround is unifiedDiff for a caller that knows old and new share
// their first pre bytes and their last suf bytes (without overlap).
func unifiedDiffAround(name string, old, new []byte, pre, suf int, created bool) lineDiff {
	pre = bytes.LastIndexByte(old[:pre], '\n') + 1 // back to a line start
	// Shrink to a line start: the suffix must begin just after a newline on
	// both sides.
	for suf > 0 {
		o, n := len(old)-suf, len(new)-suf
		if (o == 0 || old[o-1] == '\n') && (n == 0 || new[n-1] == '\n') {
			break
		}
		suf--
	}
	oldMid := old[pre : len(old)-suf]
	newMid := new[pre : len(new)-suf]
	preLines := bytes.Count(old[:pre], []byte("\n"))

	var ops []lineOp
	before := lastLines(old[:pre], diffContext)
	for _, l := range before {
		ops = append(ops, lineOp{' ', l})
	}
	ops = append(ops, diffLines(oldMid, newMid)...)
	for _, l := range firstLines(old[len(old)-suf:], diffContext) {
		ops = append(ops, lineOp{' ', l})
	}
	oldStart := preLines - len(before) + 1

	var b strings.Builder
	if created {
		fmt.Fprintf(&b, "--- /dev/null\n+++ b/%s\n", name)
	} else {
		fmt.Fprintf(&b, "--- a/%s\n+++ b/%s\n", name, name)
	}
	d := renderHunks(&b, ops, oldStart, oldStart)
	d.text = b.String()
	if len(d.text) > maxDiffBytes {
		cut := strings.LastIndexByte(d.text[:maxDiffBytes], '\n') + 1
		d.text = d.text[:cut] + "[diff truncated]\n"
		d.truncated = true
	}
	return d
}

// diffLines diffs two runs of whole lines with go-diff's line mode.
func diffLines(old, new []byte) (ops []lineOp) {
	oldLines, newLines := splitKeep(old), splitKeep(new)
	if len(oldLines) == 0 || len(newLines) == 0 || len(oldLines)+len(newLines) > maxDiffLines {
		for _, l := range oldLines {
			ops = append(ops, lineOp{'-', l})
		}
		for _, l := range newLines {
			ops = append(ops, lineOp{'+', l})
		}
		return ops
	}
	dmp := diffmatchpatch.New()
	dmp.DiffTimeout = diffTimeout
	a, b, lines := dmp.DiffLinesToChars(string(old), string(new))
	diffs := dmp.DiffCharsToLines(dmp.DiffMain(a, b, false), lines)
	for _, d := range diffs {
		kind := byte(' ')
		switch d.Type {
		case diffmatchpatch.DiffDelete:
			kind = '-'
		case diffmatchpatch.DiffInsert:
			kind = '+'
		}
		for _, l := range splitKeep([]byte(d.Text)) {
			ops = append(ops, lineOp{kind, l})
		}
	}
	return ops
}

// renderHunks writes ops as unified hunks with diffContext lines of context.
func renderHunks(b *strings.Builder, ops []lineOp, oldLine, newLine int) lineDiff {
	var d lineDiff
	i := 0
	for i < len(ops) {
		// Find the next change.
		j := i
		for j < len(ops) && ops[j].kind == ' ' {
			j++
		}
		if j == len(ops) {
			break
		}
		start := max(j-diffContext, i)
		oldLine += start - i
		newLine += start - i
		// Extend the hunk while changes are within 2*context lines.
		end := j
		for k := j; k < len(ops); {
			if ops[k].kind != ' ' {
				end = k + 1
				k++
				continue
			}
			run := k
			for run < len(ops) && ops[run].kind == ' ' {
				run++
			}
			if run == len(ops) || run-k > 2*diffContext {
				break
			}
			k = run
		}
		stop := min(end+diffContext, len(ops))
		oldCount, newCount := 0, 0
		for _, op := range ops[start:stop] {
			if op.kind != '+' {
				oldCount++
			}
			if op.kind != '-' {
				newCount++
			}
		}
		fmt.Fprintf(b, "@@ -%s +%s @@\n", hunkRange(oldLine, oldCount), hunkRange(newLine, newCount))
		for _, op := range ops[start:stop] {
			b.WriteByte(op.kind)
			b.Write(op.text)
			if !bytes.HasSuffix(op.text, []byte("\n")) {
				b.WriteString("\n\\ No newline at end of file\n")
			}
			switch op.kind {
			case '-':
				d.removed++
			case '+':
				d.added++
			}
		}
		oldLine += oldCount
		newLine += newCount
		i = stop
	}
	return d
}

func hunkRange(start, count int) string {
	switch count {
	case 0:
		return fmt.Sprintf("%d,0", start-1)
	case 1:
		return fmt.Sprintf("%d", start)
	}
	return fmt.Sprintf("%d,%d", start, count)
}

// splitKeep splits b into lines that keep their "\n".
func splitKeep(b []byte) [][]byte {
	var out [][]byte
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			out = append(out, b)
			break
		}
		out = append(out, b[:i+1])
		b = b[i+1:]
	}
	return out
}

// lastLines returns up to n whole lines at the end of b, which ends with "\n"
// or is empty.
func lastLines(b []byte, n int) [][]byte {
	start := len(b)
	for k := 0; k < n && start > 0; k++ {
		start = bytes.LastIndexByte(b[:start-1], '\n') + 1
	}
	return splitKeep(b[start:])
}

// firstLines returns up to n lines at the start of b.
func firstLines(b []byte, n int) [][]byte {
	end := 0
	for k := 0; k < n && end < len(b); k++ {
		i := bytes.IndexByte(b[end:], '\n')
		if i < 0 {
			end = len(b)
			break
		}
		end += i + 1
	}
	return splitKeep(b[:end])
}

// commonPrefix returns the length of the common prefix of a and b, comparing
// in blocks so that a long equal run costs a memcmp.
func commonPrefix(a, b []byte) int {
	n := min(len(a), len(b))
	const block = 4096
	i := 0
	for i+block <= n && bytes.Equal(a[i:i+block], b[i:i+block]) {
		i += block
	}
	for i < n && a[i] == b[i] {
		i++
	}
	return i
}

// commonSuffix returns the length of the common suffix of a and b.
func commonSuffix(a, b []byte) int {
	n := min(len(a), len(b))
	const block = 4096
	i := 0
	for i+block <= n && bytes.Equal(a[len(a)-i-block:len(a)-i], b[len(b)-i-block:len(b)-i]) {
		i += block
	}
	for i < n && a[len(a)-1-i] == b[len(b)-1-i] {
		i++
	}
	return i
}
