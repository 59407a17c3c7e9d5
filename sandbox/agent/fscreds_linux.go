package agent

import (
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// lockThread keeps the calling goroutine on its thread, for good: a worker
// never unlocks, so the thread, with the credentials it took, ends with it
// rather than going back to the runtime. Threads the runtime starts while a
// locked goroutine runs are cloned from a clean template thread, not from
// this one.
func lockThread() { runtime.LockOSThread() }

// threadCredentials gives the calling thread, and only it, the commands'
// credentials for file access: effective uid and gid theirs (the kernel's
// file-system ids follow them), no supplementary group, and as effective
// capabilities only those commands get (ambient). The real and saved ids
// stay the agent's, so that commands, which run with real ids uid and gid,
// cannot signal or trace the thread. Raw system calls: Go's own set-id
// functions change every thread of the process.
//
// When the agent itself runs as uid (a Kubernetes pod), there is nothing to
// take.
func threadCredentials(uid, gid uint32, ambient []uintptr) error {
	if os.Geteuid() == int(uid) && os.Getegid() == int(gid) {
		return nil
	}
	keep := uintptr(^uint32(0)) // -1: unchanged
	if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, 0, 0, 0); e != 0 {
		return fmt.Errorf("setgroups: %w", e)
	}
	if _, _, e := unix.RawSyscall(sysSetresgid, keep, uintptr(gid), keep); e != 0 {
		return fmt.Errorf("setresgid: %w", e)
	}
	if _, _, e := unix.RawSyscall(sysSetresuid, keep, uintptr(uid), keep); e != 0 {
		return fmt.Errorf("setresuid: %w", e)
	}
	var r, eu, s uint32
	if _, _, e := unix.RawSyscall(sysGetresuid, uintptr(unsafe.Pointer(&r)), uintptr(unsafe.Pointer(&eu)), uintptr(unsafe.Pointer(&s))); e != 0 || eu != uid {
		return fmt.Errorf("the thread's effective uid is %d, want %d (%v)", eu, uid, e)
	}
	// The change of effective uid cleared every effective capability;
	// raise the commands' ones again (they are in the permitted set).
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	data[0].Effective, data[1].Effective = 0, 0
	for _, c := range ambient {
		data[c/32].Effective |= 1 << (c % 32)
	}
	data[0].Effective &= data[0].Permitted
	data[1].Effective &= data[1].Permitted
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	return nil
}

// umask is the agent's file mode creation mask, which commands inherit: read
// once from /proc/self/status, 022 when it is not there.
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
	return 0o022
})
