package tools

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/corralhq/corral/fsys"
)

// EditParams are the arguments of edit.
type EditParams struct {
	Path       string `json:"path" jsonschema:"file to edit, relative to the workspace root"`
	OldText    string `json:"oldText" jsonschema:"exact text to replace; must occur exactly once unless replaceAll"`
	NewText    string `json:"newText" jsonschema:"text to put in its place"`
	ReplaceAll bool   `json:"replaceAll,omitempty" jsonschema:"replace every occurrence of oldText"`
}

// EditDescription teaches the model how to use edit.
const EditDescription = `Replace text in a file you have read in this session.

- oldText must match the current file exactly — every character, space, tab and line break — and occur exactly once. Copy it from read's output without the "N<TAB>" line-number prefixes: they are not part of the file. Include enough surrounding lines to make it unique, or set replaceAll to replace every occurrence.
- newText takes its place (empty to delete it). Keep the file's indentation.
- Read the file first. If it changed since you read it (by the user, a formatter or a command), the edit is refused: read it again, then retry. After a successful edit you can edit the same file again without reading it.
- The file keeps its line endings (a CRLF file stays CRLF), byte-order mark, mode and final newline: write oldText and newText with plain "\n".
- When oldText is not found, the error quotes the most similar lines of the current file with their numbers; correct oldText from them. A match that differs only in line endings, trailing spaces or typographic quotes, dashes and spaces is applied to that text alone, and the result says so.
- Prefer edit to write for changes to an existing file; make several small edits rather than one huge one.
- Protected paths (by default, at any depth: everything in .git — git's hooks, its config and what sends it elsewhere for them — and the configuration of AI agents and editors that runs programs: .claude/, .mcp.json, .vscode/tasks.json, .envrc and the like) cannot be edited; run git commands with bash instead, and ask the user to change an agent's configuration.`

// maxEditBytes caps the files edit and write hold in memory. A larger file is
// left to bash (sed, a script).
const maxEditBytes = 64_000_000

// maxDetailContent caps OldContent and NewContent in Details: a larger file's
// content is left out (ContentOmitted) and the diff alone shows the change.
const maxDetailContent = 256 << 10

// EditDetails are the UI's data about an edit.
type EditDetails struct {
	// Path is the file, relative to the workspace as the model named it.
	Path string `json:"path"`
	// Diff is a unified diff of the change with 3 lines of context.
	Diff string `json:"diff"`
	// DiffTruncated is set when Diff was cut at 1 MB.
	DiffTruncated bool `json:"diff_truncated,omitempty"`
	// Replacements is the number of occurrences replaced.
	Replacements int `json:"replacements"`
	// FirstLine and LastLine are the lines of the new file that the first and
	// the last replacement span (1-based).
	FirstLine int `json:"first_line"`
	LastLine  int `json:"last_line"`
	// Added and Removed count the diff's added and removed lines.
	Added   int `json:"added"`
	Removed int `json:"removed"`
	// Tolerant is set when oldText matched only after normalising; Normalized
	// names what differed ("line endings", "trailing whitespace", ...).
	Tolerant   bool     `json:"tolerant,omitempty"`
	Normalized []string `json:"normalized,omitempty"`
	// OldContent and NewContent are the whole file before and after, when
	// both fit in 256 KB; otherwise they are empty and ContentOmitted is set.
	OldContent     string `json:"old_content,omitempty"`
	NewContent     string `json:"new_content,omitempty"`
	ContentOmitted bool   `json:"content_omitted,omitempty"`
}

