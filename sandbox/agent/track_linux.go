package agent

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Where the agent cannot give each command a marker group of its own — it
// runs as the commands' user, without CAP_SETGID, as in a Kubernetes pod —
// each shell is started by a tracker: a child of the agent (this binary, as
// `corral agent track`) that is a child subreaper, non-dumpable and immune to
// every signal but SIGKILL and SIGSTOP. Every process the command starts is
// a descendant of its tracker whatever it does (a new session, a double
// fork): an orphan goes to the nearest subreaper above it, the tracker, not
// to the agent. The tracker reports the shell's pid and then its wait status
// on a pipe, and lives until its last descendant has gone.
//
// A command can still kill its own tracker (same user: SIGKILL cannot be
// refused). Its processes then go to the agent, the container's PID 1: any
// child of the agent that is not a tracker is such an orphan, and the agent
// kills it at once (sweepOrphans), and the command's exit says so.

// Track is the tracker (`corral agent track`). args are: "tty" or "pipes",
// the number of extra files to pass on, the shell's path, and its argv. Its
// standard files are the shell's; fd 3 is the status pipe to the agent, and
// fds 4 on are the shell's fds 3 on. It returns once every descendant is
// gone.
func Track(args []string) error {
	if len(args) < 4 {
		return errors.New("track: want tty|pipes NFILES SHELL ARGV0 [ARG...]")
	}
	tty := args[0] == "tty"
	n, err := strconv.Atoi(args[1])
	if err != nil || n < 0 || n > 8 {
		return fmt.Errorf("track: %q extra files", args[1])
	}
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("track: become a subreaper: %w", err)
	}
	// Inherited without close-on-exec: the shell must not get them but as
	// the files it is given.
	for fd := 3; fd < 4+n; fd++ {
		unix.CloseOnExec(fd)
	}
	status := os.NewFile(3, "status")
	extra := make([]*os.File, n)
	for i := range extra {
		extra[i] = os.NewFile(uintptr(4+i), "extra")
	}
	cmd := &exec.Cmd{
		Path:       args[2],
		Args:       args[3:],
		Dir:        "/",
		Env:        os.Environ(),
		Stdin:      os.Stdin,
		Stdout:     os.Stdout,
		Stderr:     os.Stderr,
		ExtraFiles: extra,
		SysProcAttr: &syscall.SysProcAttr{
			Setsid: true, Setctty: tty, Ctty: 0,
		},
	}
	// A signal ignored here would stay ignored in the shell, and bash
	// cannot trap one ignored at its start: the agent's ignored ones came
	// down to this process, and the Go runtime keeps SIGHUP and SIGINT so.
	// The shell gets the defaults of every signal.
	defaultSignals()
	err = cmd.Start()
	ignoreSignals()
	// The shell's files are its own now: holding a terminal or a pipe open
	// here would keep its output from ending.
	for _, f := range extra {
		f.Close()
	}
	if null, nerr := os.Open(os.DevNull); nerr == nil {
		for fd := 0; fd < 3; fd++ {
			_ = unix.Dup2(int(null.Fd()), fd)
		}
		null.Close()
	}
	if err != nil {
		return fmt.Errorf("track: start %s: %w", args[2], err)
	}
	pid := cmd.Process.Pid
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], uint32(pid))
	if _, err := status.Write(b[:]); err != nil {
		return err
	}
	for {
		var ws syscall.WaitStatus
		got, err := syscall.Wait4(-1, &ws, 0, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil // ECHILD: every descendant is gone
		}
		if got == pid {
			binary.BigEndian.PutUint32(b[:], uint32(ws))
			_, _ = status.Write(b[:])
			status.Close()
		}
	}
}

// ignoreSignals makes the calling process ignore every signal it can but
// SIGCHLD (which wait needs, and which means nothing harmful) and those the
// Go runtime keeps for itself (SIGURG, SIGPROF). A signal another process
// sends that would stop or kill it — SIGTERM, SIGHUP, SIGINT, SIGQUIT,
// SIGUSR1, SIGABRT, a SIGSEGV sent with kill — is dropped. The kernel
// delivers nothing at all to a PID 1 that ignores a signal, and never
// SIGKILL or SIGSTOP from its own namespace.
func ignoreSignals() {
	var sigs []os.Signal
	for s := syscall.Signal(1); s <= 64; s++ {
		switch s {
		case syscall.SIGKILL, syscall.SIGSTOP, syscall.SIGCHLD, syscall.SIGURG, syscall.SIGPROF:
			continue
		}
		sigs = append(sigs, s)
	}
	signal.Ignore(sigs...)
}

// sigaction is the kernel's struct sigaction (rt_sigaction's).
type sigaction struct {
	handler  uintptr
	flags    uintptr
	restorer uintptr
	mask     uint64
}

// Dispositions of sigaction.handler.
const (
	sigDFL = 0
	sigIGN = 1
)

// disposition returns sig's handler, and sets it to set unless set is nil.
func disposition(sig syscall.Signal, set *sigaction) (uintptr, error) {
	var old sigaction
	_, _, e := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(set)), uintptr(unsafe.Pointer(&old)), 8, 0, 0)
	if e != 0 {
		return 0, e
	}
	return old.handler, nil
}

