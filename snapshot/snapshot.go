// Package snapshot keeps snapshots of sandboxes: an image of a sandbox's
// filesystem (what commands installed or changed outside the workspace), a
// copy of its workspace, and an archive of its /tmp (which holds HOME, where
// `pip install --user` and friends put what they install), so that new
// sessions — one, or the many tasks of a batch — start from where one
// session got to.
//
// A snapshot lives in a store directory ($XDG_STATE_HOME/corral/snapshots by
// default), one directory per name: snapshot.json, workspace/ and tmp.tar;
// its image is corral/snapshot:NAME on the engine. Taking a snapshot of a
// name again replaces it. Images need a backend whose sandboxes can be
// committed (sandbox.Committer: Docker), and the workspace must be a
// directory of this machine.
package snapshot

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/corralhq/corral/fsys"
	"github.com/corralhq/corral/pool"
	"github.com/corralhq/corral/sandbox"
	"github.com/corralhq/corral/sandbox/docker"
	"github.com/corralhq/corral/workspace"
)

// ImageRepository is the repository of snapshot images: a snapshot NAME is
// the image ImageRepository:NAME.
const ImageRepository = "corral/snapshot"

// LabelSnapshot is the label of snapshot images: the snapshot's name.
const LabelSnapshot = "corral.snapshot"

// MaxTmp is the largest /tmp a snapshot keeps.
const MaxTmp = 2 << 30

