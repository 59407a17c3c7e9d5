package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"sort"
	"strings"
)

// ApplyOptions configure Copy.Apply.
type ApplyOptions struct {
	// Stash sets the user's uncommitted changes aside first, with git stash
	// (untracked files included), when the workspace has some. Outside git
	// there is nothing to stash into: the tree as it is is recorded as a
	// checkpoint (as before every apply) and the session's changes go over
	// it, unless they touch a file the user changed.
	Stash bool
	// DryRun says what Apply would do and changes nothing.
	DryRun bool
}

// ApplyResult is what Apply did, or would do.
type ApplyResult struct {
	Copy CopyInfo `json:"copy"`
	// Changes are the session's: the files of the copy that differ from the
	// tree as copied.
	Changes []Change `json:"changes"`
	// Actions are the writes and removals in the workspace.
	Actions []Action `json:"actions"`
	// NotApplied are the copy's files its snapshot left out (over 1 GiB,
	// repositories a command made, unreadable ones): a change to them is not
	// carried over.
	NotApplied []Skip `json:"not_applied,omitempty"`
	// Stashed is the commit of the stash made of the user's changes, when
	// Stash set them aside.
	Stashed string `json:"stashed,omitempty"`
	// Before is the checkpoint of the workspace taken just before the
	// changes were written (after the stash): restoring it undoes the apply.
	Before Checkpoint `json:"before"`
	// Applied is set when the changes were written and the copy removed.
	Applied bool `json:"applied"`
}

// ErrDirty and ErrConflict are what a DirtyError and a ConflictError match.
var (
	ErrDirty    = errors.New("the workspace has uncommitted changes")
	ErrConflict = errors.New("the session's changes conflict with the workspace")
)

// DirtyError is returned by Apply for a workspace with uncommitted changes
// (outside git: changes since the copy was made), unless Stash is set.
type DirtyError struct {
	Paths []string
	Git   bool
}

func (e *DirtyError) Error() string {
	if !e.Git {
		return fmt.Sprintf("the workspace changed since the copy was made: %s", listPaths(e.Paths))
	}
	return fmt.Sprintf("%v: %s", ErrDirty, listPaths(e.Paths))
}

func (e *DirtyError) Is(target error) bool { return target == ErrDirty }

// ConflictError is returned by Apply when a file the session changed was
// changed in the workspace too since the copy was made (or is there, ignored
// or not recorded, where the session made a new one). Nothing is written.
type ConflictError struct {
	Paths []string
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("%v: %s changed in both", ErrConflict, listPaths(e.Paths))
}

func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

