package agent

import (
	"os"
)

// executable reports whether fi is a regular file someone may execute.
func executable(fi os.FileInfo) bool {
	return fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}
