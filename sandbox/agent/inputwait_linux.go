package agent

import (
	"bufio"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Input-wait detection: a command is waiting for terminal input it will never
// get when every thread of every process in its session is asleep, at least one
// of them blocked reading the command's terminal (read on the tty, or poll,
// select or epoll on a set holding the tty and no socket), and the others only
// waiting on each other (a child, a pipe, a futex). A thread that runs, sleeps
// on purpose (nanosleep), or waits on a socket, a file or anything else counts
// as working. The agent reads this from /proc/<pid>/task/<tid>/syscall and the
// fd links, as each process's owner (readAsOwner); where those are missing
// (gVisor) the detection is off.

// waitKind is what one thread (or process) is doing, as far as input wait goes.
type waitKind int

const (
	waitBusy    waitKind = iota // running, or waiting on something outside the command
	waitNeutral                 // waiting on another part of the command
	waitTTY                     // blocked on terminal input
)

// sysKind groups the system calls a sleeping thread may be in.
type sysKind int

const (
	sysOther sysKind = iota
	sysRead
	sysPoll   // nfds is the second argument
	sysSelect // nfds is the first argument
	sysEpoll  // the epoll fd is the first argument
	sysWaitChild
	sysFutex
	sysSleep
	sysSignal
)

// commonSyscallKind knows the system calls every Linux architecture shares.
func commonSyscallKind(nr uint64) sysKind {
	switch nr {
	case unix.SYS_READ, unix.SYS_READV, unix.SYS_PREAD64:
		return sysRead
	case unix.SYS_PPOLL:
		return sysPoll
	case unix.SYS_PSELECT6:
		return sysSelect
	case unix.SYS_EPOLL_PWAIT, unix.SYS_EPOLL_PWAIT2:
		return sysEpoll
	case unix.SYS_WAIT4, unix.SYS_WAITID:
		return sysWaitChild
	case unix.SYS_FUTEX:
		return sysFutex
	case unix.SYS_NANOSLEEP, unix.SYS_CLOCK_NANOSLEEP:
		return sysSleep
	case unix.SYS_RT_SIGSUSPEND, unix.SYS_RT_SIGTIMEDWAIT:
		return sysSignal
	}
	return archSyscallKind(nr)
}

// canDetectInputWait reports whether this kernel exposes what the detection
// needs (gVisor, for one, has no /proc/<pid>/syscall).
func canDetectInputWait() bool {
	if !archInputWait {
		return false
	}
	b, err := os.ReadFile("/proc/self/syscall")
	if err != nil {
		return false
	}
	f := strings.Fields(string(b))
	if len(f) < 1 {
		return false
	}
	_, err = strconv.ParseUint(f[0], 10, 64)
	return err == nil || f[0] == "running"
}

// fdLink reads what a process's file descriptor points at.
func fdLink(pid int, fd uint64) string {
	s, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/fd/" + strconv.FormatUint(fd, 10))
	return s
}

// linkKind classifies a file descriptor target: the terminal, a socket, or
// something the command owns (a pipe, a file, an event fd).
func linkKind(link, tty string) waitKind {
	switch {
	case link == "":
		return waitNeutral
	case link == tty || link == "/dev/tty":
		return waitTTY
	case strings.HasPrefix(link, "socket:"):
		return waitBusy
	}
	return waitNeutral
}

// fdsKind classifies a wait on some of a process's file descriptors: any
// socket means it is serving something; else the terminal means it waits for
// input.
func fdsKind(pid int, fds []uint64, tty string) waitKind {
	kind := waitNeutral
	for _, fd := range fds {
		switch linkKind(fdLink(pid, fd), tty) {
		case waitBusy:
			return waitBusy
		case waitTTY:
			kind = waitTTY
		}
	}
	return kind
}

// fdSetKind classifies a poll or select over an unknown set of a process's fds
// (limit bounds the fd numbers when known, else -1).
func fdSetKind(pid int, tty string, limit int64) waitKind {
	d, err := os.Open("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		return waitBusy
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	fds := make([]uint64, 0, len(names))
	for _, n := range names {
		fd, err := strconv.ParseUint(n, 10, 64)
		if err == nil && (limit < 0 || int64(fd) < limit) {
			fds = append(fds, fd)
		}
	}
	return fdsKind(pid, fds, tty)
}

// epollKind classifies an epoll wait by the fds registered in the epoll set.
func epollKind(pid int, epfd uint64, tty string) waitKind {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/fdinfo/" + strconv.FormatUint(epfd, 10))
	if err != nil {
		return waitBusy
	}
	defer f.Close()
	var fds []uint64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "tfd:")
		if !ok {
			continue
		}
		fs := strings.Fields(rest)
		if len(fs) == 0 {
			continue
		}
		if fd, err := strconv.ParseUint(fs[0], 10, 64); err == nil {
			fds = append(fds, fd)
		}
	}
	return fdsKind(pid, fds, tty)
}

