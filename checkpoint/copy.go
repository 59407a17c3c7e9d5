package checkpoint

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
)

// An isolated session works on a private copy of the workspace, kept in the
// workspace's state directory (never inside the workspace), while the user's
// tree and repository are not mounted at all. A git workspace's copy is a
// repository of its own that borrows the user's objects read-only (as git
// clone --reference does): HEAD and the branches, tags and remote-tracking
// refs as they are, HEAD's tree checked out, and, when asked, the user's
// uncommitted changes laid over it. Another workspace is copied file by file,
// sharing the blocks where the filesystem can (reflinks).
//
// The copy is written by the sandbox, so nothing in it is trusted: corral
// never runs git with the copy's repository (its config, hooks, index,
// commondir or alternates) and never follows a link in it. The copy's files
// are read the way checkpoints read a workspace — corral's own git, index
// and config, the copy's .git never looked at — into a store of the copy's
// own beside it, and every object written back is checked against its name.
// What corral trusts about a copy (whose workspace, which commit, the tree it
// started from) is in copy.json beside it, out of the sandbox's reach.

// CopyReference is the path inside the sandbox at which a git copy's
// repository finds the objects of the user's repository: its
// objects/info/alternates names it. Mount CopyInfo.Reference there,
// read-only.
const CopyReference = "/.corral/reference"

// CopyOptions configure Store.NewCopy.
type CopyOptions struct {
	// Session names the copy (the session that works on it); required.
	Session string
	// WithUncommitted lays the user's uncommitted changes and untracked files
	// (not the ignored ones) over HEAD's tree in a git workspace's copy. A
	// copy of another workspace always holds all of it.
	WithUncommitted bool
}

// CopyInfo describes a copy.
type CopyInfo struct {
	Session   string    `json:"session"`
	Workspace string    `json:"workspace"`
	Dir       string    `json:"dir"` // the copy's tree
	Created   time.Time `json:"created"`
	// Git is set for a git workspace's copy: Commit is the user's HEAD it
	// was made from (empty for a repository without commits), Branch the
	// branch HEAD named ("" when detached), Reference the object directory
	// it borrows, Format the object format.
	Git             bool   `json:"git"`
	Commit          string `json:"commit,omitempty"`
	Branch          string `json:"branch,omitempty"`
	Reference       string `json:"reference,omitempty"`
	Format          string `json:"format"`
	WithUncommitted bool   `json:"with_uncommitted,omitempty"`
	// Base is the checkpoint, in the copy's own store, of the tree as copied;
	// BaseTree its tree. The session's changes are what differs from it.
	Base     int    `json:"base"`
	BaseTree string `json:"base_tree"`
	// NotCopied are the user's files left out of the copy (too large,
	// unreadable, special files).
	NotCopied []Skip `json:"not_copied,omitempty"`
}

// Copy is a private copy of a workspace for an isolated session. It outlives
// the session, until applied (Apply) or removed (Remove, GC).
type Copy struct {
	s    *Store // the workspace's
	dir  string // holds copy.json, the tree, the copy's store and its lock
	info CopyInfo
	cs   *Store // the copy's own store
}

// ErrNoCopy is returned for a copy the workspace does not have.
var ErrNoCopy = errors.New("no such copy")

// copyMeta is the name of a copy's description.
const copyMeta = "copy.json"

func (s *Store) copiesDir() string { return filepath.Join(s.dir, "copies") }

