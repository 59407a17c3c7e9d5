package agent

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// procStat is what the agent reads of one process from /proc/<pid>/stat, and
// its marker from /proc/<pid>/status.
type procStat struct {
	pid, ppid, pgrp, sid int
	state                byte
	cpu                  uint64 // utime+stime in clock ticks
	comm                 string
	mark                 uint32 // the command's marker group, 0 when none
}

// Every shell the agent starts gets a supplementary group of its own, its
// marker, which all its descendants inherit and none can drop (setgroups needs
// CAP_SETGID, which commands never have, and no_new_privs keeps set-group-id
// programs from changing groups). Whatever a command's processes do — a new
// session, a double fork, a new process group — the marker finds them.
const (
	markBase = 0x7e000000
	markMax  = 0x7effffff
)

// parseStat decodes the contents of /proc/<pid>/stat (or of a task's stat).
func parseStat(b []byte) (procStat, bool) {
	// pid (comm) state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt
	// cmajflt utime stime ...; comm may hold spaces and parentheses.
	open := bytes.IndexByte(b, '(')
	end := bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return procStat{}, false
	}
	var ps procStat
	var err error
	if ps.pid, err = strconv.Atoi(string(bytes.TrimSpace(b[:open]))); err != nil {
		return procStat{}, false
	}
	ps.comm = string(b[open+1 : end])
	f := strings.Fields(string(b[end+1:]))
	if len(f) < 13 {
		return procStat{}, false
	}
	ps.state = f[0][0]
	ps.ppid, _ = strconv.Atoi(f[1])
	ps.pgrp, _ = strconv.Atoi(f[2])
	ps.sid, _ = strconv.Atoi(f[3])
	ut, _ := strconv.ParseUint(f[11], 10, 64)
	st, _ := strconv.ParseUint(f[12], 10, 64)
	ps.cpu = ut + st
	return ps, true
}

// readStat reads /proc/<pid>/stat.
func readStat(pid int) (procStat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, false
	}
	return parseStat(b)
}

// readMark finds the marker group in /proc/<pid>/status.
func readMark(pid int) uint32 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	_, rest, ok := bytes.Cut(b, []byte("\nGroups:"))
	if !ok {
		return 0
	}
	line, _, _ := bytes.Cut(rest, []byte("\n"))
	for _, f := range strings.Fields(string(line)) {
		if g, err := strconv.ParseUint(f, 10, 32); err == nil && g >= markBase && g <= markMax {
			return uint32(g)
		}
	}
	return 0
}

// allProcs lists every live process the agent can see, zombies excluded, with
// their markers (none where the agent is tracked).
func (a *agent) allProcs() []procStat {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	out := make([]procStat, 0, len(names))
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		if ps, ok := readStat(pid); ok && ps.state != 'Z' && ps.state != 'X' {
			if !a.tracked {
				ps.mark = readMark(pid)
			}
			out = append(out, ps)
		}
	}
	return out
}

// members picks out of all the processes of the shell with marker mark: those
// that carry it, or, where the agent is tracked, the descendants of its
// tracker. With mark 0, every command's process: every process but the
// agent (and, tracked, the trackers).
func (a *agent) members(all []procStat, mark uint32) []procStat {
	self := os.Getpid()
	var out []procStat
	if !a.tracked {
		for _, ps := range all {
			if ps.mark != 0 && (mark == 0 || ps.mark == mark) && ps.pid != self {
				out = append(out, ps)
			}
		}
		return out
	}
	a.reapMu.Lock()
	root, ok := a.trackers[mark]
	trackers := make(map[int]bool, len(a.trackers))
	for _, pid := range a.trackers {
		trackers[pid] = true
	}
	a.reapMu.Unlock()
	if mark == 0 {
		for _, ps := range all {
			if ps.pid != self && !trackers[ps.pid] {
				out = append(out, ps)
			}
		}
		return out
	}
	if !ok {
		return nil
	}
	children := map[int][]procStat{}
	for _, ps := range all {
		children[ps.ppid] = append(children[ps.ppid], ps)
	}
	queue := []int{root}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		for _, ch := range children[pid] {
			if ch.pid == self || trackers[ch.pid] || len(out) > len(all) {
				continue
			}
			out = append(out, ch)
			queue = append(queue, ch.pid)
		}
	}
	return out
}

