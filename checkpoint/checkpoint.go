// Package checkpoint records a workspace before each change an agent makes and
// gives it back: a checkpoint is the whole tree of the workspace (tracked and
// untracked files; ignored ones only when asked), taken from the host before a
// call that may change it, and a restore makes the tree exactly that again.
//
// A checkpoint is a commit in a repository of corral's own, in the state
// directory, which the sandbox cannot reach: its objects, its ref
// (refs/corral/<session>/<n>), the index it is made through and the list of
// checkpoints are all there. In a git workspace corral's index is seeded from
// a copy of the repository's index, so that the stat data of unchanged files
// is reused (the way git stash create works), and the blobs it names are
// brought over from the repository's objects once; nothing is written to the
// workspace's repository, and nothing a checkpoint needs lives only there: a
// command may delete or corrupt the repository's objects and refs, or make the
// workspace anew at the same path, and the checkpoints stay whole. Every
// object a restore reads is checked against its name.
package checkpoint

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// DefaultMaxFileSize is the largest file a checkpoint records; larger new or
// changed files are listed as skipped.
const DefaultMaxFileSize = 10 << 20

// Options configure a Store.
type Options struct {
	// Workspace is the directory checkpointed.
	Workspace string
	// StateDir holds corral's checkpoint state; DefaultStateDir() when empty.
	StateDir string
	// MaxFileSize caps the files recorded (DefaultMaxFileSize when zero;
	// negative: no cap).
	MaxFileSize int64
	// IncludeIgnored records the files .gitignore ignores too.
	IncludeIgnored bool
	// Git is the git program; "git" on PATH when empty.
	Git string
	// Logger receives diagnostics; discarded when nil.
	Logger *slog.Logger
}

// DefaultStateDir is $XDG_STATE_HOME/corral/checkpoints, or
// ~/.local/state/corral/checkpoints.
func DefaultStateDir() (string, error) {
	if d := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "corral", "checkpoints"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("checkpoint: no state directory: %w", err)
	}
	return filepath.Join(home, ".local", "state", "corral", "checkpoints"), nil
}

// Checkpoint is one recorded state of the workspace, taken before a call.
type Checkpoint struct {
	// ID numbers the workspace's checkpoints, from 1, across sessions.
	ID      int       `json:"id"`
	Session string    `json:"session"`
	Call    string    `json:"call,omitempty"`
	Tool    string    `json:"tool,omitempty"`
	Command string    `json:"command,omitempty"` // a bash call's command
	Path    string    `json:"path,omitempty"`    // an edit's or a write's path
	Time    time.Time `json:"time"`
	Commit  string    `json:"commit"`
	Tree    string    `json:"tree"`
	Ref     string    `json:"ref,omitempty"`
	// Changed are the files that differ from the previous checkpoint of the
	// workspace (what the calls since it, or anyone else, changed), at most
	// maxChanged of them; Files counts them all.
	Changed []Change `json:"changed,omitempty"`
	Files   int      `json:"files"`
	Added   int      `json:"added"`   // lines, over Changed
	Removed int      `json:"removed"` // lines, over Changed
	// Skipped are the files left out of this checkpoint.
	Skipped []Skip `json:"skipped,omitempty"`
	// Unchanged is set when the tree is that of the previous checkpoint.
	Unchanged bool `json:"unchanged,omitempty"`
	// Notice says what corral repaired or started anew before this
	// checkpoint: a workspace made anew at the same path, an index or an
	// object it could not use.
	Notice string `json:"notice,omitempty"`
}

// Change is a file that differs between two checkpoints.
type Change struct {
	Path string `json:"path"`
	// Status is "A" (added), "M" (modified), "D" (deleted) or "T" (its type
	// changed: file, symbolic link, executable).
	Status string `json:"status"`
	// Added and Removed count lines; both are -1 for a binary file.
	Added   int `json:"added"`
	Removed int `json:"removed"`
}

// Skip is a file a checkpoint left out, and why.
type Skip struct {
	Path   string `json:"path"`
	Size   int64  `json:"size,omitempty"`
	Reason string `json:"reason"` // "too large", "repository", "unreadable"
}