// NewCopy makes a private copy of the workspace for opts.Session.
func (s *Store) NewCopy(ctx context.Context, opts CopyOptions) (_ *Copy, err error) {
	if opts.Session == "" {
		return nil, errors.New("checkpoint: a copy needs a session id")
	}
	if err := os.MkdirAll(s.copiesDir(), 0o700); err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	dir := filepath.Join(s.copiesDir(), sanitizeRef(opts.Session))
	if err := os.Mkdir(dir, 0o700); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("checkpoint: session %s has a copy already", opts.Session)
		}
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	fi, err := os.Stat(s.ws)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	c := &Copy{s: s, dir: dir, info: CopyInfo{
		Session: opts.Session, Workspace: s.ws, Dir: filepath.Join(dir, "tree"), Created: time.Now().UTC(),
		Git: s.inGit, Format: s.format, WithUncommitted: opts.WithUncommitted || !s.inGit,
	}}
	if s.inGit {
		err = s.cloneInto(ctx, &c.info)
	} else {
		c.info.NotCopied, err = copyTree(ctx, s.ws, c.info.Dir)
	}
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(c.info.Dir, fi.Mode().Perm()); err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	if uid, gid, ok := fileOwner(fi); ok && asRoot() && uid != 0 {
		// The copy is the workspace owner's, as the workspace is: commands
		// run as them, and make files that are theirs.
		if err := chownTree(c.info.Dir, uid, gid); err != nil {
			return nil, err
		}
	}
	if c.cs, err = c.openStore(); err != nil {
		return nil, err
	}
	if s.inGit && opts.WithUncommitted {
		if err := c.overlayUncommitted(ctx); err != nil {
			return nil, err
		}
	}
	base, err := c.cs.record(ctx, Call{Session: opts.Session, Tool: "copy"})
	if err != nil {
		return nil, err
	}
	c.info.Base, c.info.BaseTree = base.ID, base.Tree
	if s.inGit {
		// Written last: corral's own git never reads it, and the sandbox's
		// git finds the user's objects where they are mounted.
		info := filepath.Join(c.info.Dir, ".git", "objects", "info")
		if err := os.MkdirAll(info, 0o755); err != nil {
			return nil, fmt.Errorf("checkpoint: %w", err)
		}
		if err := writeFileAtomic(filepath.Join(info, "alternates"), []byte(CopyReference+"\n"), 0o644); err != nil {
			return nil, fmt.Errorf("checkpoint: %w", err)
		}
	}
	if err := c.save(); err != nil {
		return nil, err
	}
	return c, nil
}

// cloneInto makes info.Dir a repository of its own with the user's refs and
// HEAD, borrowing the user's objects, and checks HEAD's tree out in it. The
// user's repository is only read: its refs, its HEAD, its objects.
func (s *Store) cloneInto(ctx context.Context, info *CopyInfo) error {
	gitDir, common, err := findRepo(s.ws)
	if err != nil || gitDir == "" {
		return fmt.Errorf("checkpoint: the workspace's repository: %v", err)
	}
	userEnv := append(s.git.baseEnv(), "GIT_DIR="+gitDir, "GIT_OPTIONAL_LOCKS=0")
	args := []string{"init", "-q", "--template="}
	if s.format == "sha256" {
		args = append(args, "--object-format=sha256")
	}
	if _, err := s.git.run(ctx, s.git.baseEnv(), nil, append(args, info.Dir)...); err != nil {
		return err
	}
	dotgit := filepath.Join(info.Dir, ".git")
	refs, err := s.git.run(ctx, userEnv, nil, "for-each-ref", "--format=%(objectname) %(refname)", "refs/heads", "refs/tags", "refs/remotes")
	if err != nil {
		return err
	}
	if err := writeFileAtomic(filepath.Join(dotgit, "packed-refs"), append([]byte("# pack-refs with: sorted \n"), refs...), 0o644); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	head, err := readHead(gitDir)
	if err != nil {
		return err
	}
	if err := writeFileAtomic(filepath.Join(dotgit, "HEAD"), []byte(head+"\n"), 0o644); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if ref, ok := strings.CutPrefix(head, "ref: "); ok {
		info.Branch = strings.TrimPrefix(ref, "refs/heads/")
	}
	info.Reference = filepath.Join(common, "objects")
	out, err := s.git.run(ctx, userEnv, nil, "rev-parse", "-q", "--verify", "HEAD^{commit}")
	if err != nil {
		if exitCode(err) == 1 {
			return nil // no commit yet: an empty copy
		}
		return err
	}
	info.Commit = strings.TrimSpace(string(out))
	copyEnv := append(s.git.baseEnv(), "GIT_DIR="+dotgit, "GIT_WORK_TREE="+info.Dir, "GIT_ALTERNATE_OBJECT_DIRECTORIES="+info.Reference)
	_, err = s.git.run(ctx, copyEnv, nil, "read-tree", "-u", "--reset", info.Commit)
	return err
}

