//go:build !unix

package checkpoint

import "io/fs"

func fileOwner(fi fs.FileInfo) (uid, gid int, ok bool) { return 0, 0, false }

func asRoot() bool { return false }

func fileKey(fi fs.FileInfo) string { return fi.ModTime().String() }