// maxChanged bounds the changes a checkpoint lists.
const maxChanged = 1000

// Call is what a checkpoint is taken before.
type Call struct {
	Session string
	Call    string
	Tool    string
	Command string
	Path    string
}

// Store is the checkpoints of one workspace. Its methods are safe for
// concurrent use, also by several processes.
type Store struct {
	opts   Options
	log    *slog.Logger
	ws     string // the workspace's real path
	dir    string // the workspace's state directory
	git    *git
	inGit  bool   // the workspace is the top of a git repository
	format string // the object format, "sha1" or "sha256"
	// exclude is a file of ignore patterns beside the .gitignore files: the
	// repository's info/exclude; "" for none.
	exclude  string
	maxBytes int64
	// notice is what Open found and repaired, told with the next
	// checkpoint.
	notice string
}

// Meta is what a workspace's state directory says about it.
type meta struct {
	Workspace string `json:"workspace"`
	Git       bool   `json:"git"`
	// ID names the workspace's directory and its .git (see
	// fileIdentity): another one made at the same path has another.
	ID string `json:"id,omitempty"`
}

// Open opens the checkpoints of opts.Workspace, making its state directory
// when needed.
func Open(ctx context.Context, opts Options) (*Store, error) {
	if opts.Workspace == "" {
		return nil, errors.New("checkpoint: no workspace given")
	}
	ws, err := filepath.Abs(opts.Workspace)
	if err == nil {
		ws, err = filepath.EvalSymlinks(ws)
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint: workspace: %w", err)
	}
	if fi, err := os.Stat(ws); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("checkpoint: workspace %s is not a directory", ws)
	}
	if opts.StateDir == "" {
		if opts.StateDir, err = DefaultStateDir(); err != nil {
			return nil, err
		}
	}
	bin := opts.Git
	if bin == "" {
		if bin, err = exec.LookPath("git"); err != nil {
			return nil, fmt.Errorf("checkpoint: git is needed: %w", err)
		}
	}
	s := &Store{opts: opts, log: opts.Logger, ws: ws, maxBytes: opts.MaxFileSize}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.maxBytes == 0 {
		s.maxBytes = DefaultMaxFileSize
	}
	if sd, err := filepath.Abs(opts.StateDir); err == nil {
		if r, err := filepath.Rel(ws, sd); err == nil && r != ".." && !strings.HasPrefix(r, "../") {
			return nil, fmt.Errorf("checkpoint: the state directory %s is inside the workspace", sd)
		}
	}
	s.dir = filepath.Join(opts.StateDir, workspaceKey(ws))
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return nil, fmt.Errorf("checkpoint: state directory: %w", err)
	}
	gitDir, common, err := findRepo(ws)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	s.git = &git{bin: bin, stateDir: s.dir, shim: filepath.Join(s.dir, "git"), workTree: ws, index: filepath.Join(s.dir, "index")}
	s.git.repo, s.git.objects = s.git.shim, filepath.Join(s.git.shim, "objects")
	s.format = "sha1"
	if gitDir != "" {
		s.inGit = true
		s.git.source = filepath.Join(common, "objects")
		s.format = objectFormat(ctx, s.git, common)
		s.exclude = filepath.Join(common, "info", "exclude")
	}
	unlock, err := s.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := initShim(s.git, s.format); err != nil {
		return nil, fmt.Errorf("checkpoint: state directory: %w", err)
	}
	if err := s.checkIdentity(); err != nil {
		return nil, err
	}
	return s, nil
}