// defaultSignals sets every ignored signal back to its default.
func defaultSignals() {
	for s := syscall.Signal(1); s <= 64; s++ {
		if h, err := disposition(s, nil); err == nil && h == sigIGN {
			_, _ = disposition(s, &sigaction{handler: sigDFL})
		}
	}
}

// ignoreAll makes PID 1 deaf to every signal a process of its namespace can
// send it: ignoreSignals, and the kernel's SIG_IGN for the signals the Go
// runtime keeps a handler for (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP,
// SIGSYS, ...), which it takes for a fault of its own — and crashes on —
// when they come with sigqueue's code rather than kill's. A real fault of
// the agent's is still fatal: the kernel forces the default on a fault
// whose signal is ignored. SIGCHLD, SIGURG and SIGPROF stay the runtime's:
// what it does with them is harmless.
func ignoreAll() {
	ignoreSignals()
	for s := syscall.Signal(1); s <= 64; s++ {
		switch s {
		case syscall.SIGKILL, syscall.SIGSTOP, syscall.SIGCHLD, syscall.SIGURG, syscall.SIGPROF:
			continue
		}
		if s >= 32 && s <= 34 {
			continue // the C library's and the Go runtime's own (sigPerThreadSyscall)
		}
		if h, err := disposition(s, nil); err == nil && h != sigIGN {
			_, _ = disposition(s, &sigaction{handler: sigIGN})
		}
	}
}

// trackedShell reads what the tracker reports: the shell's pid, then, in
// the background, its wait status, which goes to exited. When the tracker
// dies first, exited gets a SIGKILL status and killed is set.
func trackedShell(r *os.File, exited chan<- syscall.WaitStatus, killed *atomic.Bool) (int, error) {
	var b [4]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		r.Close()
		return 0, fmt.Errorf("the process tracker did not start the shell: %w", err)
	}
	pid := int(binary.BigEndian.Uint32(b[:]))
	go func() {
		defer r.Close()
		if _, err := io.ReadFull(r, b[:]); err != nil {
			killed.Store(true)
			exited <- syscall.WaitStatus(syscall.SIGKILL)
			return
		}
		exited <- syscall.WaitStatus(binary.BigEndian.Uint32(b[:]))
	}()
	return pid, nil
}

// spawnTracked starts cmd, the shell of p, through a tracker, and returns
// once the tracker has started it. tty says the shell gets its terminal
// (fd 0) as its controlling one.
func (a *agent) spawnTracked(p *shellProc, cmd *exec.Cmd, tty bool) (*shellProc, error) {
	statusR, statusW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("make a pipe: %w", err)
	}
	mode := "pipes"
	if tty {
		mode = "tty"
	}
	args := append([]string{"corral", "agent", "track", mode, strconv.Itoa(len(cmd.ExtraFiles)), cmd.Path}, cmd.Args...)
	t := &exec.Cmd{
		Path:        a.self,
		Args:        args,
		Dir:         "/",
		Env:         cmd.Env,
		Stdin:       cmd.Stdin,
		Stdout:      cmd.Stdout,
		Stderr:      cmd.Stderr,
		ExtraFiles:  append([]*os.File{statusW}, cmd.ExtraFiles...),
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	gone := make(chan syscall.WaitStatus, 1)
	a.reapMu.Lock()
	err = startNiced(t.Start)
	var tracker int
	if err == nil {
		tracker = t.Process.Pid
		a.children[tracker] = gone
		a.trackers[p.mark] = tracker
	}
	a.reapMu.Unlock()
	statusW.Close()
	if err != nil {
		statusR.Close()
		return nil, fmt.Errorf("start the process tracker: %w", err)
	}
	_ = t.Process.Release()
	go func() {
		ws := <-gone
		a.reapMu.Lock()
		delete(a.trackers, p.mark)
		a.reapMu.Unlock()
		if ws.Signaled() || ws.ExitStatus() != 0 {
			// Killed: its processes are the agent's children now.
			a.sweepOrphans()
		}
	}()
	p.exited = make(chan syscall.WaitStatus, 1)
	if p.pid, err = trackedShell(statusR, p.exited, &p.trackerKilled); err != nil {
		_ = syscall.Kill(tracker, syscall.SIGKILL)
		return nil, err
	}
	return p, nil
}

// sweepOrphans kills every process that no live tracker has under it: the
// orphans of a killed tracker (the agent, PID 1, inherited them), and what
// they start meanwhile, until none is left or a bound is reached.
func (a *agent) sweepOrphans() {
	self := os.Getpid()
	for i := 0; i < 50; i++ {
		// A tracker is registered while reapMu is held, from its start:
		// the list read under it sees every tracker that exists.
		a.reapMu.Lock()
		all := a.allProcs()
		trackers := make(map[int]bool, len(a.trackers))
		for _, pid := range a.trackers {
			trackers[pid] = true
		}
		a.reapMu.Unlock()
		children := map[int][]int{}
		for _, ps := range all {
			children[ps.ppid] = append(children[ps.ppid], ps.pid)
		}
		var stray []int
		queue := []int{self}
		for len(queue) > 0 {
			pid := queue[0]
			queue = queue[1:]
			for _, ch := range children[pid] {
				if ch == self || trackers[ch] || len(stray) > len(all) {
					continue
				}
				stray = append(stray, ch)
				queue = append(queue, ch)
			}
		}
		if len(stray) == 0 {
			return
		}
		a.log.Warn("killing the processes of a killed tracker", "count", len(stray))
		for _, pid := range stray {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
