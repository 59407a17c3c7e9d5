package tools

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/corralhq/corral/fsys"
	"github.com/corralhq/corral/internal/sanitize"
)

// ReadParams are the arguments of read.
type ReadParams struct {
	Path   string `json:"path" jsonschema:"file or directory to read, relative to the workspace root"`
	Offset int    `json:"offset,omitempty" jsonschema:"1-based line number to start at (default 1)"`
	Limit  int    `json:"limit,omitempty" jsonschema:"maximum number of lines to return (default 2000)"`
}

// ReadDescription teaches the model how to use read.
const ReadDescription = `Read a text file of the workspace, or list a directory.

- path is relative to the workspace root; an absolute path must lie inside the workspace.
- Each line comes as "N<TAB>text", N being its 1-based line number. The number and the tab are not part of the file: never copy them into edit's oldText.
- One call returns at most 2000 lines or 50 KB. When more remains, the last line says so and names the next call, e.g. "[Showing lines 1-2000 of 5234. Use offset=2001 to continue.]". Use offset and limit to read one part of a large file.
- A line longer than 2000 characters is cut, with a marker saying how long it was.
- A file over 64 MB is read only as far as the lines shown: the lines after them are not counted, and a line longer than 16 MB (a hole of a sparse file, say) ends the read inside it; the last line says so, with a bash command to look further.
- A binary file is not shown: you get its size and type. A directory gives a listing of its entries (subdirectories end with "/").
- Read a file before you edit or overwrite it: edit and write refuse a file that this session has not read, or that changed since (by the user, a formatter or a command) — then read it again.
- read also opens the full log of a bash command, at the absolute path bash gives.`

// Limits of read.
const (
	readMaxLines     = 2000     // lines per call by default
	readMaxBytes     = 50 << 10 // output bytes per call
	readMaxLineChars = 2000     // characters of one line
	readMaxEntries   = 1000     // directory entries per call by default
	sniffBytes       = 8 << 10  // bytes examined to tell text from binary
	// readScanBytes bounds a read of a file over maxHashBytes, which is not
	// read to its end: no line of it is read past readScanBytes, and no
	// line is begun past readScanBytes of the lines shown. A longer line
	// ends the read inside it (a hole of a sparse file is one line of NULs
	// as long as the hole), so the first lines of any file cost at most
	// twice this much.
	readScanBytes   = 16 << 20
	readBufferBytes = 64 << 10
	maxLineNumber   = 1 << 53 // offset and limit are taken at most as this
)

// ReadDetails are the UI's data about a read.
type ReadDetails struct {
	// Path is the path read, relative to the workspace (absolute for a log).
	Path string `json:"path"`
	// Kind is "file" or "directory".
	Kind string `json:"kind"`
	// Size is the file's size in bytes.
	Size int64 `json:"size,omitempty"`
	// FirstLine and LastLine are the lines (or entries) shown, 1-based; Total
	// is how many the file (or directory) has.
	FirstLine int `json:"first_line,omitempty"`
	LastLine  int `json:"last_line,omitempty"`
	Total     int `json:"total"`
	// TotalUnknown is set when the file is too large (over 64 MB) to be
	// read to its end for a count: Total is then the lines counted, up to
	// the last shown.
	TotalUnknown bool `json:"total_unknown,omitempty"`
	// StoppedAt is set when read stopped inside a line longer than 16 MB
	// of a file over 64 MB: the byte offset it read to. The lines after
	// that line were not counted, and no offset reaches them.
	StoppedAt int64 `json:"stopped_at,omitempty"`
	// NextOffset is the offset that continues the read; 0 when all was shown.
	NextOffset int `json:"next_offset,omitempty"`
	// CutLines counts shown lines cut at 2000 characters.
	CutLines int `json:"cut_lines,omitempty"`
	// InvalidUTF8 is set when shown lines held bytes that are not UTF-8.
	InvalidUTF8 bool `json:"invalid_utf8,omitempty"`
}

