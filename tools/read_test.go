package tools

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func numbered(from, to int) string {
	var b strings.Builder
	for i := from; i <= to; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	return b.String()
}

func TestRead(t *testing.T) {
	long := strings.Repeat("é", 2500)
	png := "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + strings.Repeat("\x00", 40)
	files := map[string]string{
		"small.txt":   "one\ntwo\nthree\n",
		"noeol.txt":   "one\ntwo",
		"big.txt":     numbered(1, 5234),
		"wide.txt":    strings.Repeat(strings.Repeat("w", 1000)+"\n", 200),
		"long.txt":    "short\n" + long + "\nafter\n",
		"longer.txt":  strings.Repeat("x", 100_000) + "\r\nend",
		"utf16.txt":   "\xff\xfeh\x00i\x00",
		"crlf.txt":    "a\r\nb\r\n",
		"bom.txt":     "\uFEFFfirst\nsecond\n",
		"nul.bin":     "text\x00more",
		"img.png":     png,
		"latin1.txt":  "caf\xe9 au lait\nna\xefve\n" + strings.Repeat("plain ascii text\n", 20),
		"empty.txt":   "",
		"dir/b.txt":   "b",
		"dir/a.txt":   "a",
		"dir/sub/c":   "c",
		"tabs.txt":    "\tindented\n",
		"control.bin": strings.Repeat("\x01\x02\x03\x04abc", 100),
	}
	s, ws := newTestSession(t, files)
	if err := os.Symlink("a.txt", filepath.Join(ws, "dir", "link")); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name    string
		args    m
		want    string   // the whole content, when set
		facts   []string // facts the content carries
		lacks   []string
		isError bool
	}{
		{name: "numbered lines", args: m{"path": "small.txt"}, want: "1\tone\n2\ttwo\n3\tthree"},
		{name: "no final newline", args: m{"path": "noeol.txt"}, want: "1\tone\n2\ttwo"},
		{name: "offset and limit", args: m{"path": "small.txt", "offset": 2, "limit": 1},
			want: "2\ttwo\n\n[Showing lines 2-2 of 3. Use offset=3 to continue.]"},
		{name: "2000 lines by default", args: m{"path": "big.txt"},
			facts: []string{"1\tline 1\n", "2000\tline 2000\n", "[Showing lines 1-2000 of 5234. Use offset=2001 to continue.]"},
			lacks: []string{"2001\tline 2001"}},
		{name: "continue", args: m{"path": "big.txt", "offset": 2001},
			facts: []string{"2001\tline 2001\n", "[Showing lines 2001-4000 of 5234. Use offset=4001 to continue.]"}},
		{name: "last page has no hint", args: m{"path": "big.txt", "offset": 5001},
			facts: []string{"5234\tline 5234"}, lacks: []string{"Showing"}},
		{name: "50 KB cap", args: m{"path": "wide.txt"},
			facts: []string{"1\t", "[Showing lines 1-51 of 200 (the 50 KB output limit). Use offset=52 to continue.]"}},
		{name: "long line cut", args: m{"path": "long.txt"},
			facts: []string{"1\tshort\n", "2\t" + strings.Repeat("é", 2000) + " … [line cut: 2000 of its 2500 characters shown]\n", "3\tafter"}},
		{name: "very long line cut", args: m{"path": "longer.txt"},
			want: "1\t" + strings.Repeat("x", 2000) + " … [line cut: 2000 of its 100000 characters shown]\n2\tend"},
		{name: "UTF-16 named", args: m{"path": "utf16.txt"}, isError: true, facts: []string{"UTF-16 text", "iconv"}},
		{name: "CRLF shown without CR", args: m{"path": "crlf.txt"}, want: "1\ta\n2\tb"},
		{name: "BOM not shown", args: m{"path": "bom.txt"}, want: "1\tfirst\n2\tsecond"},
		{name: "tabs kept", args: m{"path": "tabs.txt"}, want: "1\t\tindented"},
		{name: "empty file", args: m{"path": "empty.txt"}, want: "[empty.txt is empty.]"},
		{name: "NUL is binary", args: m{"path": "nul.bin"}, isError: true,
			facts: []string{"nul.bin is a binary file (binary data, 9 B)", "bash"}},
		{name: "PNG named", args: m{"path": "img.png"}, isError: true, facts: []string{"img.png is a binary file", "image/png", "B)"}},
		{name: "control characters are binary", args: m{"path": "control.bin"}, isError: true, facts: []string{"binary"}},
		{name: "Latin-1 is text", args: m{"path": "latin1.txt", "limit": 2},
			facts: []string{"1\tcaf\uFFFD au lait", "not valid UTF-8", "Use offset=3"}},
		{name: "offset past the end", args: m{"path": "small.txt", "offset": 9}, isError: true,
			facts: []string{"offset 9", "small.txt", "3 lines", "from 1 to 3"}},
		{name: "negative offset", args: m{"path": "small.txt", "offset": -1}, isError: true, facts: []string{"offset", "-1"}},
		{name: "negative limit", args: m{"path": "small.txt", "limit": -5}, isError: true, facts: []string{"limit", "-5"}},
		{name: "missing", args: m{"path": "nope.txt"}, isError: true, facts: []string{"nope.txt does not exist"}},
		{name: "directory listing", args: m{"path": "dir"}, want: "a.txt\nb.txt\nlink -> a.txt\nsub/"},
		{name: "directory page", args: m{"path": "dir", "offset": 2, "limit": 2},
			want: "b.txt\nlink -> a.txt\n\n[Showing entries 2-3 of 4. Use offset=4 to continue.]"},
		{name: "workspace root", args: m{"path": "."}, facts: []string{"dir/\n", "small.txt"}},
		{name: "symlink followed", args: m{"path": "dir/link"}, want: "1\ta"},
		{name: "absolute inside", args: m{"path": filepath.Join(ws, "small.txt")}, facts: []string{"1\tone"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := call(t, s, "read", tt.args)
			if r.IsError != tt.isError {
				t.Fatalf("IsError = %v: %s", r.IsError, clip(r.Content))
			}
			if tt.want != "" && r.Content != tt.want {
				t.Errorf("content:\n%q\nwant:\n%q", clip(r.Content), tt.want)
			}
			wantFacts(t, r.Content, tt.facts...)
			for _, l := range tt.lacks {
				if strings.Contains(r.Content, l) {
					t.Errorf("content has %q", l)
				}
			}
		})
	}
}

