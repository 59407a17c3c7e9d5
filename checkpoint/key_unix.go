//go:build unix && !linux

package checkpoint

import (
	"fmt"
	"io/fs"
	"syscall"
)

// fileKey is the device and inode of the file fi describes (Linux reads
// them in fileIdentity itself).
func fileKey(fi fs.FileInfo) string {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return fmt.Sprintf("%d:%d", st.Dev, st.Ino)
	}
	return ""
}
