package agent

import "golang.org/x/sys/unix"

const archInputWait = true

func archSyscallKind(nr uint64) sysKind {
	switch nr {
	case unix.SYS_POLL:
		return sysPoll
	case unix.SYS_SELECT:
		return sysSelect
	case unix.SYS_EPOLL_WAIT:
		return sysEpoll
	case unix.SYS_PAUSE:
		return sysSignal
	}
	return sysOther
}
