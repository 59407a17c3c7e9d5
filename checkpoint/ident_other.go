//go:build !linux

package checkpoint

import (
	"fmt"
	"os"
)

// fileIdentity names the file at name (not followed when a link): its
// device and inode where the system says them (fileKey). "" when it does
// not exist.
func fileIdentity(name string) string {
	fi, err := os.Lstat(name)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%s:%d", fileKey(fi), fi.Mode().Type())
}