// namePattern is what a snapshot name may be: an image tag.
var namePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,127}$`)

// CheckName says what is wrong with a snapshot name.
func CheckName(name string) error {
	if !namePattern.MatchString(name) {
		return fmt.Errorf("snapshot name %q: use lower-case letters, digits, '.', '_' and '-' (at most 128), starting with a letter or digit", name)
	}
	return nil
}

// DefaultDir is $XDG_STATE_HOME/corral/snapshots, or
// ~/.local/state/corral/snapshots.
func DefaultDir() (string, error) {
	if d := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "corral", "snapshots"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("snapshot: no state directory: %w", err)
	}
	return filepath.Join(home, ".local", "state", "corral", "snapshots"), nil
}

// Store is a directory of snapshots. Its methods are safe for concurrent
// use on different names.
type Store struct {
	dir string
}

// Open opens the store in dir (DefaultDir when empty), made when missing.
func Open(dir string) (*Store, error) {
	if dir == "" {
		var err error
		if dir, err = DefaultDir(); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	return &Store{dir: abs}, nil
}

// Dir returns the store's directory.
func (s *Store) Dir() string { return s.dir }

// Snapshot describes one snapshot.
type Snapshot struct {
	Name string `json:"name"`
	// Image is the snapshot's image reference, ImageID its ID.
	Image   string `json:"image"`
	ImageID string `json:"image_id"`
	// Base is the image the snapshotted sandbox ran.
	Base string `json:"base"`
	// Session is the snapshotted sandbox's session id.
	Session string    `json:"session"`
	Created time.Time `json:"created"`
	// Workspace is the path the workspace had in the sandbox; Files and
	// Bytes what its copy holds; Skipped what was left out of it.
	Workspace string   `json:"workspace"`
	Files     int      `json:"files"`
	Bytes     int64    `json:"bytes"`
	Skipped   []string `json:"skipped,omitempty"`
	// Tmp says /tmp was archived (tmp.tar); TmpNote why not, or what it
	// could not read.
	Tmp     bool   `json:"tmp"`
	TmpNote string `json:"tmp_note,omitempty"`

	dir string // the snapshot's directory in its store
}

// WorkspaceDir returns the directory of the copy of the workspace: a
// source for the workspace of a session that starts from the snapshot
// (workspace.Source{Dir: ...}, corral.SessionOptions.Fill).
func (sn *Snapshot) WorkspaceDir() string { return filepath.Join(sn.dir, "workspace") }

// Take snapshots box, a running sandbox, as name: its filesystem becomes
// the image ImageRepository:name, its workspace is copied, its /tmp
// archived. A snapshot of the same name is replaced once the new one is
// whole. Take it between commands: what runs meanwhile may be caught
// half-way. A sandbox that cannot be committed, or whose workspace is not
// on this machine, is an error satisfying errors.Is(err,
// errors.ErrUnsupported).
func (s *Store) Take(ctx context.Context, box sandbox.Sandbox, name string) (_ *Snapshot, err error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	c, ok := unwrap(box).(sandbox.Committer)
	if !ok {
		return nil, fmt.Errorf("snapshot: a %T cannot be committed to an image (the Docker backend's can): %w", unwrap(box), errors.ErrUnsupported)
	}
	root, err := box.FS(ctx)
	if err != nil {
		return nil, fmt.Errorf("snapshot: the workspace: %w", err)
	}
	local, ok := root.(*fsys.Local)
	root.Close()
	if !ok {
		return nil, fmt.Errorf("snapshot: the sandbox's workspace is not a directory of this machine: %w", errors.ErrUnsupported)
	}
	tmp, err := os.MkdirTemp(s.dir, "."+name+".new-")
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	defer func() {
		if err != nil {
			pool.RemoveDir(tmp)
		}
	}()
	sn := &Snapshot{Name: name, Image: ImageRepository + ":" + name, Session: box.Session(), Created: time.Now().UTC(), Workspace: box.Workspace(), dir: tmp}
	// /tmp first: the commit pauses the sandbox, the archive runs in it.
	if err := sn.archiveTmp(ctx, box); err != nil {
		return nil, err
	}
	if err := os.Mkdir(sn.WorkspaceDir(), 0o755); err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	if sn.Skipped, err = workspace.Copy(ctx, local.Name(), sn.WorkspaceDir()); err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	sn.Files, sn.Bytes = treeSize(sn.WorkspaceDir())
	old, _ := s.Get(name)
	if sn.ImageID, err = c.Commit(ctx, sn.Image, map[string]string{LabelSnapshot: name}); err != nil {
		return nil, err
	}
	if sn.Base, err = baseImage(box); err != nil {
		return nil, err
	}
	if err := writeMeta(sn); err != nil {
		return nil, err
	}
	// In place of the old one, if any: the new directory takes its name.
	final := filepath.Join(s.dir, name)
	var gone string
	if _, err := os.Lstat(final); err == nil {
		gone = filepath.Join(s.dir, "."+name+".old-"+random())
		if err := os.Rename(final, gone); err != nil {
			return nil, fmt.Errorf("snapshot: %w", err)
		}
	}
	if err := os.Rename(tmp, final); err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	sn.dir = final
	if gone != "" {
		pool.RemoveDir(gone)
	}
	if old != nil && old.ImageID != "" && old.ImageID != sn.ImageID {
		// The tag moved to the new image; the old one goes unless in use.
		_ = docker.RemoveImage(context.WithoutCancel(ctx), old.ImageID)
	}
	return sn, nil
}

// baseImage is the image box runs, as its configuration names it.
func baseImage(box sandbox.Sandbox) (string, error) {
	type imager interface{ Image() string }
	if im, ok := unwrap(box).(imager); ok {
		return im.Image(), nil
	}
	return "", nil
}

// unwrap returns the backend's sandbox under a pool's.
func unwrap(box sandbox.Sandbox) sandbox.Sandbox {
	for {
		u, ok := box.(interface{ Unwrap() sandbox.Sandbox })
		if !ok {
			return box
		}
		box = u.Unwrap()
	}
}

// archiveTmp writes the sandbox's /tmp, as its commands' user sees it,
// into tmp.tar: what is on the /tmp filesystem itself, not the directories
// mounted into it (the workspace, the logs).
func (sn *Snapshot) archiveTmp(ctx context.Context, box sandbox.Sandbox) error {
	f, err := os.Create(filepath.Join(sn.dir, "tmp.tar"))
	if err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	defer f.Close()
	var stderr capped
	res, err := box.Exec(ctx, sandbox.ExecRequest{
		Command: `tar --version 2>/dev/null | grep -q GNU || { echo "no GNU tar in the image" >&2; exit 3; }