func TestReadDetails(t *testing.T) {
	s, _ := newTestSession(t, map[string]string{"big.txt": numbered(1, 3000)})
	r := mustOK(t, s, "read", m{"path": "big.txt", "offset": 10, "limit": 5})
	d, ok := r.Details.(*ReadDetails)
	if !ok {
		t.Fatalf("details %T", r.Details)
	}
	want := ReadDetails{Path: "big.txt", Kind: "file", Size: int64(len(numbered(1, 3000))), FirstLine: 10, LastLine: 14, Total: 3000, NextOffset: 15}
	if *d != want {
		t.Errorf("details %+v, want %+v", *d, want)
	}
}

func TestReadFIFODoesNotBlock(t *testing.T) {
	s, ws := newTestSession(t, nil)
	if err := syscall.Mkfifo(filepath.Join(ws, "pipe"), 0o644); err != nil {
		t.Skip("no mkfifo:", err)
	}
	mustFail(t, s, "read", m{"path": "pipe"}, "pipe is a named pipe, not a regular file")
}

// A partial read records the hash of the whole file: an edit far past the part
// shown is allowed, and an outside change far past it is caught.
func TestPartialReadRecordsWholeHash(t *testing.T) {
	s, ws := newTestSession(t, map[string]string{"big.txt": numbered(1, 5000)})
	mustOK(t, s, "read", m{"path": "big.txt", "limit": 10})
	mustOK(t, s, "edit", m{"path": "big.txt", "oldText": "line 4999\n", "newText": "LINE 4999\n"})
	content := readFile(t, ws, "big.txt")
	writeFile(t, ws, "big.txt", strings.Replace(content, "line 4998\n", "changed\n", 1))
	mustFail(t, s, "edit", m{"path": "big.txt", "oldText": "line 1\n", "newText": "x\n"}, "changed since")
}

