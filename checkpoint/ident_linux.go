package checkpoint

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// fileIdentity names the file at name (not followed when a link) so that
// another file made later at the same path has another name: its device,
// inode and, where the filesystem keeps it, its time of birth (an inode
// number is soon reused). "" when it does not exist.
func fileIdentity(name string) string {
	var st unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, name, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_INO|unix.STATX_BTIME, &st); err != nil {
		return ""
	}
	id := fmt.Sprintf("%d:%d:%d", unix.Mkdev(st.Dev_major, st.Dev_minor), st.Ino, st.Mode&unix.S_IFMT)
	if st.Mask&unix.STATX_BTIME != 0 {
		id += fmt.Sprintf(":%d.%09d", st.Btime.Sec, st.Btime.Nsec)
	}
	return id
}