// checkIdentity compares the workspace with the one the state directory
// was made for: another directory, or another repository, at the same path
// (or the state of an older corral) makes corral's index describe files that
// are not there, and it is made again from the workspace's. The checkpoints
// taken stay, and can be restored. The caller holds the lock.
func (s *Store) checkIdentity() error {
	m := meta{Workspace: s.ws, Git: s.inGit, ID: fileIdentity(s.ws) + "|" + fileIdentity(filepath.Join(s.ws, ".git"))}
	name := filepath.Join(s.dir, "workspace.json")
	var old meta
	b, err := os.ReadFile(name)
	if err == nil && json.Unmarshal(b, &old) == nil && old.ID == m.ID && old.Git == m.Git {
		return nil
	}
	if err == nil {
		if err := os.Remove(s.git.index); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("checkpoint: state directory: %w", err)
		}
		if old.ID != "" {
			s.notice = fmt.Sprintf("the workspace %s was made anew since the last checkpoint (another directory or repository at the same path): corral started its record of the files anew; the earlier checkpoints can still be restored", s.ws)
			s.log.Warn("checkpoint: "+s.notice, "workspace", s.ws)
		}
	}
	b, _ = json.Marshal(m)
	if err := writeFileAtomic(name, b, 0o600); err != nil {
		return fmt.Errorf("checkpoint: state directory: %w", err)
	}
	return nil
}

// Workspace is the real path of the workspace.
func (s *Store) Workspace() string { return s.ws }

// Git says whether the workspace is a git repository, whose index and
// objects a checkpoint starts from.
func (s *Store) Git() bool { return s.inGit }

// workspaceKey names a workspace's state directory: its base name and a hash
// of its real path.
func workspaceKey(ws string) string {
	h := sha256.Sum256([]byte(ws))
	base := strings.Map(func(r rune) rune {
		if r == '-' || r == '_' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			return r
		}
		return '_'
	}, filepath.Base(ws))
	if len(base) > 40 {
		base = base[:40]
	}
	return base + "-" + hex.EncodeToString(h[:8])
}

// lock serialises the work on the state of the workspace, across processes.
func (s *Store) lock(ctx context.Context) (func(), error) {
	return flock(ctx, filepath.Join(s.dir, "lock"), true, true)
}

// logFile is the list of checkpoints, one JSON object a line.
func (s *Store) logFile() string { return filepath.Join(s.dir, "log.jsonl") }

// List returns the workspace's checkpoints, oldest first.
func (s *Store) List(ctx context.Context) ([]Checkpoint, error) {
	f, err := os.Open(s.logFile())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	defer f.Close()
	var out []Checkpoint
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
	for sc.Scan() {
		var c Checkpoint
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil || c.ID == 0 {
			s.log.Warn("checkpoint: unreadable log line", "workspace", s.ws, "err", err)
			continue
		}
		out = append(out, c)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("checkpoint: reading the log: %w", err)
	}
	return out, nil
}

// ErrNotFound is returned for a checkpoint the workspace does not have.
var ErrNotFound = errors.New("no such checkpoint")

// Get returns checkpoint id.
func (s *Store) Get(ctx context.Context, id int) (Checkpoint, error) {
	all, err := s.List(ctx)
	if err != nil {
		return Checkpoint{}, err
	}
	for _, c := range all {
		if c.ID == id {
			return c, nil
		}
	}
	return Checkpoint{}, fmt.Errorf("checkpoint %d: %w", id, ErrNotFound)
}

// last is the state the next checkpoint starts from.
type last struct {
	ID     int    `json:"id"`
	Commit string `json:"commit"`
	Tree   string `json:"tree"`
}

func (s *Store) readLast() last {
	var l last
	if b, err := os.ReadFile(filepath.Join(s.dir, "last.json")); err == nil {
		_ = json.Unmarshal(b, &l)
	}
	return l
}

func (s *Store) writeLast(l last) error {
	b, _ := json.Marshal(l)
	return writeFileAtomic(filepath.Join(s.dir, "last.json"), b, 0o600)
}

// appendLog adds c to the log.
func (s *Store) appendLog(c Checkpoint) error {
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(s.logFile(), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// refName is the ref of a checkpoint.
func refName(session string, id int) string {
	return "refs/corral/" + sanitizeRef(session) + "/" + strconv.Itoa(id)
}

// sanitizeRef makes a session id a valid ref component.
func sanitizeRef(s string) string {
	if s == "" {
		return "session"
	}
	b := []byte(s)
	for i, c := range b {
		if !(c == '-' || c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			b[i] = '_'
		}
	}
	if len(b) > 64 {
		b = b[:64]
	}
	return string(b)
}
