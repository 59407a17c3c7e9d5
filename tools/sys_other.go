//go:build !unix

package tools

import (
	"io/fs"
	"os"
)

const openNonblock = 0

func inode(fi fs.FileInfo) (dev, ino uint64) { return 0, 0 }

func keepOwner(f *os.File, old fs.FileInfo) {}

func umask() fs.FileMode { return 0 }

func fdPath(f *os.File) string { return "" }
