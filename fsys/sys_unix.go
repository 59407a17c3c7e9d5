//go:build unix

package fsys

import (
	"io/fs"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Inode returns the device and inode numbers of fi; ok is false when fi does
// not carry them (its Sys is no *syscall.Stat_t).
func Inode(fi fs.FileInfo) (dev, ino uint64, ok bool) {
	if fi == nil {
		return 0, 0, false
	}
	if st, is := fi.Sys().(*syscall.Stat_t); is && st != nil {
		return uint64(st.Dev), uint64(st.Ino), true
	}
	return 0, 0, false
}

// Owner returns the user and group owning fi; ok is false when fi does not
// carry them.
func Owner(fi fs.FileInfo) (uid, gid int, ok bool) {
	if fi == nil {
		return 0, 0, false
	}
	if st, is := fi.Sys().(*syscall.Stat_t); is && st != nil {
		return int(st.Uid), int(st.Gid), true
	}
	return 0, 0, false
}

// processUmask is the process's file mode creation mask, read once. It comes
// from /proc/self/status where the kernel shows it (Linux 4.7+), which does
// not change it; elsewhere it is read by setting and restoring it, once, at
// first use.
var processUmask = sync.OnceValue(func() fs.FileMode {
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "Umask:"); ok {
				if n, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32); err == nil {
					return fs.FileMode(n) & fs.ModePerm
				}
			}
		}
	}
	old := syscall.Umask(0o022)
	syscall.Umask(old)
	return fs.FileMode(old) & fs.ModePerm
})

// fdPath returns the path the kernel has for the open file f, "" when it
// cannot tell (no /proc, or the file was removed).
func fdPath(f *os.File) string {
	p, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(f.Fd())))
	if err != nil || !strings.HasPrefix(p, "/") || strings.HasSuffix(p, " (deleted)") {
		return ""
	}
	return p
}

// dirNoFollow opens only a directory, and not through a last link.
const dirNoFollow = syscall.O_DIRECTORY | syscall.O_NOFOLLOW
