package checkpoint

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// oNoFollow makes opening a symbolic link fail.
const oNoFollow = syscall.O_NOFOLLOW

// reflink makes dst share src's blocks (FICLONE), where the filesystem can
// (btrfs, XFS, bcachefs, ...); it reports whether it did.
func reflink(dst, src *os.File) bool {
	return unix.IoctlFileClone(int(dst.Fd()), int(src.Fd())) == nil
}
