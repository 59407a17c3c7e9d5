//go:build !linux

package checkpoint

import (
	"fmt"
	"os"
	"syscall"
)

// fileIdentity names the file at name (not followed when a link): its
// device and inode. "" when it does not exist.
func fileIdentity(name string) string {
	fi, err := os.Lstat(name)
	if err != nil {
		return ""
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return fmt.Sprintf("%d:%d:%d", st.Dev, st.Ino, fi.Mode().Type())
	}
	return fi.ModTime().String()
}