func (s *Session) read(ctx context.Context, p ReadParams) (Result, error) {
	if p.Offset < 0 {
		return errorResult("offset must be a 1-based line number, got %d. Omit it to start at line 1.", p.Offset), nil
	}
	if p.Limit < 0 {
		return errorResult("limit must be a positive number of lines, got %d. Omit it for the default of %d.", p.Limit, readMaxLines), nil
	}
	// No file has this many lines; offset+limit must not overflow.
	p.Offset, p.Limit = min(p.Offset, maxLineNumber), min(p.Limit, maxLineNumber)
	root, t, inWorkspace, err := s.resolveRead(p.Path)
	if err != nil {
		return resultOf(err)
	}
	f, err := root.OpenFile(t.canon, os.O_RDONLY|openNonblock, 0)
	if err != nil {
		return resultOf(pathError(t.display, err))
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return resultOf(pathError(t.display, err))
	}
	if fi.IsDir() {
		return s.readDir(ctx, root, f, t, p)
	}
	if !fi.Mode().IsRegular() {
		return errorResult("%s is %s, not a regular file; read shows files and directories.", t.display, fileKind(fi)), nil
	}
	return s.readFile(ctx, f, fi, t, p, inWorkspace)
}

// resolveRead resolves a read's path: in the workspace, or a bash log named by
// its absolute path.
func (s *Session) resolveRead(p string) (fsys.Root, target, bool, error) {
	if filepath.IsAbs(p) && s.logs != nil {
		if _, in := s.ws.relative(p); !in {
			if rel, ok := within(p, s.logsReal, s.logsAbs); ok {
				rel = filepath.ToSlash(rel)
				return s.logs, target{display: sanitize.Text(p), canon: rel, key: rel}, false, nil
			}
		}
	}
	t, err := s.ws.resolve(p)
	return s.ws.root, t, true, err
}

func fileKind(fi fs.FileInfo) string {
	m := fi.Mode()
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m.IsDir():
		return "a directory"
	}
	return "a special file"
}

