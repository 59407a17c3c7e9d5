//go:build unix

package checkpoint

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"

	"golang.org/x/sys/unix"
)

// wtKind is what a path of the working tree is when corral reads it.
type wtKind int

const (
	kindGone wtKind = iota
	kindFile
	kindLink
	kindDir
	kindOther // a named pipe, a socket, a device: git records none
	kindTooLarge
	kindUnreadable
)

// wtEntry is a path of the working tree as corral read it.
type wtEntry struct {
	kind wtKind
	data []byte // a file's content, a link's target
	exec bool
	size int64
	stat statData // a file's, from the descriptor it was read through
}

// treeReader reads the files of a working tree for a checkpoint. Every path
// is opened relative to the tree (an os.Root: no link leads out of it), the
// last component without following a link and without waiting (O_NOFOLLOW,
// O_NONBLOCK), and what was opened is checked on its descriptor: a file
// swapped for a link, a pipe or a device between git's look and corral's
// read is recorded as what it is now, never followed or waited on. When
// corral runs as root, a file the workspace's owner could not read is not
// read either.
type treeReader struct {
	root     *os.Root
	max      int64 // the largest file read; negative: maxObject
	owner    bool  // check that the owner can read a file
	uid, gid int
	dirName  string
	dir      *os.File
}

func newTreeReader(ws string, max int64) (*treeReader, error) {
	root, err := os.OpenRoot(ws)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	r := &treeReader{root: root, max: max}
	if r.max < 0 || r.max > maxObject {
		r.max = maxObject
	}
	if asRoot() {
		if fi, err := root.Stat("."); err == nil {
			if uid, gid, ok := fileOwner(fi); ok && uid != 0 {
				r.owner, r.uid, r.gid = true, uid, gid
			}
		}
	}
	return r, nil
}

func (r *treeReader) close() {
	if r.dir != nil {
		r.dir.Close()
	}
	r.root.Close()
}

// read reads path p (slash-separated, relative to the tree).
func (r *treeReader) read(p string) (wtEntry, error) {
	dir, base := path.Split(p)
	dir = path.Clean(dir)
	if dir != r.dirName || r.dir == nil {
		if r.dir != nil {
			r.dir.Close()
			r.dir = nil
		}
		r.dirName = dir
		d, err := r.root.Open(dir)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return wtEntry{kind: kindGone}, nil
			}
			return wtEntry{kind: kindUnreadable}, nil
		}
		r.dir = d
	}
	dfd := int(r.dir.Fd())
	for range 3 { // a file swapped for a link as it is opened is looked at again
		var st unix.Stat_t
		err := unix.Fstatat(dfd, base, &st, unix.AT_SYMLINK_NOFOLLOW)
		switch {
		case errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR):
			return wtEntry{kind: kindGone}, nil
		case err != nil:
			return wtEntry{kind: kindUnreadable}, nil
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			return wtEntry{kind: kindDir}, nil
		case unix.S_IFLNK:
			buf := make([]byte, 4096)
			for {
				n, err := unix.Readlinkat(dfd, base, buf)
				if errors.Is(err, unix.EINVAL) {
					break // no longer a link: look again
				}
				if err != nil {
					return wtEntry{kind: kindGone}, nil
				}
				if n < len(buf) {
					e := wtEntry{kind: kindLink, data: buf[:n]}
					var after unix.Stat_t
					if unix.Fstatat(dfd, base, &after, unix.AT_SYMLINK_NOFOLLOW) == nil && sameStat(&st, &after) {
						e.stat = statDataOf(&st)
					}
					return e, nil
				}
				if len(buf) >= 1<<20 {
					return wtEntry{kind: kindUnreadable}, nil
				}
				buf = make([]byte, 2*len(buf))
			}
			continue
		case unix.S_IFREG:
		default:
			return wtEntry{kind: kindOther}, nil
		}
		if st.Size > r.max {
			return wtEntry{kind: kindTooLarge, size: st.Size}, nil
		}
		fd, err := unix.Openat(dfd, base, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
		switch {
		case errors.Is(err, unix.ELOOP):
			continue // a link now
		case errors.Is(err, unix.ENOENT):
			return wtEntry{kind: kindGone}, nil
		case err != nil:
			return wtEntry{kind: kindUnreadable, size: st.Size}, nil
		}
		e, err := r.readFd(fd)
		unix.Close(fd)
		return e, err
	}
	return wtEntry{kind: kindUnreadable}, nil
}

// readFd reads the file open at fd, once its descriptor says it is a
// regular file the workspace's owner may read.
func (r *treeReader) readFd(fd int) (wtEntry, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return wtEntry{kind: kindUnreadable}, nil
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return wtEntry{kind: kindOther}, nil
	}
	if r.owner && !ownerMayRead(&st, r.uid, r.gid) {
		return wtEntry{kind: kindUnreadable, size: st.Size}, nil
	}
	if st.Size > r.max {
		return wtEntry{kind: kindTooLarge, size: st.Size}, nil
	}
	buf := make([]byte, 0, st.Size+1)
	for {
		if int64(len(buf)) > r.max {
			return wtEntry{kind: kindTooLarge, size: int64(len(buf))}, nil
		}
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := unix.Read(fd, buf[len(buf):cap(buf)])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return wtEntry{kind: kindUnreadable, size: st.Size}, nil
		}
		if n == 0 {
			break
		}
		buf = buf[:len(buf)+n]
	}
	e := wtEntry{kind: kindFile, data: buf, exec: st.Mode&0o100 != 0, size: int64(len(buf))}
	// The stat data, taken before the read, goes into the file's index
	// entry, unless the file changed while it was read (then the entry has
	// none, and the next checkpoint compares the file's content).
	var after unix.Stat_t
	if unix.Fstat(fd, &after) == nil && int64(len(buf)) == st.Size && sameStat(&st, &after) {
		e.stat = statDataOf(&st)
	}
	return e, nil
}

// ownerMayRead says whether uid (of group gid) may read the file st
// describes, by its permission bits.
func ownerMayRead(st *unix.Stat_t, uid, gid int) bool {
	switch {
	case int(st.Uid) == uid:
		return st.Mode&0o400 != 0
	case int(st.Gid) == gid:
		return st.Mode&0o040 != 0
	}
	return st.Mode&0o004 != 0
}

// openPlain opens name for reading only when it is a regular file: not
// through a final link, and without waiting on a named pipe.
func openPlain(name string) (*os.File, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("%s is not a regular file", name)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// readPlain reads the regular file name (at most limit bytes).
func readPlain(name string, limit int64) ([]byte, error) {
	f, err := openPlain(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, limit))
}