// readHead reads a repository's HEAD: "ref: refs/..." or an object id.
func readHead(gitDir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(gitDir, "HEAD"))
	if err != nil {
		return "", fmt.Errorf("checkpoint: %w", err)
	}
	head := strings.TrimSpace(string(b))
	if ref, ok := strings.CutPrefix(head, "ref: "); ok {
		if !strings.HasPrefix(ref, "refs/") || strings.ContainsAny(ref, " \t\n:?*[\\~^") || strings.Contains(ref, "..") {
			return "", fmt.Errorf("checkpoint: HEAD names %q, not a ref", ref)
		}
		return head, nil
	}
	if _, err := hex.DecodeString(head); err != nil || (len(head) != 40 && len(head) != 64) {
		return "", fmt.Errorf("checkpoint: HEAD is %q, neither a ref nor an object id", head)
	}
	return head, nil
}

// overlayUncommitted writes the user's uncommitted changes and untracked
// files over the copy: what the working tree differs in from the copy, as
// checkpoints record it (ignored files and files over the size cap left out).
func (c *Copy) overlayUncommitted(ctx context.Context) error {
	unlock, err := c.s.lock(ctx)
	if err != nil {
		return err
	}
	user, err := c.s.snapshot(ctx)
	unlock()
	if err != nil {
		return err
	}
	cur, err := c.cs.treeOf(ctx, Worktree)
	if err != nil {
		return err
	}
	o, err := c.cs.openObjects(ctx)
	if err != nil {
		return err
	}
	actions, err := c.cs.planTrees(ctx, o, user.tree, user.skipped, cur, RestoreOptions{})
	o.close()
	if err != nil {
		return err
	}
	for _, sk := range user.skipped {
		if sk.Reason != "repository" {
			c.info.NotCopied = append(c.info.NotCopied, sk)
		}
	}
	return c.cs.applyIn(ctx, c.info.Dir, actions)
}

// openStore opens the copy's own store: corral's repository, index and
// objects in the copy's directory; the copy's tree as its working tree;
// the workspace's objects borrowed, and its info/exclude. The copy's .git is
// never read.
func (c *Copy) openStore() (*Store, error) {
	dir := filepath.Join(c.dir, "store")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	cs := &Store{
		opts:     Options{Workspace: c.info.Dir, StateDir: c.dir, MaxFileSize: maxObject, Git: c.s.opts.Git, Logger: c.s.opts.Logger},
		log:      c.s.log,
		ws:       c.info.Dir,
		dir:      dir,
		format:   c.info.Format,
		maxBytes: maxObject,
		exclude:  c.s.exclude,
	}
	cs.git = &git{bin: c.s.git.bin, stateDir: dir, shim: filepath.Join(dir, "git"), workTree: c.info.Dir,
		index: filepath.Join(dir, "index"), alternates: c.s.git.objects}
	cs.git.repo, cs.git.objects = cs.git.shim, filepath.Join(cs.git.shim, "objects")
	if err := initShim(cs.git, cs.format); err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	return cs, nil
}

func (c *Copy) save() error {
	b, err := json.MarshalIndent(c.info, "", "  ")
	if err != nil {
		return err
	}
	if err := writeFileAtomic(filepath.Join(c.dir, copyMeta), b, 0o600); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}

