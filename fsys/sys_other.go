//go:build !unix

package fsys

import (
	"io/fs"
	"os"
)

// Inode returns the device and inode numbers of fi; there are none here.
func Inode(fi fs.FileInfo) (dev, ino uint64, ok bool) { return 0, 0, false }

// Owner returns the user and group owning fi; there are none here.
func Owner(fi fs.FileInfo) (uid, gid int, ok bool) { return 0, 0, false }

func processUmask() fs.FileMode { return 0o022 }

func fdPath(f *os.File) string { return "" }

const dirNoFollow = 0