func (s *Session) edit(ctx context.Context, p EditParams) (Result, error) {
	t, err := s.ws.resolve(p.Path)
	if err != nil {
		return resultOf(err)
	}
	if e, ok := s.protect.lexical(t.canon); ok {
		return resultOf(s.protect.error(t.display, "edit", e))
	}
	switch {
	case p.OldText == "":
		return errorResult("oldText is empty, so there is nothing to find in %s. To insert text, put a neighbouring line in oldText and repeat it in newText with your addition; to create or replace a whole file, use write.", t.display), nil
	case p.OldText == p.NewText:
		return errorResult("oldText and newText are identical, so the edit would not change %s. Put the new text in newText.", t.display), nil
	}
	if !t.exists {
		return errorResult("%s does not exist. Use write to create a file, or read the directory to find the right name.", t.display), nil
	}

	release, err := s.queue.acquire(ctx, t.key)
	if err != nil {
		return Result{}, err
	}
	defer release()

	dir, err := s.openParent(t, "edit")
	if err != nil {
		return resultOf(err)
	}
	defer dir.root.Close()
	old, fi, err := dir.load(t)
	if err != nil {
		return resultOf(err)
	}
	if e, ok := s.protect.identity(s.ws.root, dir.info, dir.path, t.name(), fi); ok {
		return resultOf(s.protect.error(t.display, "edit", e))
	}
	have := hashBytes(old)
	want, read := s.state.lookup(t.key)
	if !read {
		if kind, binary := sniffBinary(old[:min(len(old), sniffBytes)]); binary {
			return errorResult("%s is a binary file (%s, %s); edit changes text files only.", t.display, kind, byteSize(int64(len(old)))), nil
		}
		return errorResult("Cannot edit %s because it has not been read in this session. Read the file first, then retry with exact oldText.", t.display), nil
	}
	if have != want {
		if display := s.state.markChanged(t.key, want); display != "" {
			s.emit(Event{Type: EventFileChanged, Path: display, Op: "write"})
		}
		return errorResult("Cannot edit %s: it changed since this session last read it (by the user, a formatter or a command). Read the file again to see its current content, then retry with exact oldText.", t.display), nil
	}
	if err := checkWritable(t.display, fi, "edit"); err != nil {
		return resultOf(err)
	}
	if err := checkOpenable(dir.root, t.name(), t.display, fi, "edit"); err != nil {
		return resultOf(err)
	}

	plan, fail := planEdit(old, p.OldText, p.NewText, p.ReplaceAll)
	if fail != nil {
		return errorResult("%s", matchMessage(t.display, fail)), nil
	}
	if err := s.commit(ctx, t, dir, plan.out, keptMode(fi), fi, have); err != nil {
		return resultOf(err)
	}

	// Nothing before the first replacement or after the last one changed: the
	// diff need not look there.
	first, last := plan.old[0], plan.old[len(plan.old)-1]
	d := unifiedDiffAround(t.display, old, plan.out, first.start, len(old)-last.end, false)
	det := &EditDetails{
		Path:          t.display,
		Diff:          d.text,
		DiffTruncated: d.truncated,
		Replacements:  len(plan.new),
		Added:         d.added,
		Removed:       d.removed,
		Tolerant:      plan.tolerant,
		Normalized:    plan.normalized,
	}
	det.OldContent, det.NewContent, det.ContentOmitted = detailContents(old, plan.out)
	ranges := lineRanges(plan.out, plan.new)
	det.FirstLine, det.LastLine = ranges[0][0], ranges[len(ranges)-1][1]

	var b strings.Builder
	fmt.Fprintf(&b, "Edited %s: %d replacement%s at %s (+%d -%d).", t.display, len(plan.new), plural(len(plan.new)), formatRanges(ranges), d.added, d.removed)
	if plan.tolerant {
		fmt.Fprintf(&b, " oldText matched only after normalising %s; only the matched text was replaced, the rest of the file is unchanged.", joinAnd(plan.normalized))
	}
	if plan.finalNewline {
		b.WriteString(" The file's final newline was kept.")
	}
	return Result{Content: b.String(), Details: det}, nil
}

// detailContents returns old and new as Details carry them: whole, or left out
// (omitted) when either is over maxDetailContent.
func detailContents(old, new []byte) (o, n string, omitted bool) {
	if len(old) > maxDetailContent || len(new) > maxDetailContent {
		return "", "", true
	}
	return string(old), string(new), false
}

// checkWritable refuses to replace a file that no one may write (no write
// bit in its mode): someone marked it read-only, and a rename over it would
// succeed all the same. Root is refused too, whatever it may do.
func checkWritable(display string, fi fs.FileInfo, verb string) error {
	if fi.Mode().Perm()&0o222 != 0 {
		return nil
	}
	return userErrorf("Cannot %s %s: it is read-only (mode %04o), so someone meant it not to change. The file is unchanged; ask the user whether it should be changed.", verb, display, fi.Mode().Perm())
}