exec tar --one-file-system --ignore-failed-read --warning=no-file-ignored --warning=no-file-changed -C /tmp -cf - .`,
		Dir:         "/",
		Pipes:       true,
		Output:      f,
		Stderr:      &stderr,
		OutputLimit: MaxTmp,
		Timeout:     10 * time.Minute,
	})
	switch {
	case err != nil:
		return fmt.Errorf("snapshot: archiving /tmp: %w", err)
	case res.ExitCode == 3:
		sn.TmpNote = "/tmp was not kept: the image has no GNU tar"
	case res.OutputBytes > MaxTmp:
		return fmt.Errorf("snapshot: /tmp holds more than %d MiB: remove what is not needed first", MaxTmp>>20)
	case res.ExitCode > 1:
		return fmt.Errorf("snapshot: archiving /tmp: tar exited %d: %s", res.ExitCode, stderr.String())
	default:
		sn.Tmp = true
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			sn.TmpNote = msg
		}
	}
	if !sn.Tmp {
		f.Close()
		os.Remove(f.Name())
	}
	return nil
}

// Restore puts the snapshot's /tmp (HOME with it) into box, a sandbox
// started from the snapshot's image, as its commands' user. The workspace
// is the caller's to fill, from WorkspaceDir.
func (sn *Snapshot) Restore(ctx context.Context, box sandbox.Sandbox) error {
	if !sn.Tmp {
		return nil
	}
	f, err := os.Open(filepath.Join(sn.dir, "tmp.tar"))
	if err != nil {
		return fmt.Errorf("snapshot %s: %w", sn.Name, err)
	}
	defer f.Close()
	var out capped
	res, err := box.Exec(ctx, sandbox.ExecRequest{
		// What is in /tmp already (the new workspace's mount points, the
		// logs) is left as it is.
		Command: "exec tar -C /tmp --skip-old-files -xf -",
		Dir:     "/",
		Pipes:   true,
		Stdin:   f,
		Output:  &out,
		Stderr:  &out,
		Timeout: 10 * time.Minute,
	})
	if err != nil {
		return fmt.Errorf("snapshot %s: restoring /tmp: %w", sn.Name, err)
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("snapshot %s: restoring /tmp: tar exited %d: %s", sn.Name, res.ExitCode, out.String())
	}
	return nil
}

// Get returns the snapshot name; an error satisfying errors.Is(err,
// fs.ErrNotExist) when there is none.
func (s *Store) Get(name string) (*Snapshot, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	dir := filepath.Join(s.dir, name)
	b, err := os.ReadFile(filepath.Join(dir, "snapshot.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no snapshot %q in %s: %w", name, s.dir, fs.ErrNotExist)
	}
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", name, err)
	}
	sn := &Snapshot{}
	if err := json.Unmarshal(b, sn); err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", name, err)
	}
	if sn.Name != name {
		return nil, fmt.Errorf("snapshot %s: its record names %q", name, sn.Name)
	}
	sn.dir = dir
	return sn, nil
}

// List returns the store's snapshots, by name.
func (s *Store) List() ([]*Snapshot, error) {
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, err
	}
	var out []*Snapshot
	for _, e := range ents {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		sn, err := s.Get(e.Name())
		if err != nil {
			continue
		}
		out = append(out, sn)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Remove removes the snapshot name: its directory and its image (unless a
// container still uses it).
func (s *Store) Remove(ctx context.Context, name string) error {
	sn, err := s.Get(name)
	if err != nil {
		return err
	}
	gone := filepath.Join(s.dir, "."+name+".old-"+random())
	if err := os.Rename(sn.dir, gone); err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	err = pool.RemoveDir(gone)
	if ierr := docker.RemoveImage(ctx, sn.Image); ierr != nil {
		err = errors.Join(err, ierr)
	}
	return err
}

// writeMeta writes sn's record into its directory.
func writeMeta(sn *Snapshot) error {
	b, err := json.MarshalIndent(sn, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(sn.dir, "snapshot.json"), append(b, '\n'), 0o644)
}

// treeSize counts the regular files under dir and their bytes.
func treeSize(dir string) (files int, bytes int64) {
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				files++
				bytes += fi.Size()
			}
		}
		return nil
	})
	return files, bytes
}

func random() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// capped keeps the first 4 KiB written to it.
type capped struct{ b []byte }

func (c *capped) Write(p []byte) (int, error) {
	if room := 4096 - len(c.b); room > 0 {
		c.b = append(c.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (c *capped) String() string { return strings.TrimSpace(string(c.b)) }

var _ io.Writer = (*capped)(nil)