// markedProcs lists the live processes of the shell with marker mark (see
// members). It reads one file a process, its status: what members needs is
// there (the pid, the parent, the state, the marker) and the name.
func (a *agent) markedProcs(mark uint32) []procStat {
	return a.members(statusProcs(), mark)
}

// statusProcs lists every live process the agent can see but itself and the
// container's init, zombies excluded, from their status files.
func statusProcs() []procStat {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	self := os.Getpid()
	out := make([]procStat, 0, len(names))
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil || pid == self || pid == 1 {
			continue
		}
		b, err := os.ReadFile("/proc/" + n + "/status")
		if err != nil {
			continue
		}
		if ps, ok := parseStatus(b); ok && ps.state != 'Z' && ps.state != 'X' {
			ps.pid = pid
			out = append(out, ps)
		}
	}
	return out
}

// parseStatus decodes the name, state, parent and marker of /proc/<pid>/status.
func parseStatus(b []byte) (procStat, bool) {
	var ps procStat
	seen := 0
	for len(b) > 0 && seen < 4 {
		var line []byte
		line, b, _ = bytes.Cut(b, []byte("\n"))
		key, val, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		val = bytes.TrimSpace(val)
		switch string(key) {
		case "Name":
			ps.comm = string(val)
		case "State":
			if len(val) > 0 {
				ps.state = val[0]
			}
		case "PPid":
			ps.ppid, _ = strconv.Atoi(string(val))
		case "Groups":
			for _, f := range strings.Fields(string(val)) {
				if g, err := strconv.ParseUint(f, 10, 32); err == nil && g >= markBase && g <= markMax {
					ps.mark = uint32(g)
				}
			}
		default:
			continue
		}
		seen++
	}
	return ps, ps.state != 0
}

// cmdline describes a process for a person: its command line, shortened.
func cmdline(ps procStat) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(ps.pid) + "/cmdline")
	s := strings.TrimSpace(string(bytes.ReplaceAll(bytes.TrimRight(b, "\x00"), []byte{0}, []byte{' '})))
	if err != nil || s == "" {
		s = ps.comm
	}
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// killMarked sends SIGKILL to every process of the shell with marker mark
// (every command's when 0), repeating until none is left or a bound is
// reached: a fork bomb keeps spawning while it is being killed.
func (a *agent) killMarked(mark uint32) {
	a.signalMarked(mark, syscall.SIGKILL)
}

// killTracked kills the processes of the shell with marker mark, and then,
// where the agent is tracked, its tracker: the shell is being ended, and the
// tracker's report of its exit will not come otherwise if a command stopped
// it (SIGSTOP).
func (a *agent) killTracked(mark uint32) {
	a.killMarked(mark)
	if !a.tracked {
		return
	}
	a.reapMu.Lock()
	pid, ok := a.trackers[mark]
	a.reapMu.Unlock()
	if ok {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// signalMarked sends sig to every process of the shell with marker mark
// (every command's when 0); for SIGKILL it repeats until none is left.
func (a *agent) signalMarked(mark uint32, sig syscall.Signal) {
	for i := 0; i < 50; i++ {
		procs := a.markedProcs(mark)
		if len(procs) == 0 {
			return
		}
		for _, ps := range procs {
			_ = syscall.Kill(ps.pid, sig)
		}
		if sig != syscall.SIGKILL {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// counterFile reads "key N" out of a cgroup file such as memory.events.
func counterFile(paths []string, key string) (uint64, bool) {
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			k, v, ok := strings.Cut(line, " ")
			if ok && k == key {
				n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
				return n, err == nil
			}
		}
	}
	return 0, false
}

// oomKills is the container's count of processes killed for memory (cgroup v1
// memory.oom_control, or v2 memory.events).
func oomKills() (uint64, bool) {
	return counterFile([]string{
		"/sys/fs/cgroup/memory/memory.oom_control",
		"/sys/fs/cgroup/memory.events",
	}, "oom_kill")
}

// forkFailures is the container's count of forks refused by its pids limit.
func forkFailures() (uint64, bool) {
	return counterFile([]string{
		"/sys/fs/cgroup/pids/pids.events",
		"/sys/fs/cgroup/pids.events",
	}, "max")
}
