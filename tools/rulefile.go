package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/corralhq/corral/egress"
	"github.com/corralhq/corral/fsys"
)

// ErrRuleFileInWorkspace is returned by NewRuleFile for a policy file inside
// the workspace: the agent could change its own rules there.
var ErrRuleFileInWorkspace = errors.New("the policy file is inside the workspace, where the agent can change it; keep it outside to add rules")

// RuleFile is an Amender that appends allow rules to the user's policy file
// (TOML, as policy.LoadRules reads it) and rebuilds the classifier from it. It
// is safe for concurrent use; sessions may share one.
type RuleFile struct {
	path  string
	build func() (Classifier, error)

	mu sync.Mutex // serialises appends
}

// NewRuleFile returns the Amender of the policy file at path, which must exist
// and lie outside workspace (symbolic links resolved). build rebuilds the
// classifier after each change, reading the file again.
func NewRuleFile(path, workspace string, build func() (Classifier, error)) (*RuleFile, error) {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return nil, fmt.Errorf("policy file: %w", err)
	}
	if real, err = filepath.Abs(real); err != nil {
		return nil, fmt.Errorf("policy file: %w", err)
	}
	ws, err := filepath.EvalSymlinks(workspace)
	if err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	if ws, err = filepath.Abs(ws); err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	if rel, err := filepath.Rel(ws, real); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return nil, fmt.Errorf("%s: %w", path, ErrRuleFileInWorkspace)
	}
	return &RuleFile{path: real, build: build}, nil
}

// Path is the policy file's real path.
func (f *RuleFile) Path() string { return f.path }

// Amend appends one [[rule]] table per pattern, allowing it, with note as a
// comment and in the rule's reason. When the file no longer loads, or the
// classifier cannot be rebuilt, the file is cut back to what it was.
func (f *RuleFile) Amend(ctx context.Context, patterns []string, note string) (Classifier, error) {
	if len(patterns) == 0 {
		return nil, errors.New("no rule to add")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	file, err := os.OpenFile(f.path, os.O_RDWR|os.O_APPEND, 0)
	if err != nil {
		return nil, fmt.Errorf("opening the policy file: %w", err)
	}
	defer file.Close()
	info, err := file.Stat()
	if err != nil {
		return nil, err
	}
	size := info.Size()
	var b bytes.Buffer
	if size > 0 {
		last := make([]byte, 1)
		if _, err := file.ReadAt(last, size-1); err != nil && err != io.EOF {
			return nil, err
		}
		if last[0] != '\n' {
			b.WriteByte('\n')
		}
	}
	note = strings.Join(strings.Fields(note), " ")
	now := time.Now().UTC().Format(time.RFC3339)
	fmt.Fprintf(&b, "\n# Added by corral %s: %s\n", now, note)
	for _, p := range patterns {
		fmt.Fprintf(&b, "[[rule]]\ndecision = \"allow\"\nmatch    = %s\nreason   = %s\n",
			tomlString(p), tomlString("approved by the user on "+now[:10]))
	}
	if _, err := file.Write(b.Bytes()); err != nil {
		_ = file.Truncate(size)
		return nil, fmt.Errorf("writing the policy file: %w", err)
	}
	if err := file.Sync(); err != nil {
		return nil, fmt.Errorf("writing the policy file: %w", err)
	}
	c, err := f.build()
	if err != nil {
		if terr := file.Truncate(size); terr != nil {
			return nil, errors.Join(err, fmt.Errorf("restoring the policy file: %w", terr))
		}
		return nil, fmt.Errorf("the amended policy file does not load (restored): %w", err)
	}
	return c, nil
}

// tomlString is s as a TOML basic string: JSON's escapes are TOML's.
func tomlString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}

// AllowHost adds pattern to the allow list of the [network] table of the
// policy file, below a comment that says when and why (note): at the head of
// the table's allow list, as a new allow key of the table when it has none, or
// in a new [network] table at the end of the file. The file is replaced
// atomically, then checked: when it no longer loads, or its [network] table is
// not the old one with pattern added, the old file is put back and the error
// says to add the pattern by hand. A pattern the list holds already changes
// nothing.
func (f *RuleFile) AllowHost(ctx context.Context, pattern, note string) error {
	if _, err := egress.ParsePattern(pattern); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	data, err := os.ReadFile(f.path)
	if err != nil {
		return fmt.Errorf("reading the policy file: %w", err)
	}
	info, err := os.Stat(f.path)
	if err != nil {
		return err
	}
	old, err := egress.ParseNetwork(f.path, data)
	if err != nil {
		return fmt.Errorf("the policy file does not load: %w", err)
	}
	if slices.Contains(old.Allow, pattern) {
		return nil
	}
	note = strings.Join(strings.Fields(note), " ")
	comment := fmt.Sprintf("# Added by corral %s: %s", time.Now().UTC().Format(time.RFC3339), note)
	updated := insertNetworkAllow(data, tomlString(pattern), comment)

	dir, err := fsys.OpenLocal(filepath.Dir(f.path))
	if err != nil {
		return err
	}
	defer dir.Close()
	name := filepath.Base(f.path)
	if _, err := writeAtomic(dir, name, updated, keptMode(info), info, nil); err != nil {
		return fmt.Errorf("writing the policy file: %w", err)
	}
	err = checkNetworkAdded(f.path, updated, old, pattern)
	if err == nil {
		_, err = f.build()
	}
	if err != nil {
		if _, rerr := writeAtomic(dir, name, data, keptMode(info), info, nil); rerr != nil {
			return errors.Join(err, fmt.Errorf("restoring the policy file: %w", rerr))
		}
		return fmt.Errorf("%q could not be added to [network] allow of %s, which is as it was (%v): add it by hand", pattern, f.path, err)
	}
	return nil
}

