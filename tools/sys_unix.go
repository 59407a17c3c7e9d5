//go:build unix

package tools

import (
	"io/fs"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// openNonblock keeps opening a named pipe from blocking; regular files ignore it.
const openNonblock = syscall.O_NONBLOCK

// inode returns the device and inode numbers of fi.
func inode(fi fs.FileInfo) (dev, ino uint64) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Dev), uint64(st.Ino)
	}
	return 0, 0
}

// keepOwner gives f the owner and group of old, when they differ and the
// process may change them (it runs as root). Errors are ignored: ownership is
// kept where possible, never a reason to fail a write.
func keepOwner(f *os.File, old fs.FileInfo) {
	st, ok := old.Sys().(*syscall.Stat_t)
	if !ok {
		return
	}
	if int(st.Uid) == os.Geteuid() && int(st.Gid) == os.Getegid() {
		return
	}
	_ = f.Chown(int(st.Uid), int(st.Gid))
}

// umask is the process's file mode creation mask, read once. It comes from
// /proc/self/status where the kernel shows it (Linux 4.7+), which does not
// change it; elsewhere it is read by setting and restoring it, once, at first
// use.
var umask = sync.OnceValue(func() fs.FileMode {
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

// fdPath returns the path the kernel has for the open file f, "" when it cannot
// tell (no /proc, or the file was removed).
func fdPath(f *os.File) string {
	p, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(f.Fd())))
	if err != nil || !strings.HasPrefix(p, "/") || strings.HasSuffix(p, " (deleted)") {
		return ""
	}
	return p
}