// threadKind classifies one thread of process pid.
func threadKind(pid int, task string, tty string) waitKind {
	st, err := os.ReadFile(task + "/stat")
	if err != nil {
		return waitNeutral // gone
	}
	ps, ok := parseStat(st)
	if !ok {
		return waitBusy
	}
	switch ps.state {
	case 'S', 'I':
	case 'Z', 'X', 'T', 't':
		return waitNeutral
	default: // R, D, ...
		return waitBusy
	}
	b, err := os.ReadFile(task + "/syscall")
	if err != nil {
		return waitBusy
	}
	f := strings.Fields(string(b))
	if len(f) < 7 {
		return waitBusy // "running", or "-1 sp pc" (not in a system call)
	}
	nr, err := strconv.ParseUint(f[0], 10, 64)
	if err != nil {
		return waitBusy
	}
	var arg [6]uint64
	for i := range arg {
		arg[i], _ = strconv.ParseUint(strings.TrimPrefix(f[i+1], "0x"), 16, 64)
	}
	switch commonSyscallKind(nr) {
	case sysRead:
		link := fdLink(pid, arg[0])
		k := linkKind(link, tty)
		if k == waitNeutral && !strings.HasPrefix(link, "pipe:") {
			return waitBusy // a file, an inotify fd, a device: working
		}
		return k
	case sysPoll:
		if arg[1] == 0 {
			return waitBusy // poll(NULL, 0, t) is a sleep
		}
		return fdSetKind(pid, tty, -1)
	case sysSelect:
		if arg[0] == 0 {
			return waitBusy
		}
		return fdSetKind(pid, tty, int64(arg[0]))
	case sysEpoll:
		return epollKind(pid, arg[0], tty)
	case sysWaitChild, sysFutex, sysSignal:
		return waitNeutral
	}
	return waitBusy
}

// processKind classifies a process by its threads: busy if any is, waiting for
// the terminal if one is and the rest wait on the command.
func processKind(pid int, tty string) waitKind {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	d, err := os.Open(dir)
	if err != nil {
		return waitNeutral // gone
	}
	tids, _ := d.Readdirnames(-1)
	d.Close()
	kind := waitNeutral
	for _, tid := range tids {
		switch threadKind(pid, dir+"/"+tid, tty) {
		case waitBusy:
			return waitBusy
		case waitTTY:
			kind = waitTTY
		}
	}
	return kind
}

// sessionKind classifies a whole command from its processes. It runs on a
// thread of its own (the monitor's), whose file-system uid it changes to
// each process's owner (readAsOwner), and back.
func sessionKind(procs []procStat, tty string) waitKind {
	defer readAsAgent()
	kind := waitNeutral
	for _, ps := range procs {
		readAsOwner(ps.pid)
		switch processKind(ps.pid, tty) {
		case waitBusy:
			return waitBusy
		case waitTTY:
			kind = waitTTY
		}
	}
	return kind
}

// readAsOwner makes the calling thread read /proc/<pid> as the process's
// owner: its file-system uid that owner's. What the detection reads there —
// the threads' system calls (mode 0400), the fd directory (0500) and its
// links, the fd info — is the owner's alone; the kernel checks the mode with
// the reader's file-system uid, then, for the calls and the fds, that the
// reader may trace the process (CAP_SYS_PTRACE, or the same user). The agent
// runs as root with CAP_DAC_OVERRIDE only when the workspace belongs to root,
// so without this it could read none of it for commands of any other user,
// and every command waiting for input ran to its timeout. A process that
// made itself non-dumpable has /proc/<pid> owned by root: read as root, with
// CAP_SYS_PTRACE. The change is of this thread only (setfsuid); an agent
// without CAP_SETUID (one that runs as its commands' user) keeps its own
// uid, which owns their processes already.
func readAsOwner(pid int) {
	var st unix.Stat_t
	if unix.Stat("/proc/"+strconv.Itoa(pid), &st) == nil {
		_ = unix.Setfsuid(int(st.Uid))
	}
}

// readAsAgent gives the calling thread back the agent's file-system uid
// (the effective capabilities of root's come back with it).
func readAsAgent() { _ = unix.Setfsuid(os.Geteuid()) }