// readFile streams f: it shows the requested lines, then reads on to the end
// only to count the lines and hash the content, holding at most one buffer and
// one cut line. record says to note the hash in the read-state. A file over
// maxHashBytes is read only as far as the lines shown: its line count is
// not known and its stat signature is its staleness key, so that the first
// lines of a file of any size (a sparse terabyte) cost what they show. Nor is
// a line of it read past readScanBytes, nor is one begun past readScanBytes
// of shown lines: a line without end (a hole of a sparse file, all NULs)
// stops the read inside it.
func (s *Session) readFile(ctx context.Context, f fsys.File, fi fs.FileInfo, t target, p ReadParams, record bool) (Result, error) {
	h := newHasher()
	large := fi.Size() > maxHashBytes
	var src io.Reader = io.TeeReader(f, h)
	if large {
		src = f
	}
	br := bufio.NewReaderSize(src, readBufferBytes)
	head, err := br.Peek(sniffBytes)
	if err != nil && err != io.EOF && err != bufio.ErrBufferFull {
		return resultOf(pathError(t.display, err))
	}
	if kind, binary := sniffBinary(head); binary {
		return errorResult("%s is a binary file (%s, %s); read shows only text. Inspect it with bash instead, e.g. `file %s` or `xxd %s | head`.",
			t.display, kind, byteSize(fi.Size()), shellQuote(t.display), shellQuote(t.display)), nil
	}
	if bytes.HasPrefix(head, bom) {
		_, _ = br.Discard(len(bom))
	}

	offset := max(p.Offset, 1)
	limit := p.Limit
	if limit == 0 {
		limit = readMaxLines
	}
	det := &ReadDetails{Path: t.display, Kind: "file", Size: fi.Size()}
	var (
		out        strings.Builder
		line       []byte      // the kept start of the current line
		chars      int         // characters of the current line
		lineBytes  int64       // bytes of the current line
		pos        int64       // bytes read past the byte-order mark
		winStart   int64  = -1 // pos where the window's first line starts
		lines      int         // lines completed
		capped     bool        // stopped by readMaxBytes
		drain      bool        // the window is done: count the rest
		stopped    bool        // stopped by readScanBytes inside a line
		scanCapped bool        // stopped by readScanBytes between lines
		keepBytes  = readMaxLineChars*utf8.UTFMax + 2
	)
	for !drain {
		chunk, err := br.ReadSlice('\n')
		n := lines + 1
		inWindow := n >= offset && n < offset+limit
		if inWindow && winStart < 0 {
			winStart = pos
		}
		pos += int64(len(chunk))
		lineBytes += int64(len(chunk))
		if inWindow {
			if room := keepBytes - len(line); room > 0 {
				line = append(line, chunk[:min(room, len(chunk))]...)
			}
			chars += countChars(chunk)
		}
		ended := len(chunk) > 0 && chunk[len(chunk)-1] == '\n'
		// A line of a large file longer than readScanBytes ends the read
		// inside it: where it ends is not looked for.
		stopped = large && !ended && err != io.EOF && lineBytes > readScanBytes
		if ended || (err == io.EOF && lineBytes > 0) || stopped {
			lines++
			if inWindow {
				if ended {
					chars-- // the line ending is no character of the line
					if len(chunk) >= 2 && chunk[len(chunk)-2] == '\r' {
						chars--
					}
				}
				text, cut, invalid := formatLine(n, line, chars, !stopped)
				if out.Len()+len(text) > readMaxBytes && det.LastLine > 0 {
					capped, drain = true, true
					det.NextOffset = n
				} else {
					out.WriteString(text)
					if det.FirstLine == 0 {
						det.FirstLine = n
					}
					det.LastLine = n
					if cut {
						det.CutLines++
					}
					det.InvalidUTF8 = det.InvalidUTF8 || invalid
				}
				if n == offset+limit-1 {
					drain = true
				}
			}
			line, chars, lineBytes = line[:0], 0, 0
			if large && !drain && !stopped && winStart >= 0 && pos-winStart > readScanBytes {
				// The window's lines are long: no other is begun, as
				// at the output limit; offset continues there.
				capped, scanCapped, drain = true, true, true
				det.NextOffset = n + 1
			}
		}
		if stopped {
			det.StoppedAt = pos
			break
		}
		if err == io.EOF {
			break
		}
		if err != nil && err != bufio.ErrBufferFull {
			return resultOf(pathError(t.display, err))
		}
		if lines%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return Result{}, err
			}
		}
	}
	if (drain || stopped) && large {
		det.TotalUnknown = true
	} else if drain {
		nl, last, err := countRest(ctx, br)
		if err != nil {
			if ctx.Err() != nil {
				return Result{}, ctx.Err()
			}
			return resultOf(pathError(t.display, err))
		}
		lines += nl
		if last >= 0 && last != '\n' {
			lines++ // a last line without a newline
		}
	}
	det.Total = lines
	if record {
		key := h.sum()
		if large {
			key = largeKey(fi)
		}
		s.state.recordRead(t.key, t.display, key, sigOf(fi))
		s.watch.add(t.dir())
	}

	switch {
	case lines == 0:
		return Result{Content: fmt.Sprintf("[%s is empty.]", t.display), Details: det}, nil
	case stopped && offset > lines:
		return errorResult("offset %d lies past line %d of %s, a %s file, and line %d is longer than %s: read stopped inside it, %s into the file, and counts no line after it, so no offset past it can be read. Look further with bash: %s.",
			offset, lines, t.display, byteSize(fi.Size()), lines, byteSize(readScanBytes), byteSize(pos), lookFurther(t.display, pos)), nil
	case offset > lines:
		return errorResult("offset %d is past the end of %s, which has %d line%s. Use an offset from 1 to %d.", offset, t.display, lines, plural(lines), lines), nil
	}
	if !capped && !stopped && (det.LastLine < lines || det.TotalUnknown) {
		det.NextOffset = det.LastLine + 1
	}
	var notes []string
	if det.InvalidUTF8 {
		notes = append(notes, "[Some bytes of these lines are not valid UTF-8 and are shown as \uFFFD; oldText cannot match them.]")
	}
	if stopped {
		next := ""
		if det.LastLine < lines {
			next = fmt.Sprintf(" It did not fit the %d KB output limit: offset=%d shows its start.", readMaxBytes>>10, lines)
		}
		shown := fmt.Sprintf("lines %d-%d", det.FirstLine, det.LastLine)
		if det.FirstLine == det.LastLine {
			shown = fmt.Sprintf("line %d", det.FirstLine)
		}
		notes = append(notes, fmt.Sprintf("[Showing %s of a %s file. Line %d is longer than %s: read stopped inside it, %s into the file, and did not count the lines after it; no offset past it can be read.%s Look further with bash: %s.]",
			shown, byteSize(fi.Size()), lines, byteSize(readScanBytes), byteSize(pos), next, lookFurther(t.display, pos)))
	} else if det.NextOffset > 0 {
		limitNote := ""
		switch {
		case scanCapped:
			limitNote = fmt.Sprintf(" (read takes at most %s of a large file's lines a call)", byteSize(readScanBytes))
		case capped:
			limitNote = fmt.Sprintf(" (the %d KB output limit)", readMaxBytes>>10)
		}
		if det.TotalUnknown {
			notes = append(notes, fmt.Sprintf("[Showing lines %d-%d of a %s file, too large to count its lines%s. Use offset=%d to continue.]", det.FirstLine, det.LastLine, byteSize(fi.Size()), limitNote, det.NextOffset))
		} else {
			notes = append(notes, fmt.Sprintf("[Showing lines %d-%d of %d%s. Use offset=%d to continue.]", det.FirstLine, det.LastLine, lines, limitNote, det.NextOffset))
		}
	}
	content := strings.TrimSuffix(out.String(), "\n")
	if len(notes) > 0 {
		content += "\n\n" + strings.Join(notes, "\n")
	}
	return Result{Content: content, Details: det}, nil
}