// checkOpenable refuses to replace name in dir, the existing file fi, when
// the filesystem's user (the commands' user, through a sandbox's agent)
// could not open it for writing: its owner is another, or an ACL or a
// read-only mount says no. The rename that replaces it needs only the
// directory's permission. The kernel decides, by an open of the file
// itself, without truncating it; an open refused for another reason (a
// program running, ETXTBSY) is no refusal.
func checkOpenable(dir fsys.Root, name, display string, fi fs.FileInfo, verb string) error {
	f, err := dir.OpenFile(name, os.O_WRONLY|openNonblock, 0)
	switch {
	case err == nil:
		f.Close()
		return nil
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.EROFS):
		return &userError{
			msg: fmt.Sprintf("Cannot %s %s: permission denied — the user commands run as may not write it (mode %04o). The file is unchanged; ask the user whether it should be changed.", verb, display, fi.Mode().Perm()),
			err: err,
		}
	}
	return nil
}

// parentDir is the directory of a target, opened for one call.
type parentDir struct {
	root fsys.Root
	info fs.FileInfo // the directory as opened
	// path is where the directory really is, relative to the workspace, as
	// the kernel sees the opened directory; "" when it cannot tell.
	path string
}

// openParent opens t's directory as a root of its own, so that what follows
// happens in that directory even if a path component is swapped meanwhile, and
// checks it is not protected.
func (s *Session) openParent(t target, verb string) (parentDir, error) {
	r, err := s.ws.root.OpenRoot(t.dir())
	if err != nil {
		return parentDir{}, pathError(t.display, err)
	}
	fi, err := r.Stat(".")
	if err != nil {
		r.Close()
		return parentDir{}, pathError(t.display, err)
	}
	where := ""
	if abs, ok := r.Where(); ok {
		if rel, ok := s.ws.relative(abs); ok {
			where = filepath.ToSlash(rel)
		}
	}
	if e, ok := s.protect.identity(s.ws.root, fi, where, t.name(), nil); ok {
		r.Close()
		return parentDir{}, s.protect.error(t.display, verb, e)
	}
	if fi.Mode().Perm()&0o222 == 0 {
		// Root could write in it; no one is meant to.
		r.Close()
		where := "its directory " + path.Dir(t.display)
		if t.dir() == "." {
			where = "the workspace root"
		}
		return parentDir{}, userErrorf("Cannot %s %s: %s is read-only (mode %04o), so no file in it is meant to change. Nothing was changed; ask the user.", verb, t.display, where, fi.Mode().Perm())
	}
	return parentDir{root: r, info: fi, path: where}, nil
}

// load reads the regular file t into memory, refusing directories, special files
// and files over maxEditBytes.
func (d parentDir) load(t target) ([]byte, fs.FileInfo, error) {
	f, err := d.root.OpenFile(t.name(), os.O_RDONLY|openNonblock, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, userErrorf("%s does not exist. Use write to create a file, or read the directory to find the right name.", t.display)
	}
	if err != nil {
		return nil, nil, pathError(t.display, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, pathError(t.display, err)
	}
	if fi.IsDir() {
		return nil, nil, userErrorf("%s is a directory; edit changes files. Read it to list its entries.", t.display)
	}
	if !fi.Mode().IsRegular() {
		return nil, nil, userErrorf("%s is %s, not a regular file; edit changes files.", t.display, fileKind(fi))
	}
	if fi.Size() > maxEditBytes {
		return nil, nil, tooLarge(t.display, fi.Size())
	}
	b, err := readAll(f, fi.Size())
	if err != nil {
		return nil, nil, pathError(t.display, err)
	}
	if len(b) > maxEditBytes {
		return nil, nil, tooLarge(t.display, int64(len(b)))
	}
	return b, fi, nil
}

// readAll reads r to its end into one buffer sized for the expected size, and
// stops past maxEditBytes.
func readAll(r io.Reader, size int64) ([]byte, error) {
	b := make([]byte, 0, min(size, maxEditBytes)+1)
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return nil, err
		}
		if len(b) > maxEditBytes {
			return b, nil
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // grew meanwhile
		}
	}
}

func tooLarge(display string, size int64) error {
	return &userError{
		msg: fmt.Sprintf("%s is %s, more than the %s that edit and write change in memory. Change it with bash instead (sed, a script).", display, byteSize(size), byteSize(maxEditBytes)),
		err: errTooLarge,
	}
}

