package tools

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
)

func TestUnifiedDiff(t *testing.T) {
	tests := []struct {
		name           string
		old, new       string
		created        bool
		want           string
		added, removed int
	}{
		{
			name:  "one line changed",
			old:   "a\nb\nc\nd\ne\nf\ng\nh\n",
			new:   "a\nb\nc\nd\nE\nf\ng\nh\n",
			want:  "--- a/f.txt\n+++ b/f.txt\n@@ -2,7 +2,7 @@\n b\n c\n d\n-e\n+E\n f\n g\n h\n",
			added: 1, removed: 1,
		},
		{
			name:  "insert at start",
			old:   "a\nb\n",
			new:   "x\na\nb\n",
			want:  "--- a/f.txt\n+++ b/f.txt\n@@ -1,2 +1,3 @@\n+x\n a\n b\n",
			added: 1,
		},
		{
			name:  "no newline at end",
			old:   "a\nb",
			new:   "a\nc",
			want:  "--- a/f.txt\n+++ b/f.txt\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+c\n\\ No newline at end of file\n",
			added: 1, removed: 1,
		},
		{
			name:  "newline added at end",
			old:   "a",
			new:   "a\n",
			want:  "--- a/f.txt\n+++ b/f.txt\n@@ -1 +1 @@\n-a\n\\ No newline at end of file\n+a\n",
			added: 1, removed: 1,
		},
		{
			name:    "created",
			old:     "",
			new:     "x\ny\n",
			created: true,
			want:    "--- /dev/null\n+++ b/f.txt\n@@ -0,0 +1,2 @@\n+x\n+y\n",
			added:   2,
		},
		{
			name:  "two hunks",
			old:   "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n",
			new:   "one\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\ntwelve\n",
			want:  "--- a/f.txt\n+++ b/f.txt\n@@ -1,4 +1,4 @@\n-1\n+one\n 2\n 3\n 4\n@@ -9,4 +9,4 @@\n 9\n 10\n 11\n-12\n+twelve\n",
			added: 2, removed: 2,
		},
		{
			name:  "changes 6 lines apart share a hunk",
			old:   "1\n2\n3\n4\n5\n6\n7\n8\n",
			new:   "one\n2\n3\n4\n5\n6\n7\neight\n",
			want:  "--- a/f.txt\n+++ b/f.txt\n@@ -1,8 +1,8 @@\n-1\n+one\n 2\n 3\n 4\n 5\n 6\n 7\n-8\n+eight\n",
			added: 2, removed: 2,
		},
		{
			name:  "suffix shares a partial line",
			old:   "x\nb\n",
			new:   "x\nab\n",
			want:  "--- a/f.txt\n+++ b/f.txt\n@@ -1,2 +1,2 @@\n x\n-b\n+ab\n",
			added: 1, removed: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := unifiedDiff("f.txt", []byte(tt.old), []byte(tt.new), tt.created)
			if d.text != tt.want {
				t.Errorf("diff:\n%s\nwant:\n%s", d.text, tt.want)
			}
			if d.added != tt.added || d.removed != tt.removed {
				t.Errorf("+%d -%d, want +%d -%d", d.added, d.removed, tt.added, tt.removed)
			}
			if got, err := applyUnified(tt.old, d.text); err != nil || got != tt.new {
				t.Errorf("applying the diff: %q, %v", got, err)
			}
		})
	}
}

// FuzzDiff: applying the diff to the old text gives the new one.
func FuzzDiff(f *testing.F) {
	f.Add("a\nb\nc\n", "a\nc\n")
	f.Add("a", "b\n")
	f.Add("x\r\ny\r\n", "x\ny\n")
	f.Add("1\n2\n3\n4\n5\n6\n7\n8\n9\n", "1\n2\nX\n4\n5\n6\n7\nY\n9")
	f.Fuzz(func(t *testing.T, old, new string) {
		d := unifiedDiff("f", []byte(old), []byte(new), false)
		if old == new {
			if d.text != "" {
				t.Fatalf("diff of equal texts: %q", d.text)
			}
			return
		}
		got, err := applyUnified(old, d.text)
		if err != nil {
			t.Fatalf("%v\n%s", err, d.text)
		}
		if got != new {
			t.Fatalf("applied diff gives %q, want %q\n%s", got, new, d.text)
		}
	})
}

// applyUnified applies a unified diff made by unifiedDiff to old, checking every
// context and removed line.
func applyUnified(old, diff string) (string, error) {
	oldLines := splitKeepString(old)
	var out []string
	at := 0 // next old line (0-based)
	lines := strings.SplitAfter(diff, "\n")
	if len(lines) < 2 {
		return "", fmt.Errorf("no header")
	}
	lines = lines[2:]
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if l == "" {
			continue
		}
		noEOL := i+1 < len(lines) && lines[i+1] == "\\ No newline at end of file\n"
		text := strings.TrimSuffix(l[1:], "\n")
		if !noEOL {
			text += "\n"
		}
		switch l[0] {
		case '@':
			var os, ns string
			if _, err := fmt.Sscanf(l, "@@ -%s +%s @@", &os, &ns); err != nil {
				return "", fmt.Errorf("hunk header %q: %v", l, err)
			}
			start, _, _ := strings.Cut(os, ",")
			n, _ := strconv.Atoi(start)
			if !strings.HasSuffix(os, ",0") {
				n-- // to 0-based; "-l,0" inserts after line l
			}
			if n < at {
				return "", fmt.Errorf("hunk at %d goes back before %d", n, at)
			}
			out = append(out, oldLines[at:n]...)
			at = n
		case ' ', '-':
			if at >= len(oldLines) || oldLines[at] != text {
				return "", fmt.Errorf("line %d: diff says %q, old differs", at+1, text)
			}
			if l[0] == ' ' {
				out = append(out, text)
			}
			at++
		case '+':
			out = append(out, text)
		case '\\':
		default:
			return "", fmt.Errorf("bad diff line %q", l)
		}
	}
	out = append(out, oldLines[at:]...)
	return strings.Join(out, ""), nil
}

func splitKeepString(s string) []string {
	var out []string
	for _, l := range splitKeep([]byte(s)) {
		out = append(out, string(l))
	}
	return out
}