// The full log of a bash command is read by its absolute path, outside the
// workspace; nothing else outside is.
func TestReadBashLog(t *testing.T) {
	s, _ := newTestSession(t, nil)
	log := filepath.Join(s.LogDir(), "cmd-1.log")
	if err := os.WriteFile(log, []byte("out 1\nout 2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := mustOK(t, s, "read", m{"path": log, "offset": 2})
	if r.Content != "2\tout 2" {
		t.Errorf("log read: %q", r.Content)
	}
	mustFail(t, s, "edit", m{"path": log, "oldText": "out", "newText": "x"}, "outside the workspace")
	mustFail(t, s, "read", m{"path": filepath.Join(s.LogDir(), "..", "x")}, "outside the workspace")
}

// procReadBytes is what this process has read through read(2) so far.
func procReadBytes(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		t.Skip("no /proc/self/io:", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "rchar: "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	t.Skip("no rchar in /proc/self/io")
	return 0
}

// The first lines of a sparse terabyte cost what they show: read does not
// read on to count or hash it (its stat signature is its staleness key), and
// write over it compares that signature.
func TestReadSparseTerabyte(t *testing.T) {
	s, ws := newTestSession(t, nil)
	p := sparseHuge(t, ws, 1<<40)
	before := procReadBytes(t)
	r := mustOK(t, s, "read", m{"path": "huge.log"})
	if got := procReadBytes(t) - before; got > 64<<20 {
		t.Errorf("read read %d MB of the file", got>>20)
	}
	if !strings.HasSuffix(r.Content, "[Showing lines 1-2000 of a 1099.5 GB file, too large to count its lines. Use offset=2001 to continue.]") {
		t.Errorf("read: %s", clip(r.Content))
	}
	if r := call(t, s, "edit", m{"path": "huge.log", "oldText": "00001 log", "newText": "x"}); !r.IsError || !strings.Contains(r.Content, "more than the 64.0 MB that edit and write change in memory") {
		t.Errorf("edit: %s", r.Content)
	}
	// Changed by someone else: its signature changes, and write refuses.
	if err := os.Chtimes(p, time.Now(), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if r := call(t, s, "write", m{"path": "huge.log", "content": "small\n"}); !r.IsError || !strings.Contains(r.Content, "changed since this session last read it") {
		t.Errorf("write over a changed file: %s", r.Content)
	}
	mustOK(t, s, "read", m{"path": "huge.log"})
	before = procReadBytes(t)
	mustOK(t, s, "write", m{"path": "huge.log", "content": "small\n"})
	if got := procReadBytes(t) - before; got > 64<<20 {
		t.Errorf("write read %d MB of the old file", got>>20)
	}
}

// sparseHole makes a file of size bytes whose first lines, 1900 short ones,
// are text (over the 8 KB read sniffs) and the rest a hole: one line of NULs
// without end, as long as the file.
func sparseHole(t *testing.T, dir string, size int64) {
	t.Helper()
	var b strings.Builder
	for i := 1; i <= 1900; i++ {
		fmt.Fprintf(&b, "%d\n", i)
	}
	p := filepath.Join(dir, "hole.txt")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, size); err != nil {
		t.Fatal(err)
	}
}

// The first lines of a 64 GiB sparse text file, whose hole starts within the
// lines asked for, come without reading the hole to its end: read stops
// inside the hole's line, shows its start cut, and says that the lines after
// it were not counted, the file's size, and how to look further. An offset
// past that line is refused the same way, and one at it shows it again.
func TestReadSparseHole(t *testing.T) {
	s, ws := newTestSession(t, nil)
	sparseHole(t, ws, 64<<30)
	before := procReadBytes(t)
	r := mustOK(t, s, "read", m{"path": "hole.txt"})
	if got := procReadBytes(t) - before; got > 2*readScanBytes {
		t.Errorf("read read %d MB of the file", got>>20)
	}
	d := r.Details.(*ReadDetails)
	if !d.TotalUnknown || d.StoppedAt <= readScanBytes || d.StoppedAt > readScanBytes+2*readBufferBytes || d.NextOffset != 0 || d.LastLine != 1901 || d.Total != 1901 {
		t.Errorf("details %+v", *d)
	}
	wantFacts(t, r.Content, "1\t1\n2\t2\n", "1900\t1900\n1901\t",
		" characters read shown; the line goes on, and read stopped inside it]",
		fmt.Sprintf("[Showing lines 1-1901 of a 68.7 GB file. Line 1901 is longer than 16.8 MB: read stopped inside it, %s into the file, and did not count the lines after it; no offset past it can be read.", byteSize(d.StoppedAt)),
		fmt.Sprintf("`tail -c +%d hole.txt | head -c 4000 | cat -v` shows the bytes that follow, `tail -c 4000 hole.txt | cat -v` the file's end.]", d.StoppedAt+1))

	before = procReadBytes(t)
	mustFail(t, s, "read", m{"path": "hole.txt", "offset": 2001},
		"offset 2001 lies past line 1901 of hole.txt, a 68.7 GB file, and line 1901 is longer than 16.8 MB: read stopped inside it",
		"Look further with bash: `tail -c +")
	if got := procReadBytes(t) - before; got > 2*readScanBytes {
		t.Errorf("read with an offset read %d MB of the file", got>>20)
	}
	r = mustOK(t, s, "read", m{"path": "hole.txt", "offset": 1901, "limit": 1})
	wantFacts(t, r.Content, "1901\t", "[Showing line 1901 of a 68.7 GB file. Line 1901 is longer")
	// It was read: edit refuses it for its size, not as unread.
	mustFail(t, s, "edit", m{"path": "hole.txt", "oldText": "1\n2\n", "newText": "x\n"}, "more than the 64.0 MB that edit and write change in memory")
}

// A last line without a newline is a line, even when the file ends where
// read's buffer does.
func TestReadLongLastLine(t *testing.T) {
	for _, n := range []int{readBufferBytes, 2 * readBufferBytes, 2*readBufferBytes + 1} {
		s, _ := newTestSession(t, map[string]string{"one.txt": strings.Repeat("a", n)})
		r := mustOK(t, s, "read", m{"path": "one.txt"})
		want := fmt.Sprintf("[line cut: 2000 of its %d characters shown]", n)
		if !strings.HasPrefix(r.Content, "1\taaa") || !strings.HasSuffix(r.Content, want) {
			t.Errorf("%d bytes: %s", n, clip(r.Content))
		}
		if d := r.Details.(*ReadDetails); d.Total != 1 {
			t.Errorf("%d bytes: total %d", n, d.Total)
		}
	}
}

// In a file over 64 MB of long lines (1 MiB each, a hole between their
// newlines), the lines shown are not read past 16 MB in all: read stops
// between two lines, says why, and offset continues there.
func TestReadLongLinesOfLargeFile(t *testing.T) {
	s, ws := newTestSession(t, nil)
	f, err := os.Create(filepath.Join(ws, "long.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(strings.Repeat("a", 9000) + "\n"); err != nil {
		t.Fatal(err)
	}
	for i := int64(1); i <= 256; i++ {
		if _, err := f.WriteAt([]byte("\n"), i<<20); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Truncate(1 << 30); err != nil {
		t.Fatal(err)
	}
	f.Close()
	before := procReadBytes(t)
	r := mustOK(t, s, "read", m{"path": "long.txt"})
	if got := procReadBytes(t) - before; got > 2*readScanBytes {
		t.Errorf("read read %d MB of the file", got>>20)
	}
	d := r.Details.(*ReadDetails)
	if d.LastLine < 10 || d.LastLine > 20 || d.NextOffset != d.LastLine+1 || !d.TotalUnknown || d.StoppedAt != 0 {
		t.Fatalf("details %+v", *d)
	}
	wantFacts(t, r.Content, fmt.Sprintf("[Showing lines 1-%d of a 1.1 GB file, too large to count its lines (read takes at most 16.8 MB of a large file's lines a call). Use offset=%d to continue.]", d.LastLine, d.NextOffset))
	r = mustOK(t, s, "read", m{"path": "long.txt", "offset": d.NextOffset, "limit": 2})
	wantFacts(t, r.Content, fmt.Sprintf("%d\t", d.NextOffset), fmt.Sprintf("Use offset=%d to continue.", d.NextOffset+2))
}