// Copies lists the workspace's copies, oldest first.
func (s *Store) Copies(ctx context.Context) ([]CopyInfo, error) {
	ents, err := os.ReadDir(s.copiesDir())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	var out []CopyInfo
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(s.copiesDir(), e.Name(), copyMeta))
		if err != nil {
			continue // being made, or half removed
		}
		var info CopyInfo
		if err := json.Unmarshal(b, &info); err != nil || info.Session == "" {
			s.log.Warn("checkpoint: unreadable copy", "dir", e.Name(), "err", err)
			continue
		}
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out, nil
}

// OpenCopy opens the copy of session, which may be given by a prefix of its
// id that no other copy shares; the only copy when session is empty.
func (s *Store) OpenCopy(ctx context.Context, session string) (*Copy, error) {
	all, err := s.Copies(ctx)
	if err != nil {
		return nil, err
	}
	var found []CopyInfo
	for _, info := range all {
		if info.Session == session {
			found = []CopyInfo{info}
			break
		}
		if strings.HasPrefix(info.Session, session) {
			found = append(found, info)
		}
	}
	switch {
	case len(found) == 0 && session == "":
		return nil, fmt.Errorf("%w: the workspace has no isolated session's copy", ErrNoCopy)
	case len(found) == 0:
		return nil, fmt.Errorf("%w of session %q", ErrNoCopy, session)
	case len(found) > 1:
		return nil, &AmbiguousError{Session: session, Copies: found}
	}
	c := &Copy{s: s, dir: filepath.Join(s.copiesDir(), sanitizeRef(found[0].Session)), info: found[0]}
	if c.cs, err = c.openStore(); err != nil {
		return nil, err
	}
	return c, nil
}

// AmbiguousError is returned by OpenCopy when several copies match.
type AmbiguousError struct {
	Session string
	Copies  []CopyInfo
}

func (e *AmbiguousError) Error() string {
	ids := make([]string, len(e.Copies))
	for i, c := range e.Copies {
		ids[i] = c.Session
	}
	if e.Session == "" {
		return fmt.Sprintf("the workspace has %d copies (%s): name one", len(ids), strings.Join(ids, ", "))
	}
	return fmt.Sprintf("%q names %d copies (%s): give more of the id", e.Session, len(ids), strings.Join(ids, ", "))
}

// Info describes the copy.
func (c *Copy) Info() CopyInfo { return c.info }

// Checkpoints is the copy's own store: its base checkpoint, and those a
// session records in it before each change.
func (c *Copy) Checkpoints() *Store { return c.cs }

// Hold marks the copy in use by a session until release is called (or the
// process ends): Apply and Remove refuse meanwhile, and so does a second Hold.
func (c *Copy) Hold(ctx context.Context) (release func(), err error) {
	unlock, err := flock(ctx, filepath.Join(c.dir, "lock"), true, false)
	if errors.Is(err, errLocked) {
		return nil, fmt.Errorf("the copy of session %s: %w", c.info.Session, ErrBusy)
	}
	return unlock, err
}

// Changes lists what the session changed in the copy: the files that differ
// from the tree as copied.
func (c *Copy) Changes(ctx context.Context, paths ...string) ([]Change, error) {
	cur, err := c.cs.treeOf(ctx, Worktree)
	if err != nil {
		return nil, err
	}
	return c.cs.diffTrees(ctx, c.info.BaseTree, cur, paths...)
}

// Diff writes to w what the session changed in the copy, as a unified diff
// with a summary of the files first (paths prefixed a/ and b/ as git's).
func (c *Copy) Diff(ctx context.Context, w io.Writer, paths ...string) error {
	cur, err := c.cs.treeOf(ctx, Worktree)
	if err != nil {
		return err
	}
	return c.cs.patch(ctx, w, c.info.BaseTree, cur, "a", "b", paths...)
}

// Remove removes the copy, unless a session holds it.
func (c *Copy) Remove(ctx context.Context) error {
	release, err := c.Hold(ctx)
	if err != nil {
		return err
	}
	defer release()
	return removeCopyDir(c.dir)
}

