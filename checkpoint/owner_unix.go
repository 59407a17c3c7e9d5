//go:build unix

package checkpoint

import (
	"io/fs"
	"os"
	"syscall"
)

// fileOwner returns who owns the file fi describes.
func fileOwner(fi fs.FileInfo) (uid, gid int, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return int(st.Uid), int(st.Gid), true
}

// asRoot says whether corral runs as root, and so makes files that are
// root's unless it gives them away.
func asRoot() bool { return os.Geteuid() == 0 }
