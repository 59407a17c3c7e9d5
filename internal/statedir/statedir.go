// Package statedir finds corral's per-user private directories and checks
// them before use. Nothing corral trusts lives in a shared temporary
// directory, where any local user could plant a file or a link for corral to
// read, follow or delete: state lives under $XDG_STATE_HOME/corral (or
// ~/.local/state/corral), each directory made 0700 and checked, on the
// descriptor, to be a real directory owned by the running user and closed to
// everyone else.
package statedir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// ErrUnsafe is wrapped by the errors of a directory that is not private to
// the running user.
var ErrUnsafe = errors.New("not a private directory")

// Base is corral's state directory: $XDG_STATE_HOME/corral when that is an
// absolute path, else ~/.local/state/corral. It is not created.
func Base() (string, error) {
	if d := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "corral"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil || !filepath.IsAbs(home) {
		return "", fmt.Errorf("statedir: no home directory to keep corral's state in (set HOME or XDG_STATE_HOME): %v", err)
	}
	return filepath.Join(home, ".local", "state", "corral"), nil
}

// Dir returns Base()/sub, made private (see Private).
func Dir(sub ...string) (string, error) {
	base, err := Base()
	if err != nil {
		return "", err
	}
	return Private(filepath.Join(append([]string{base}, sub...)...))
}

// Private makes dir and its missing parents (0700), then checks dir itself:
// a directory, not a link, owned by the running user, with no permission
// for group or others (a directory of the user's that is open to others is
// closed, as ssh does with ~/.ssh). It returns dir as given, or an error
// wrapping ErrUnsafe that says what to do.
func Private(dir string) (string, error) {
	if !filepath.IsAbs(dir) {
		return "", fmt.Errorf("statedir: %s is not an absolute path", dir)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("statedir: %w", err)
	}
	if err := check(dir); err != nil {
		return "", err
	}
	return dir, nil
}

// check opens dir without following a final link and checks the
// descriptor, so that what is checked is what was opened.
func check(dir string) error {
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("statedir: %s: %w (%w: remove it, or point XDG_STATE_HOME at a directory of your own)", dir, err, ErrUnsafe)
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return fmt.Errorf("statedir: %s: %w", dir, err)
	}
	if uid := os.Geteuid(); int(st.Uid) != uid {
		return fmt.Errorf("statedir: %s belongs to uid %d, not to uid %d that corral runs as (%w: point XDG_STATE_HOME at a directory of your own, e.g. XDG_STATE_HOME=$HOME/.local/state under sudo -H)", dir, st.Uid, uid, ErrUnsafe)
	}
	if fs.FileMode(st.Mode)&0o077 != 0 {
		if err := syscall.Fchmod(fd, uint32(st.Mode)&0o700); err != nil {
			return fmt.Errorf("statedir: %s is open to other users and could not be closed: %w (%w)", dir, err, ErrUnsafe)
		}
	}
	return nil
}