// removeCopyDir removes a copy's directory: its description first, so that
// a removal cut short leaves no copy half listed.
func removeCopyDir(dir string) error {
	if err := os.Remove(filepath.Join(dir, copyMeta)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("checkpoint: %w", err)
	}
	// A command may have left directories without write permission.
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			if fi, err := d.Info(); err == nil && fi.Mode().Perm()&0o700 != 0o700 {
				os.Chmod(p, fi.Mode().Perm()|0o700)
			}
		}
		return nil
	})
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("checkpoint: removing the copy: %w", err)
	}
	return nil
}

// chownTree gives dir and everything in it to uid:gid, links themselves
// rather than what they name.
func chownTree(dir string, uid, gid int) error {
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
	if err != nil {
		return fmt.Errorf("checkpoint: giving the copy to the workspace's owner: %w", err)
	}
	return nil
}

// copyTree copies the directory src to dst, which must not exist: files with
// their permission bits (sharing blocks with the original where the
// filesystem can), symbolic links as links (never followed), directories.
// Named pipes, sockets and devices are left out, and so are files it cannot
// read; both are returned.
func copyTree(ctx context.Context, src, dst string) ([]Skip, error) {
	var skipped []Skip
	type dirMode struct {
		path string
		mode fs.FileMode
	}
	var dirs []dirMode
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		rel, rerr := filepath.Rel(src, p)
		if rerr != nil {
			return rerr
		}
		if err != nil {
			if p == src {
				return err
			}
			skipped = append(skipped, Skip{Path: filepath.ToSlash(rel), Reason: "unreadable"})
			if d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		target := filepath.Join(dst, rel)
		fi, err := d.Info()
		if err != nil {
			skipped = append(skipped, Skip{Path: filepath.ToSlash(rel), Reason: "unreadable"})
			return nil
		}
		switch {
		case d.IsDir():
			// Writable while it is filled; its own mode at the end.
			if err := os.Mkdir(target, fi.Mode().Perm()|0o700); err != nil {
				return err
			}
			dirs = append(dirs, dirMode{target, fi.Mode().Perm()})
		case fi.Mode()&fs.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				skipped = append(skipped, Skip{Path: filepath.ToSlash(rel), Reason: "unreadable"})
				return nil
			}
			if err := os.Symlink(link, target); err != nil {
				return err
			}
		case fi.Mode().IsRegular():
			if err := copyFile(p, target, fi.Mode().Perm()); err != nil {
				if errors.Is(err, fs.ErrPermission) {
					skipped = append(skipped, Skip{Path: filepath.ToSlash(rel), Size: fi.Size(), Reason: "unreadable"})
					return nil
				}
				return err
			}
		default:
			skipped = append(skipped, Skip{Path: filepath.ToSlash(rel), Reason: "special file"})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("checkpoint: copying the workspace: %w", err)
	}
	for _, d := range slices.Backward(dirs) {
		if err := os.Chmod(d.path, d.mode); err != nil {
			return nil, fmt.Errorf("checkpoint: copying the workspace: %w", err)
		}
	}
	return skipped, nil
}

// copyFile copies the regular file src to the new file dst, as a reflink
// where the filesystem can make one.
func copyFile(src, dst string, perm fs.FileMode) error {
	in, err := os.OpenFile(src, os.O_RDONLY|oNoFollow, 0)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if !reflink(out, in) {
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
	}
	if err := out.Chmod(perm); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// changedPaths lists the paths that differ between trees a and b of the
// store (or that it can read), submodules left out.
func (s *Store) changedPaths(ctx context.Context, a, b string) (map[string]bool, error) {
	out, err := s.git.run(ctx, s.git.worktreeEnv(), nil, "diff-tree", "-r", "-z", "--no-renames", "--ignore-submodules=all", "--name-only", a, b)
	if err != nil {
		return nil, err
	}
	m := map[string]bool{}
	for _, p := range bytes.Split(out, []byte{0}) {
		if len(p) > 0 {
			m[string(p)] = true
		}
	}
	return m, nil
}
