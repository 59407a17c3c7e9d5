package fsys

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
)

// Local is a directory of this machine as a Root, through os.Root.
//
// When the process is root and the directory belongs to another user (a
// user's workspace under a corral run as root), the files and directories it
// creates are given to the directory's owner and group, on their descriptor,
// as that user's own tools would have made them — not left to root, which
// the user could then neither change nor remove.
type Local struct {
	root  *os.Root
	name  string // the directory's absolute path
	owner *owner // who new files and directories belong to; nil: the process
}

// owner is a user and group.
type owner struct{ uid, gid int }

// OpenLocal opens the directory dir (symbolic links resolved) as a Root.
func OpenLocal(dir string) (*Local, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, err
	}
	r, err := os.OpenRoot(real)
	if err != nil {
		return nil, err
	}
	fi, err := r.Stat(".")
	if err != nil {
		r.Close()
		return nil, err
	}
	if !fi.IsDir() {
		r.Close()
		return nil, fmt.Errorf("fsys: %s is not a directory", dir)
	}
	return &Local{root: r, name: real, owner: ownerFor(fi)}, nil
}

// ownerFor is who new files in the directory fi describes belong to: its
// owner, when the process is root and the directory is another user's; nil
// otherwise (they are the process's, as the kernel makes them).
func ownerFor(fi fs.FileInfo) *owner {
	if os.Geteuid() != 0 {
		return nil // only root may give files away
	}
	uid, gid, ok := Owner(fi)
	if !ok || (uid == 0 && gid == os.Getegid()) {
		return nil
	}
	return &owner{uid: uid, gid: gid}
}

// own gives f, just created, to l's owner.
func (l *Local) own(f *os.File) error {
	if l.owner == nil {
		return nil
	}
	return f.Chown(l.owner.uid, l.owner.gid)
}

// ownDir gives the directory name, just made, to l's owner: on a descriptor
// opened without following a link, and only when that directory is still
// what mkdir made — the process's own and empty. Between the mkdir and the
// open a command can rename a directory of root's in the workspace over
// the new one (a rename replaces an empty directory); that one is not
// given away, and the make fails.
func (l *Local) ownDir(name string) error {
	if l.owner == nil {
		return nil
	}
	d, err := l.root.OpenFile(name, os.O_RDONLY|dirNoFollow, 0)
	if err != nil {
		return err
	}
	defer d.Close()
	fi, err := d.Stat()
	if err != nil {
		return err
	}
	uid, _, ok := Owner(fi)
	names, _ := d.Readdirnames(1)
	if !ok || uid != os.Geteuid() || !fi.IsDir() || len(names) > 0 {
		return &fs.PathError{Op: "mkdir", Path: name, Err: errors.New("replaced by another directory while it was made; try again")}
	}
	return l.own(d)
}

// OS returns the os.Root under l.
func (l *Local) OS() *os.Root { return l.root }

// Name is the directory's absolute path: symbolic links resolved for the
// root OpenLocal opened, the parent's Name joined with the name given for one
// from OpenRoot.
func (l *Local) Name() string { return l.name }

// OpenFile opens name in the root.
// A file it creates is given to the root's owner (see Local); one that
// existed is left as it is.
func (l *Local) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	if l.owner != nil && flag&os.O_CREATE != 0 {
		// Create it exclusively to know it is new; when it exists, open it
		// as asked.
		f, err := l.root.OpenFile(name, flag|os.O_EXCL, perm)
		if err == nil {
			if err := l.own(f); err != nil {
				f.Close()
				_ = l.root.Remove(name)
				return nil, err
			}
			return f, nil
		}
		if flag&os.O_EXCL != 0 || !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
	}
	f, err := l.root.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err // not a nil *os.File in a non-nil File
	}
	return f, nil
}

// OpenRoot opens the directory name as a Root of its own.
func (l *Local) OpenRoot(name string) (Root, error) {
	r, err := l.root.OpenRoot(name)
	if err != nil {
		return nil, err
	}
	return &Local{root: r, name: filepath.Join(l.name, filepath.FromSlash(name)), owner: l.owner}, nil
}

func (l *Local) Stat(name string) (fs.FileInfo, error)  { return l.root.Stat(name) }
func (l *Local) Lstat(name string) (fs.FileInfo, error) { return l.root.Lstat(name) }
func (l *Local) Readlink(name string) (string, error)   { return l.root.Readlink(name) }
func (l *Local) Mkdir(name string, perm fs.FileMode) error {
	if err := l.root.Mkdir(name, perm); err != nil {
		return err
	}
	return l.ownDir(name)
}

// MkdirAll makes name and its missing parents; those it makes are given to
// the root's owner (see Local).
func (l *Local) MkdirAll(name string, perm fs.FileMode) error {
	if l.owner == nil {
		return l.root.MkdirAll(name, perm)
	}
	clean := path.Clean(filepath.ToSlash(name))
	if clean == "." {
		return nil
	}
	parts := strings.Split(clean, "/")
	for i := range parts {
		p := strings.Join(parts[:i+1], "/")
		if p == "" || p == ".." || strings.HasSuffix(p, "/..") {
			continue
		}
		err := l.root.Mkdir(p, perm)
		switch {
		case err == nil:
			if err := l.ownDir(p); err != nil {
				return err
			}
		case errors.Is(err, fs.ErrExist):
			fi, serr := l.root.Stat(p)
			if serr != nil {
				return serr
			}
			if !fi.IsDir() {
				return &fs.PathError{Op: "mkdir", Path: p, Err: syscall.ENOTDIR}
			}
		default:
			return err
		}
	}
	return nil
}
func (l *Local) Remove(name string) error             { return l.root.Remove(name) }
func (l *Local) Rename(oldname, newname string) error { return l.root.Rename(oldname, newname) }
func (l *Local) Chmod(name string, mode fs.FileMode) error {
	return l.root.Chmod(name, mode)
}
func (l *Local) Chown(name string, uid, gid int) error { return l.root.Chown(name, uid, gid) }

// Where returns where the directory is now, from the kernel's name of the
// open directory (/proc/self/fd on Linux).
func (l *Local) Where() (string, bool) {
	d, err := l.root.Open(".")
	if err != nil {
		return "", false
	}
	defer d.Close()
	abs := fdPath(d)
	return abs, abs != ""
}

// Umask is the process's file mode creation mask.
func (l *Local) Umask() fs.FileMode { return processUmask() }

// Close closes the root.
func (l *Local) Close() error { return l.root.Close() }
