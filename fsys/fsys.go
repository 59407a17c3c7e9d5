// Package fsys is the workspace filesystem the file tools work on: a directory
// tree that no name can leave — not by "..", an absolute path, a symbolic link
// (also midway) or a race — modelled on os.Root and *os.File, with only the
// standard library's types in its signatures. Local is the host's own
// directory through os.Root; package sandbox serves the same interface from
// inside a sandbox, through its agent, for workspaces that live there.
package fsys

import (
	"errors"
	"io"
	"io/fs"
	"os"
)

// Root is a directory tree confined as os.Root confines it: every name is
// relative to the root's directory, and no operation reaches outside it.
// Names are slash-separated; "." is the root itself. Errors are
// *fs.PathError values that satisfy errors.Is with the fs and syscall
// sentinels (fs.ErrNotExist, fs.ErrPermission, syscall.ENOTDIR, ...), as
// os.Root's do; a name that would leave the root gives a *fs.PathError whose
// Err is not a syscall.Errno (ErrEscape, or os.Root's own). A Root is safe
// for concurrent use.
type Root interface {
	// Name is the absolute path of the root's directory where the
	// filesystem lives (on the host for Local, inside the sandbox for a
	// sandbox's), with symbolic links resolved when the root was opened.
	Name() string
	// OpenFile opens name with os.OpenFile's flags (os.O_RDONLY, O_WRONLY,
	// O_RDWR, O_CREATE, O_EXCL, O_TRUNC, O_APPEND, and syscall.O_NONBLOCK
	// on Unix) and, for a new file, perm less the umask.
	OpenFile(name string, flag int, perm fs.FileMode) (File, error)
	// OpenRoot opens the directory name as a Root of its own: what follows
	// happens in that directory, even if a component of name is swapped
	// meanwhile. Close it when done; it outlives its parent.
	OpenRoot(name string) (Root, error)
	// Stat and Lstat describe name, following a last symbolic link or not.
	// The Sys of their results is a *syscall.Stat_t on Unix, whatever the
	// filesystem, so that SameFile and owners work.
	Stat(name string) (fs.FileInfo, error)
	Lstat(name string) (fs.FileInfo, error)
	// Readlink returns the target of the symbolic link name; an error
	// satisfying errors.Is(err, syscall.EINVAL) when name is no link.
	Readlink(name string) (string, error)
	Mkdir(name string, perm fs.FileMode) error
	MkdirAll(name string, perm fs.FileMode) error
	// Remove removes the file or empty directory name.
	Remove(name string) error
	// Rename renames oldname to newname, replacing a file there, atomically
	// as rename(2) does.
	Rename(oldname, newname string) error
	Chmod(name string, mode fs.FileMode) error
	Chown(name string, uid, gid int) error
	// Where returns the absolute path of the root's directory now, as the
	// kernel sees the opened directory (where the filesystem lives, as for
	// Name), which differs from Name when a directory on its way was moved
	// or swapped since it was opened. ok is false when it cannot tell.
	Where() (abs string, ok bool)
	// Close releases the root. Files opened from it stay usable.
	Close() error
}

// File is an open file of a Root, a subset of *os.File's methods (which
// implements it).
type File interface {
	io.Reader
	io.Writer
	io.Closer
	// Name is the name the file was opened with.
	Name() string
	// Stat describes the open file; its Sys is a *syscall.Stat_t on Unix.
	Stat() (fs.FileInfo, error)
	// ReadDir and Readdirnames list an open directory as *os.File's do: at
	// most n entries a call (all when n <= 0), io.EOF at the end.
	ReadDir(n int) ([]fs.DirEntry, error)
	Readdirnames(n int) ([]string, error)
	// Sync commits the file's content (a directory's entries) to storage.
	Sync() error
	Chmod(mode fs.FileMode) error
	Chown(uid, gid int) error
}

// ErrEscape is the Err of a *fs.PathError for a name that would leave its
// Root, from a filesystem that is not os.Root (whose own is unexported).
var ErrEscape = errors.New("path escapes from parent")

// ErrClosed is the Err of an operation on a closed Root or File.
var ErrClosed = fs.ErrClosed

// Umask returns the file mode creation mask that applies to files created in
// r: the filesystem's own when it says (a Root with a Umask method), else
// 022, the usual one.
func Umask(r Root) fs.FileMode {
	if u, ok := r.(interface{ Umask() fs.FileMode }); ok {
		return u.Umask()
	}
	return 0o022
}

// SameFile reports whether a and b describe the same file: the same device
// and inode, for any Root's FileInfo (os.SameFile knows only the os
// package's own).
func SameFile(a, b fs.FileInfo) bool {
	da, ia, oka := Inode(a)
	db, ib, okb := Inode(b)
	if !oka || !okb {
		return os.SameFile(a, b)
	}
	return da == db && ia == ib
}