// commit writes data to t atomically and moves the read-state to it. old is the
// file it replaces and oldHash its content, as loaded (nil for a new file):
// when the file is no longer that just before the rename, nothing is written.
// The state changes just before the rename, so the watcher knows the write as
// the session's own; it is restored if the write fails.
func (s *Session) commit(ctx context.Context, t target, dir parentDir, data []byte, mode fs.FileMode, old fs.FileInfo, oldHash contentHash) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.checkpoint(ctx, CheckpointRequest{Path: t.display}); err != nil {
		return err
	}
	h := hashBytes(data)
	prev, had := s.state.snapshot(t.key)
	name := t.name()
	if s.ws.foldCase && old != nil {
		name = storedName(dir.root, name)
	}
	syncErr, err := writeAtomic(dir.root, name, data, mode, old, func(sig statSig) error {
		if err := stillAsLoaded(ctx, dir.root, name, old, oldHash); err != nil {
			return err
		}
		s.state.recordWrite(t.key, t.display, h, sig)
		return nil
	})
	if err != nil {
		s.state.restore(t.key, prev, had)
		return writeError(t.display, err)
	}
	if syncErr != nil {
		s.log.Debug("tools: directory sync failed", "path", t.display, "err", syncErr)
	}
	s.watch.add(t.dir())
	return nil
}

// storedName returns the name under which dir stores name, on a filesystem that
// ignores case: renaming over "README.MD" would otherwise rename README.md.
func storedName(dir fsys.Root, name string) string {
	d, err := dir.OpenFile(".", os.O_RDONLY, 0)
	if err != nil {
		return name
	}
	defer d.Close()
	for {
		names, err := d.Readdirnames(1024)
		for _, n := range names {
			if strings.EqualFold(n, name) {
				return n
			}
		}
		if err != nil || len(names) == 0 {
			return name
		}
	}
}

func writeError(display string, err error) error {
	if errors.Is(err, errChangedMeanwhile) {
		return userErrorf("%s changed while it was being written (by the user, a formatter or a command), so nothing was written and that change is kept. Read the file again, then retry.", display)
	}
	if errors.Is(err, fs.ErrPermission) {
		return userErrorf("Cannot write %s: permission denied. Choose another file or ask the user.", display)
	}
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EROFS) || errors.Is(err, syscall.EDQUOT) {
		var errno syscall.Errno
		errors.As(err, &errno)
		return userErrorf("Cannot write %s: %v. The file is unchanged; tell the user.", display, errno)
	}
	return pathError(display, err)
}

// formatRanges renders ranges as "line 4", "lines 40-42", or
// "lines 3, 10-12 and 40", at most 10 of them.
func formatRanges(ranges [][2]int) string {
	var parts []string
	for i, r := range ranges {
		if i == 10 {
			parts = append(parts, fmt.Sprintf("%d more", len(ranges)-10))
			break
		}
		if r[0] == r[1] {
			parts = append(parts, fmt.Sprint(r[0]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", r[0], r[1]))
		}
	}
	if len(parts) == 1 && ranges[0][0] == ranges[0][1] {
		return "line " + parts[0]
	}
	return "lines " + joinAnd(parts)
}

func joinAnd(parts []string) string {
	switch len(parts) {
	case 0:
		return ""
	case 1:
		return parts[0]
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}

// matchMessage explains to the model why oldText could not be applied.
func matchMessage(display string, f *matchFailure) string {
	var b strings.Builder
	switch {
	case f.unchanged:
		fmt.Fprintf(&b, "newText is the same as the text it would replace in %s, so nothing would change. Put the new text in newText.", display)
	case f.count > 1:
		lines := make([]string, 0, len(f.lines))
		for i, l := range f.lines {
			if i == 20 {
				lines = append(lines, "…")
				break
			}
			lines = append(lines, fmt.Sprint(l))
		}
		how := ""
		if f.tolerant {
			how = " (ignoring differences in whitespace, line endings and typographic punctuation)"
		}
		fmt.Fprintf(&b, "oldText occurs %d times in %s%s, at lines %s. Include more surrounding lines in oldText so that it matches exactly one place, or set replaceAll to true to replace every occurrence.",
			f.count, display, how, joinAnd(lines))
	default:
		fmt.Fprintf(&b, "oldText was not found in %s.\n", display)
		switch len(f.similar) {
		case 0:
			b.WriteString("No line of the file resembles it.\n")
		case 1:
			b.WriteString("The file currently contains a similar line:\n")
		default:
			b.WriteString("The file currently contains similar lines:\n")
		}
		for _, l := range f.similar {
			fmt.Fprintf(&b, "  %d: %s\n", l.n, l.text)
		}
		if f.differs > 0 {
			fmt.Fprintf(&b, "Line %d is where it first differs from oldText.\n", f.differs)
		}
		b.WriteString("Read the latest file contents and retry with exact oldText.")
	}
	return b.String()
}
