package tools

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"syscall"
)

// WriteParams are the arguments of write.
type WriteParams struct {
	Path    string `json:"path" jsonschema:"file to create or overwrite, relative to the workspace root"`
	Content string `json:"content" jsonschema:"the whole new content of the file"`
}

// WriteDescription teaches the model how to use write.
const WriteDescription = `Create a file, or replace the whole content of a file.

- path is relative to the workspace root; missing parent directories are created.
- content is the complete new file, exactly as it should be on disk — no line-number prefixes.
- To change part of an existing file, use edit: it is safer and costs far fewer tokens.
- Overwriting an existing file requires that you read it in this session and that it has not changed since (by the user, a formatter or a command); otherwise the write is refused — read it, then retry.
- The write is atomic and keeps the file's mode. An existing CRLF file keeps its CRLF line endings, and a byte-order mark is kept, when content uses plain "\n".
- Protected paths (by default, at any depth: everything in .git — git's hooks, its config and what sends it elsewhere for them — and the configuration of AI agents and editors that runs programs: .claude/, .mcp.json, .vscode/tasks.json, .envrc and the like) cannot be written; run git commands with bash instead, and ask the user to change an agent's configuration.`

// WriteDetails are the UI's data about a write.
type WriteDetails struct {
	// Path is the file, relative to the workspace as the model named it.
	Path string `json:"path"`
	// Created is set when the file did not exist.
	Created bool `json:"created"`
	// Diff is a unified diff from the old content (or /dev/null).
	Diff          string `json:"diff"`
	DiffTruncated bool   `json:"diff_truncated,omitempty"`
	// Lines and Bytes measure the new content.
	Lines int `json:"lines"`
	Bytes int `json:"bytes"`
	// Added and Removed count the diff's added and removed lines.
	Added   int `json:"added"`
	Removed int `json:"removed"`
	// KeptCRLF and KeptBOM are set when the old file's CRLF line endings or
	// byte-order mark were applied to content that had none.
	KeptCRLF bool `json:"kept_crlf,omitempty"`
	KeptBOM  bool `json:"kept_bom,omitempty"`
	// OldContent and NewContent are the whole file before and after, when
	// both fit in 256 KB; otherwise ContentOmitted is set.
	OldContent     string `json:"old_content,omitempty"`
	NewContent     string `json:"new_content,omitempty"`
	ContentOmitted bool   `json:"content_omitted,omitempty"`
}

