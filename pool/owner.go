package pool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/corralhq/corral/internal/statedir"
	"github.com/corralhq/corral/sandbox"
)

// dirPrefix begins the name of every pool's directory.
const dirPrefix = "corral-pool-"

// ownerFile holds the labels of the process that owns a pool's directory.
const ownerFile = "owner.json"

// NewDir makes a directory in parent (corral's private state directory,
// DefaultParent, when empty) that GC removes once this process is gone: a
// pool's, or one for workspaces made outside a pool's slots. A parent given
// is checked as GC checks it.
func NewDir(parent string) (string, error) {
	parent, err := parentDir(parent)
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp(parent, dirPrefix)
	if err != nil {
		return "", fmt.Errorf("pool: making a directory: %w", err)
	}
	if dir, err = filepath.EvalSymlinks(dir); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("pool: %w", err)
	}
	if err := writeOwner(dir); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
}

// RemoveDir removes a directory of NewDir's, and everything below it, even
// directories a command made read-only.
func RemoveDir(dir string) error { return removeAll(dir) }

// writeOwner records this process as the owner of dir.
func writeOwner(dir string) error {
	b, err := json.Marshal(sandbox.OwnerLabels("", dir))
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, ownerFile), b, 0o600); err != nil {
		return fmt.Errorf("pool: %w", err)
	}
	return nil
}

// GC removes the pools' directories in parent (DefaultParent when empty)
// whose owner process ran on this host and is gone — the slots a killed batch
// left, with the workspaces in them — and returns them. Their sandboxes are
// reaped by the backend's GC, by their labels. Only directories of the
// running user's are read or removed: what another user made there, or a
// link, is left alone.
func GC(ctx context.Context, parent string) ([]string, error) {
	parent, err := parentDir(parent)
	if err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(parent)
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, e := range ents {
		if err := ctx.Err(); err != nil {
			return removed, err
		}
		if !e.IsDir() || !strings.HasPrefix(e.Name(), dirPrefix) {
			continue
		}
		dir := filepath.Join(parent, e.Name())
		if !ownDir(dir) {
			continue // another user's, or a link: not ours to judge
		}
		b, err := readOwner(dir)
		if err != nil {
			continue // being made, or not a pool's
		}
		var labels map[string]string
		if json.Unmarshal(b, &labels) != nil {
			continue
		}
		if local, alive := sandbox.OwnerState(labels); !local || alive {
			continue
		}
		if err := removeAll(dir); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, dir)
	}
	return removed, errors.Join(errs...)
}

// DefaultParent is where pools' directories are made and looked for when no
// parent is given: corral's private state directory (see internal/statedir),
// never a shared temporary directory, where another local user could plant a
// directory for GC to read and remove.
//
// For root with no XDG_STATE_HOME it is /var/lib/corral/pools rather than
// one under /root: a slot is mounted at its own path in its sandbox, and most
// images keep /root closed (0700), so the commands' user could not reach a
// slot below it.
func DefaultParent() (string, error) {
	if os.Geteuid() == 0 && !filepath.IsAbs(os.Getenv("XDG_STATE_HOME")) {
		return statedir.Private(rootPools)
	}
	return statedir.Dir("pools")
}

// rootPools is DefaultParent for root.
const rootPools = "/var/lib/corral/pools"

// parentDir returns parent, checked, or DefaultParent when it is empty.
func parentDir(parent string) (string, error) {
	if parent == "" {
		d, err := DefaultParent()
		if err != nil {
			return "", fmt.Errorf("pool: %w", err)
		}
		return d, nil
	}
	return checkParent(parent)
}

// checkParent checks a parent directory a caller chose (--work-dir): it must
// belong to the running user or to root, and others must not be able to
// rename or remove what is in it — no write permission for group or others,
// or the sticky bit (as /tmp has). GC then trusts only directories of the
// running user's in it, which no one else can make or replace.
func checkParent(parent string) (string, error) {
	abs, err := filepath.Abs(parent)
	if err == nil {
		abs, err = filepath.EvalSymlinks(abs)
	}
	if err != nil {
		return "", fmt.Errorf("pool: work directory: %w", err)
	}
	fd, err := syscall.Open(abs, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return "", fmt.Errorf("pool: work directory %s: %w", abs, err)
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return "", fmt.Errorf("pool: work directory %s: %w", abs, err)
	}
	if uid := os.Geteuid(); int(st.Uid) != uid && st.Uid != 0 {
		return "", fmt.Errorf("pool: work directory %s belongs to uid %d, not to uid %d that corral runs as or to root: use a directory of your own", abs, st.Uid, uid)
	}
	if st.Mode&0o022 != 0 && st.Mode&syscall.S_ISVTX == 0 {
		return "", fmt.Errorf("pool: work directory %s is writable by other users without the sticky bit, so they could replace what corral makes there: use a directory of your own (chmod go-w %s)", abs, abs)
	}
	return abs, nil
}

// ownDir says whether dir is a directory, not a link, of the running user's.
func ownDir(dir string) bool {
	fi, err := os.Lstat(dir)
	if err != nil || !fi.IsDir() {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Geteuid()
}

// readOwner reads dir's owner file, not following a link, and only when it
// is a regular file of the running user's.
func readOwner(dir string) ([]byte, error) {
	f, err := os.OpenFile(filepath.Join(dir, ownerFile), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !fi.Mode().IsRegular() || !ok || int(st.Uid) != os.Geteuid() {
		return nil, fmt.Errorf("pool: %s is not a file of this user's", f.Name())
	}
	return io.ReadAll(io.LimitReader(f, 1<<16))
}