func listPaths(ps []string) string {
	const most = 10
	if len(ps) <= most {
		return strings.Join(ps, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(ps[:most], ", "), len(ps)-most)
}

// Apply brings the session's changes — what differs in the copy from the
// tree as copied — into the user's working tree, as unstaged changes: files
// written, created and removed, modes and symbolic links included; the index,
// HEAD and the branches are not touched. It refuses, writing nothing:
//   - while a session holds the copy, or one runs on the workspace (ErrBusy);
//   - when the workspace has uncommitted changes (ErrDirty), unless
//     opts.Stash; with --with-uncommitted, the changes the copy started
//     with do not count; outside git, any change since the copy;
//   - when a file the session changed was changed in the workspace since
//     the copy was made (ErrConflict).
//
// It takes a checkpoint of the workspace before writing (Before: restoring it
// undoes the apply), and removes the copy once applied.
func (c *Copy) Apply(ctx context.Context, opts ApplyOptions) (res ApplyResult, err error) {
	res.Copy = c.info
	release, err := c.Hold(ctx)
	if err != nil {
		return res, err
	}
	defer release()
	unlockSession, err := flock(ctx, c.s.dir+"/session.lock", true, false)
	if errors.Is(err, errLocked) {
		return res, ErrBusy
	}
	if err != nil {
		return res, err
	}
	defer unlockSession()

	// The session's changes: the copy now against the copy as made.
	now, err := c.cs.record(ctx, Call{Session: c.info.Session, Tool: "apply", Command: "corral apply " + c.info.Session})
	if err != nil {
		return res, err
	}
	res.NotApplied = now.Skipped
	if res.Changes, err = c.cs.diffTrees(ctx, c.info.BaseTree, now.Tree); err != nil {
		return res, err
	}
	o, err := c.cs.openObjects(ctx)
	if err != nil {
		return res, err
	}
	defer o.close()
	if res.Actions, err = c.cs.planTrees(ctx, o, now.Tree, now.Skipped, c.info.BaseTree, RestoreOptions{}); err != nil {
		return res, err
	}
	if len(res.Changes) == 0 {
		return res, nil
	}

	// The workspace: as it is, then what the user changed.
	var user snap
	record := func() error {
		if opts.DryRun {
			unlock, err := c.s.lock(ctx)
			if err != nil {
				return err
			}
			defer unlock()
			user, err = c.s.snapshot(ctx)
			return err
		}
		before, err := c.s.record(ctx, Call{Session: "apply", Tool: "apply", Command: "corral apply " + c.info.Session})
		if err != nil {
			return err
		}
		res.Before = before
		user = snap{tree: before.Tree, skipped: before.Skipped}
		return nil
	}
	if err := record(); err != nil {
		return res, err
	}
	dirty, err := c.dirty(ctx, user)
	if err != nil {
		return res, err
	}
	stashed := false
	if len(dirty) > 0 {
		switch {
		case !opts.Stash:
			return res, &DirtyError{Paths: dirty, Git: c.info.Git}
		case opts.DryRun || !c.info.Git:
			// Nothing to stash into: the checkpoint just taken holds the tree.
		default:
			if res.Stashed, err = c.stash(ctx); err != nil {
				return res, err
			}
			stashed = true
			if err := record(); err != nil {
				return res, err
			}
		}
	}
	conflicts, err := c.conflicts(ctx, user, res.Actions, res.Changes)
	if err != nil {
		return res, err
	}
	if len(conflicts) > 0 {
		if stashed {
			if perr := c.unstash(ctx); perr != nil {
				return res, fmt.Errorf("%w; and bringing your stashed changes back failed (git stash pop brings them back): %v", &ConflictError{Paths: conflicts}, perr)
			}
			res.Stashed = ""
		}
		return res, &ConflictError{Paths: conflicts}
	}
	if opts.DryRun {
		return res, nil
	}
	if err := c.cs.applyIn(ctx, c.s.ws, res.Actions); err != nil {
		return res, fmt.Errorf("%w (the workspace before it is checkpoint %d: corral restore %d puts it back)", err, res.Before.ID, res.Before.ID)
	}
	res.Applied = true
	if err := removeCopyDir(c.dir); err != nil {
		c.s.log.Warn("checkpoint: removing an applied copy", "dir", c.dir, "err", err)
	}
	return res, nil
}

// dirty lists the workspace's uncommitted changes that stand in the way of an
// apply: in git, what differs from HEAD's tree (but, for a copy made with the
// uncommitted changes, what is still as it was copied); outside git, what
// differs from the copy as made. Files the snapshot left out (too large,
// unreadable) count as changed.
func (c *Copy) dirty(ctx context.Context, user snap) ([]string, error) {
	var changed map[string]bool
	var err error
	if c.info.Git {
		head, herr := c.headTree(ctx)
		if herr != nil {
			return nil, herr
		}
		if changed, err = c.cs.changedPaths(ctx, head, user.tree); err != nil {
			return nil, err
		}
		if c.info.WithUncommitted {
			since, err := c.cs.changedPaths(ctx, c.info.BaseTree, user.tree)
			if err != nil {
				return nil, err
			}
			for p := range changed {
				if !since[p] {
					delete(changed, p)
				}
			}
		}
	} else if changed, err = c.cs.changedPaths(ctx, c.info.BaseTree, user.tree); err != nil {
		return nil, err
	}
	for _, sk := range user.skipped {
		if sk.Reason != "repository" {
			changed[sk.Path] = true
		}
	}
	return sortedKeys(changed), nil
}

// emptyTree returns the id of the empty tree in format.
func emptyTree(format string) string {
	if format == "sha256" {
		return "6ef19b41225c5369f1c104d45d8d85efa9b057b53b14b4b9b939dd74decc5321"
	}
	return "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
}

// headTree is the tree of the user's HEAD now; the empty tree before the
// first commit.
func (c *Copy) headTree(ctx context.Context) (string, error) {
	gitDir, _, err := findRepo(c.s.ws)
	if err != nil || gitDir == "" {
		return "", fmt.Errorf("checkpoint: the workspace is no longer a repository: %v", err)
	}
	out, err := c.s.git.run(ctx, append(c.s.git.baseEnv(), "GIT_DIR="+gitDir, "GIT_OPTIONAL_LOCKS=0"), nil, "rev-parse", "-q", "--verify", "HEAD^{tree}")
	if exitCode(err) == 1 {
		return emptyTree(c.info.Format), nil
	}
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

// conflicts lists the files the session changed that the user changed too
// since the copy was made, and the new files of the session where the
// workspace holds something its snapshot does not show (an ignored file).
func (c *Copy) conflicts(ctx context.Context, user snap, actions []Action, changes []Change) ([]string, error) {
	since, err := c.cs.changedPaths(ctx, c.info.BaseTree, user.tree)
	if err != nil {
		return nil, err
	}
	for _, sk := range user.skipped {
		since[sk.Path] = true
	}
	added := map[string]bool{}
	for _, ch := range changes {
		if ch.Status == "A" {
			added[ch.Path] = true
		}
	}
	root, err := os.OpenRoot(c.s.ws)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	emptied := map[string]bool{} // directories the plan removes files from
	for _, a := range actions {
		if a.Op == "remove" {
			for d := path.Dir(a.Path); d != "."; d = path.Dir(d) {
				emptied[d] = true
			}
		}
	}
	out := map[string]bool{}
	for _, a := range actions {
		switch a.Op {
		case "write", "link", "remove":
		default:
			continue
		}
		if since[a.Path] {
			out[a.Path] = true
			continue
		}
		if added[a.Path] {
			// Nothing may be there but a directory the session emptied.
			fi, err := root.Lstat(a.Path)
			if err == nil && !(fi.IsDir() && emptied[a.Path]) || err != nil && !errors.Is(err, fs.ErrNotExist) {
				out[a.Path] = true
			}
		}
	}
	return sortedKeys(out), nil
}

// stash sets the user's uncommitted changes aside with git stash, untracked
// files included, and returns the stash's commit. The user's git runs with
// corral's fixed settings: no hooks, no fsmonitor, no pager.
func (c *Copy) stash(ctx context.Context) (string, error) {
	env, err := c.userWorktreeEnv()
	if err != nil {
		return "", err
	}
	if _, err := c.s.git.run(ctx, env, nil, "stash", "push", "--include-untracked", "--quiet", "-m", "corral apply "+c.info.Session); err != nil {
		return "", fmt.Errorf("checkpoint: stashing your changes: %w", err)
	}
	out, err := c.s.git.run(ctx, env, nil, "rev-parse", "-q", "--verify", "refs/stash")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

// unstash brings back the changes stash set aside.
func (c *Copy) unstash(ctx context.Context) error {
	env, err := c.userWorktreeEnv()
	if err != nil {
		return err
	}
	_, err = c.s.git.run(ctx, env, nil, "stash", "pop", "--quiet", "--index")
	return err
}

// userWorktreeEnv is the environment of git in the user's repository and
// working tree.
func (c *Copy) userWorktreeEnv() ([]string, error) {
	gitDir, _, err := findRepo(c.s.ws)
	if err != nil || gitDir == "" {
		return nil, fmt.Errorf("checkpoint: the workspace is no longer a repository: %v", err)
	}
	var env []string
	for _, e := range c.s.git.baseEnv() {
		// git stash's own commands take magic pathspecs (:/).
		if !strings.HasPrefix(e, "GIT_LITERAL_PATHSPECS=") {
			env = append(env, e)
		}
	}
	return append(env, "GIT_DIR="+gitDir, "GIT_WORK_TREE="+c.s.ws), nil
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return slices.Clip(out)
}