func (s *Session) write(ctx context.Context, p WriteParams) (Result, error) {
	t, err := s.ws.resolve(p.Path)
	if err != nil {
		return resultOf(err)
	}
	if t.canon == "." {
		return errorResult("%s is the workspace root, a directory. Give the path of a file in it.", t.display), nil
	}
	if e, ok := s.protect.lexical(t.canon); ok {
		return resultOf(s.protect.error(t.display, "write", e))
	}
	if !t.exists {
		if err := checkNewName(p.Path); err != nil {
			return resultOf(err)
		}
	}

	release, err := s.queue.acquire(ctx, t.key)
	if err != nil {
		return Result{}, err
	}
	defer release()

	if d := t.dir(); d != "." {
		if err := s.ws.root.MkdirAll(d, 0o777); err != nil {
			if errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EEXIST) {
				return errorResult("Cannot create %s: a component of %s is a file, not a directory.", t.display, d), nil
			}
			return resultOf(writeError(t.display, err))
		}
	}
	dir, err := s.openParent(t, "write")
	if err != nil {
		return resultOf(err)
	}
	defer dir.root.Close()

	data := []byte(p.Content)
	det := &WriteDetails{Path: t.display}
	mode := newFileMode(s.ws.root)
	var old []byte
	var oldInfo fs.FileInfo
	var have contentHash
	fi, err := dir.root.Lstat(t.name())
	switch {
	case errors.Is(err, fs.ErrNotExist):
		det.Created = true
	case err != nil:
		return resultOf(pathError(t.display, err))
	case fi.IsDir():
		return errorResult("%s is a directory; write writes files. Give the path of a file.", t.display), nil
	case fi.Mode()&fs.ModeSymlink != 0:
		return errorResult("%s was replaced by a symbolic link while it was being written. Read it again, then retry.", t.display), nil
	case !fi.Mode().IsRegular():
		return errorResult("%s is %s, not a regular file; write writes files.", t.display, fileKind(fi)), nil
	default:
		old, oldInfo, have, err = dir.current(ctx, t)
		if err != nil {
			return resultOf(err)
		}
		if e, ok := s.protect.identity(s.ws.root, dir.info, dir.path, t.name(), oldInfo); ok {
			return resultOf(s.protect.error(t.display, "write", e))
		}
		if err := checkWritable(t.display, oldInfo, "overwrite"); err != nil {
			return resultOf(err)
		}
		if err := checkOpenable(dir.root, t.name(), t.display, oldInfo, "overwrite"); err != nil {
			return resultOf(err)
		}
		if s.opts.WritePolicy != AllowOverwrite {
			want, read := s.state.lookup(t.key)
			if !read {
				return errorResult("Cannot overwrite %s because it has not been read in this session. Read the file first (and prefer edit for a partial change), then retry.", t.display), nil
			}
			if have != want {
				if display := s.state.markChanged(t.key, want); display != "" {
					s.emit(Event{Type: EventFileChanged, Path: display, Op: "write"})
				}
				return errorResult("Cannot overwrite %s: it changed since this session last read it (by the user, a formatter or a command). Read the file again to see its current content, then retry.", t.display), nil
			}
		}
		mode = keptMode(oldInfo)
		if old != nil {
			data, det.KeptCRLF, det.KeptBOM = keepShape(old, data)
		}
	}

	if err := s.commit(ctx, t, dir, data, mode, oldInfo, have); err != nil {
		return resultOf(err)
	}

	det.Lines, det.Bytes = countLines(data), len(data)
	if det.Created || old != nil {
		d := unifiedDiff(t.display, old, data, det.Created)
		det.Diff, det.DiffTruncated, det.Added, det.Removed = d.text, d.truncated, d.added, d.removed
		det.OldContent, det.NewContent, det.ContentOmitted = detailContents(old, data)
	} else {
		det.Diff = "(the old file was too large to diff)"
		det.ContentOmitted = true
	}

	var b strings.Builder
	if det.Created {
		fmt.Fprintf(&b, "Created %s (%d line%s).", t.display, det.Lines, plural(det.Lines))
	} else {
		fmt.Fprintf(&b, "Overwrote %s (%d line%s; +%d -%d).", t.display, det.Lines, plural(det.Lines), det.Added, det.Removed)
	}
	switch {
	case det.KeptCRLF && det.KeptBOM:
		b.WriteString(" Kept its CRLF line endings and byte-order mark.")
	case det.KeptCRLF:
		b.WriteString(" Kept its CRLF line endings.")
	case det.KeptBOM:
		b.WriteString(" Kept its byte-order mark.")
	}
	return Result{Content: b.String(), Details: det}, nil
}

// current returns the staleness key of the existing file t (its content hash;
// its stat signature when it is over maxHashBytes), and its content when it
// is small enough to diff (nil otherwise).
func (d parentDir) current(ctx context.Context, t target) ([]byte, fs.FileInfo, contentHash, error) {
	b, fi, err := d.load(t)
	if err == nil {
		return b, fi, hashBytes(b), nil
	}
	if !errors.Is(err, errTooLarge) {
		return nil, nil, contentHash{}, err
	}
	// Too large to hold in memory.
	f, err := d.root.OpenFile(t.name(), os.O_RDONLY|openNonblock, 0)
	if err != nil {
		return nil, nil, contentHash{}, pathError(t.display, err)
	}
	defer f.Close()
	if fi, err = f.Stat(); err != nil {
		return nil, nil, contentHash{}, pathError(t.display, err)
	}
	if !fi.Mode().IsRegular() {
		// Swapped meanwhile: a named pipe would block the read.
		return nil, nil, contentHash{}, userErrorf("%s is %s, not a regular file; write writes files.", t.display, fileKind(fi))
	}
	// Too large to hash in a call's time: its stat signature stands for
	// its content, as when read recorded it.
	return nil, fi, largeKey(fi), nil
}

// keepShape gives data the old file's CRLF line endings and byte-order mark
// when data has none of its own: a model writes "\n" whatever the file uses.
func keepShape(old, data []byte) (out []byte, crlf, bomKept bool) {
	out = data
	if bytes.HasPrefix(old, bom) && !bytes.HasPrefix(out, bom) && len(out) > 0 {
		out = append(append([]byte{}, bom...), out...)
		bomKept = true
	}
	if isCRLF(bytes.TrimPrefix(old, bom)) && bytes.IndexByte(out, '\n') >= 0 && !bytes.Contains(out, []byte("\r\n")) {
		out = []byte(toEOL(string(out), true))
		crlf = true
	}
	return out, crlf, bomKept
}

// countLines counts the lines of b, a last line without a newline included.
func countLines(b []byte) int {
	n := bytes.Count(b, []byte("\n"))
	if len(b) > 0 && b[len(b)-1] != '\n' {
		n++
	}
	return n
}