// checkNetworkAdded checks that data's [network] table is old with pattern
// at the head of its allow list.
func checkNetworkAdded(name string, data []byte, old egress.Network, pattern string) error {
	got, err := egress.ParseNetwork(name, data)
	if err != nil {
		return err
	}
	if !slices.Equal(got.Allow, append([]string{pattern}, old.Allow...)) || !slices.Equal(got.Deny, old.Deny) || !slices.Equal(got.Presets, old.Presets) {
		return errors.New("the file's [network] table is not written in a form corral can extend")
	}
	return nil
}

// insertNetworkAllow returns data with value (a TOML string) added to the
// allow list of its [network] table. It reads only as much TOML as it needs:
// where lines start outside strings and brackets, which of them are table
// headers, and where the table's allow key opens its array. A form it does
// not know (a dotted or inline network table) gets a new table, which then
// does not load: the caller checks.
func insertNetworkAllow(data []byte, value, comment string) []byte {
	lines := tomlLines(data)
	section := -1 // index in lines of the [network] header
	for i, l := range lines {
		if l.header && tableName(data[l.start:l.end]) == "network" {
			section = i
			break
		}
	}
	var out []byte
	switch {
	case section < 0:
		out = append(out, data...)
		if len(out) > 0 && out[len(out)-1] != '\n' {
			out = append(out, '\n')
		}
		out = fmt.Appendf(out, "\n[network]\n%s\nallow = [%s]\n", comment, value)
	default:
		at := -1 // where the allow array opens, just after its '['
		for _, l := range lines[section+1:] {
			if l.header {
				break
			}
			if m := allowKey.FindIndex(data[l.start:l.end]); m != nil {
				at = l.start + m[1]
				break
			}
		}
		if at >= 0 {
			out = append(out, data[:at]...)
			out = fmt.Appendf(out, "\n  %s\n  %s,", comment, value)
			out = append(out, data[at:]...)
		} else {
			h := lines[section]
			out = append(out, data[:h.end]...)
			out = fmt.Appendf(out, "\n%s\nallow = [%s]", comment, value)
			out = append(out, data[h.end:]...)
		}
	}
	return out
}

// allowKey matches the start of a line that opens the allow array.
var allowKey = regexp.MustCompile(`^[ \t]*allow[ \t]*=[ \t]*\[`)

// tomlLine is a line of a TOML file that starts outside any string or array.
type tomlLine struct {
	start, end int // end is before the newline
	header     bool
}

// tomlLines finds the lines of data that start outside strings, comments and
// brackets, and marks the table headers among them.
func tomlLines(data []byte) []tomlLine {
	var lines []tomlLine
	depth := 0
	lineStart := true
	for i := 0; i < len(data); {
		if lineStart && depth == 0 {
			j := i
			for j < len(data) && (data[j] == ' ' || data[j] == '\t') {
				j++
			}
			end := bytes.IndexByte(data[i:], '\n')
			if end < 0 {
				end = len(data)
			} else {
				end += i
			}
			l := tomlLine{start: i, end: end, header: j < len(data) && data[j] == '['}
			lines = append(lines, l)
			if l.header {
				// A header is one line; its brackets are not an array.
				i = end
				continue
			}
		}
		lineStart = false
		switch c := data[i]; {
		case c == '\n':
			lineStart = true
			i++
		case c == '#':
			for i < len(data) && data[i] != '\n' {
				i++
			}
		case c == '"' || c == '\'':
			i = skipTOMLString(data, i)
		case c == '[' || c == '{':
			depth++
			i++
		case c == ']' || c == '}':
			depth = max(depth-1, 0)
			i++
		default:
			i++
		}
	}
	return lines
}

// skipTOMLString returns the index just past the string that starts at i:
// basic or literal, on one line or on many.
func skipTOMLString(data []byte, i int) int {
	q := data[i]
	if bytes.HasPrefix(data[i:], []byte{q, q, q}) {
		for j := i + 3; j < len(data); j++ {
			if q == '"' && data[j] == '\\' {
				j++
				continue
			}
			if bytes.HasPrefix(data[j:], []byte{q, q, q}) {
				// Up to two more quotes may end the string's content.
				k := j + 3
				for n := 0; n < 2 && k < len(data) && data[k] == q; n++ {
					k++
				}
				return k
			}
		}
		return len(data)
	}
	for j := i + 1; j < len(data); j++ {
		switch {
		case q == '"' && data[j] == '\\':
			j++
		case data[j] == q:
			return j + 1
		case data[j] == '\n':
			return j // unterminated: the parser says so
		}
	}
	return len(data)
}

// tableName is the name of a standard table's header line ("[network]  #
// comment"), or "" for another line.
func tableName(line []byte) string {
	m := tableHeader.FindSubmatch(line)
	if m == nil {
		return ""
	}
	return string(m[1])
}

var tableHeader = regexp.MustCompile(`^[ \t]*\[[ \t]*([A-Za-z0-9_-]+)[ \t]*\][ \t]*(#.*)?\r?$`)
