package fsys

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Local is a directory of this machine as a Root, through os.Root.
type Local struct {
	root *os.Root
	name string // the directory's absolute path
}

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
	return &Local{root: r, name: real}, nil
}

// OS returns the os.Root under l.
func (l *Local) OS() *os.Root { return l.root }

// Name is the directory's absolute path: symbolic links resolved for the
// root OpenLocal opened, the parent's Name joined with the name given for one
// from OpenRoot.
func (l *Local) Name() string { return l.name }

// OpenFile opens name in the root.
func (l *Local) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
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
	return &Local{root: r, name: filepath.Join(l.name, filepath.FromSlash(name))}, nil
}

func (l *Local) Stat(name string) (fs.FileInfo, error)  { return l.root.Stat(name) }
func (l *Local) Lstat(name string) (fs.FileInfo, error) { return l.root.Lstat(name) }
func (l *Local) Readlink(name string) (string, error)   { return l.root.Readlink(name) }
func (l *Local) Mkdir(name string, perm fs.FileMode) error {
	return l.root.Mkdir(name, perm)
}
func (l *Local) MkdirAll(name string, perm fs.FileMode) error {
	return l.root.MkdirAll(name, perm)
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
