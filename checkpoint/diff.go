package checkpoint

import (
	"context"
	"io"
	"strconv"
	"strings"
)

// Worktree names the working tree as it is now, where Diff and Changes take a
// checkpoint id.
const Worktree = 0

// treeOf returns the tree of checkpoint id, or of the working tree as it is
// now (Worktree): its objects are written, nothing is recorded.
func (s *Store) treeOf(ctx context.Context, id int) (string, error) {
	if id != Worktree {
		c, err := s.Get(ctx, id)
		if err != nil {
			return "", err
		}
		return c.Tree, nil
	}
	unlock, err := s.lock(ctx)
	if err != nil {
		return "", err
	}
	defer unlock()
	sn, err := s.snapshot(ctx)
	return sn.tree, err
}

// Changes lists the files that differ between checkpoints from and to (to
// may be Worktree), limited to paths when given.
func (s *Store) Changes(ctx context.Context, from, to int, paths ...string) ([]Change, error) {
	a, err := s.treeOf(ctx, from)
	if err != nil {
		return nil, err
	}
	b, err := s.treeOf(ctx, to)
	if err != nil {
		return nil, err
	}
	return s.diffTrees(ctx, a, b, paths...)
}

// Diff writes to w a unified diff, with a summary of the files first, from
// checkpoint from to checkpoint to (or the working tree as it is now), limited
// to paths when given.
func (s *Store) Diff(ctx context.Context, w io.Writer, from, to int, paths ...string) error {
	a, err := s.treeOf(ctx, from)
	if err != nil {
		return err
	}
	b, err := s.treeOf(ctx, to)
	if err != nil {
		return err
	}
	return s.patch(ctx, w, a, b, label(from), label(to), paths...)
}

// patch writes to w the unified diff, with a summary of the files first,
// between trees a and b, their paths prefixed with la/ and lb/.
func (s *Store) patch(ctx context.Context, w io.Writer, a, b, la, lb string, paths ...string) error {
	args := []string{"diff-tree", "-r", "--no-renames", "--no-ext-diff", "--no-textconv", "--no-color", "--patch-with-stat",
		"--src-prefix=" + la + "/", "--dst-prefix=" + lb + "/", a, b}
	if len(paths) > 0 {
		args = append(append(args, "--"), paths...)
	}
	cmd := s.git.command(ctx, s.git.readEnv(), args...)
	cmd.Stdout = w
	var errb strings.Builder
	cmd.Stderr = &errb
	if err := cmd.Run(); err != nil {
		return &GitError{Args: args[:1], Err: err, Stderr: errb.String()}
	}
	return nil
}

func label(id int) string {
	if id == Worktree {
		return "worktree"
	}
	return strconv.Itoa(id)
}

// DiskUsage is the space the workspace's checkpoints take in corral's
// repository, in bytes: every object they reach (in a git workspace, the
// first checkpoint brings over the blobs of every file).
func (s *Store) DiskUsage(ctx context.Context) (int64, error) {
	out, err := s.git.run(ctx, s.git.repoEnv(), nil, "rev-list", "--objects", "--disk-usage", "--glob=refs/corral/*")
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
}
