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
	"strings"
	"sync"
	"time"
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
