//go:build linux && !amd64 && !arm64

package agent

// The system call numbers of this architecture are not tabled: no detection.
const archInputWait = false

func archSyscallKind(nr uint64) sysKind { return sysOther }