// countChars counts the characters in b: the bytes that do not continue a
// UTF-8 sequence (an invalid byte counts as one).
func countChars(b []byte) int {
	n := 0
	for _, c := range b {
		if c&0xC0 != 0x80 {
			n++
		}
	}
	return n
}

// lookFurther suggests bash commands that show what a read that stopped at
// byte pos did not: the bytes from there, and the file's end.
func lookFurther(display string, pos int64) string {
	q := shellQuote(display)
	return fmt.Sprintf("`tail -c +%d %s | head -c 4000 | cat -v` shows the bytes that follow, `tail -c 4000 %s | cat -v` the file's end", pos+1, q, q)
}

// formatLine renders line n ("N\ttext\n"), cut at readMaxLineChars characters.
// line is the kept start of the line, chars its length in characters without
// the line ending: its whole length when whole is set, else the characters
// read of a line that read stopped in.
func formatLine(n int, line []byte, chars int, whole bool) (text string, cut, invalid bool) {
	if bytes.HasSuffix(line, []byte("\n")) {
		line = line[:len(line)-1]
		line = bytes.TrimSuffix(line, []byte("\r"))
	}
	if chars > readMaxLineChars || !whole {
		cut = true
		i, k := 0, 0
		for i < len(line) && k < readMaxLineChars {
			_, size := utf8.DecodeRune(line[i:])
			i += size
			k++
		}
		line = line[:i]
	}
	s := string(line)
	if !utf8.ValidString(s) {
		invalid = true
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	switch {
	case cut && !whole:
		s += fmt.Sprintf(" … [line cut: %d of the %d characters read shown; the line goes on, and read stopped inside it]", min(chars, readMaxLineChars), chars)
	case cut:
		s += fmt.Sprintf(" … [line cut: %d of its %d characters shown]", readMaxLineChars, chars)
	}
	return fmt.Sprintf("%d\t%s\n", n, s), cut, invalid
}

// countRest reads r to its end, counting newlines. last is the last byte read,
// -1 when nothing was left.
func countRest(ctx context.Context, r io.Reader) (newlines, last int, err error) {
	buf := make([]byte, 256<<10)
	last = -1
	for i := 0; ; i++ {
		if i%64 == 0 {
			if err := ctx.Err(); err != nil {
				return 0, 0, err
			}
		}
		n, err := r.Read(buf)
		if n > 0 {
			newlines += bytes.Count(buf[:n], []byte("\n"))
			last = int(buf[n-1])
		}
		if err == io.EOF {
			return newlines, last, nil
		}
		if err != nil {
			return 0, 0, err
		}
	}
}

// sniffBinary tells whether head, the start of a file, is binary, and guesses
// what it is. Text has no NUL byte, is not a known binary format, and is mostly
// valid UTF-8 without control characters: a Latin-1 file with a few accented
// letters is still text (its odd bytes are shown as U+FFFD).
func sniffBinary(head []byte) (kind string, binary bool) {
	kind, textual := guessType(head)
	if !textual {
		return kind, true
	}
	if bytes.IndexByte(head, 0) >= 0 {
		if kind == "" {
			kind = "binary data"
		}
		return kind, true
	}
	odd := 0
	for i := 0; i < len(head); {
		c := head[i]
		if c < utf8.RuneSelf {
			if c < 0x20 && c != '\t' && c != '\n' && c != '\r' && c != '\f' && c != '\v' && c != 0x1b {
				odd++
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(head[i:])
		if r == utf8.RuneError && size == 1 {
			if len(head)-i < utf8.UTFMax && !utf8.FullRune(head[i:]) {
				break // a character cut by the end of the sample
			}
			odd++
		}
		i += size
	}
	if odd*10 > len(head) {
		return "binary data", true
	}
	return "", false
}

// guessType names the format of a file from its first bytes. textual is set
// when it may be text, whose name is then empty, or that of a text encoding read
// cannot show (UTF-16).
func guessType(head []byte) (kind string, textual bool) {
	switch {
	case bytes.HasPrefix(head, []byte("\x7fELF")):
		return "ELF executable", false
	case bytes.HasPrefix(head, []byte("SQLite format 3\x00")):
		return "SQLite database", false
	case bytes.HasPrefix(head, []byte{0xCA, 0xFE, 0xBA, 0xBE}):
		return "Java class or Mach-O universal binary", false
	case bytes.HasPrefix(head, []byte{0xCF, 0xFA, 0xED, 0xFE}), bytes.HasPrefix(head, []byte{0xCE, 0xFA, 0xED, 0xFE}):
		return "Mach-O executable", false
	case bytes.HasPrefix(head, []byte("MZ")) && bytes.IndexByte(head, 0) >= 0:
		return "Windows executable", false
	}
	ct, params, _ := strings.Cut(http.DetectContentType(head), ";")
	switch {
	case strings.Contains(params, "utf-16"):
		return "UTF-16 text: convert it to UTF-8 (iconv) to read or edit it", true
	case strings.HasPrefix(ct, "text/"), ct == "application/json", ct == "application/xml",
		ct == "application/javascript", ct == "application/postscript":
		return "", true
	case ct == "application/octet-stream":
		return "binary data", true // a guess that is no guess: look closer
	}
	return ct, false
}

// shellQuote quotes s for a bash command line when it needs it. A path that
// starts with "-" gets "./" before it, so that a program does not take it for
// an option.
func shellQuote(s string) string {
	if strings.HasPrefix(s, "-") {
		s = "./" + s
	}
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r == '/' || r == '.' || r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// readDir lists a directory: entries sorted by name, directories with a
// trailing "/", symbolic links with their target. It keeps only the entries it
// may show, so a huge directory costs a scan, not its listing.
func (s *Session) readDir(ctx context.Context, root fsys.Root, d fsys.File, t target, p ReadParams) (Result, error) {
	offset := max(p.Offset, 1)
	limit := p.Limit
	if limit == 0 {
		limit = readMaxEntries
	}
	keep := offset - 1 + limit
	var names []string
	total := 0
	for {
		if err := ctx.Err(); err != nil {
			return Result{}, err
		}
		ents, err := d.ReadDir(512)
		for _, e := range ents {
			total++
			// A name is anyone's text: no escape or new line of its own
			// reaches the model or a terminal.
			name := sanitize.Text(e.Name())
			switch {
			case e.IsDir():
				name += "/"
			case e.Type()&fs.ModeSymlink != 0:
				if dest, err := root.Readlink(path.Join(t.canon, e.Name())); err == nil {
					name += " -> " + sanitize.Text(dest)
				}
			}
			names = append(names, name)
		}
		if len(names) > 2*keep+512 {
			sort.Strings(names)
			names = names[:keep]
		}
		if err == io.EOF || len(ents) == 0 {
			break
		}
		if err != nil {
			return resultOf(pathError(t.display, err))
		}
	}
	sort.Strings(names)
	det := &ReadDetails{Path: t.display, Kind: "directory", Total: total}
	if total == 0 {
		return Result{Content: fmt.Sprintf("[%s is an empty directory.]", t.display), Details: det}, nil
	}
	if offset > total {
		return errorResult("offset %d is past the end of the directory %s, which has %d entr%s. Use an offset from 1 to %d.", offset, t.display, total, map[bool]string{true: "y", false: "ies"}[total == 1], total), nil
	}
	shown := names[offset-1 : min(keep, len(names))]
	det.FirstLine, det.LastLine = offset, offset-1+len(shown)
	content := strings.Join(shown, "\n")
	if det.LastLine < total {
		det.NextOffset = det.LastLine + 1
		content += fmt.Sprintf("\n\n[Showing entries %d-%d of %d. Use offset=%d to continue.]", det.FirstLine, det.LastLine, total, det.NextOffset)
	}
	return Result{Content: content, Details: det}, nil
}
