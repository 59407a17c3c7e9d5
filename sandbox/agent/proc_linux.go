package agent

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// procStat is what the agent reads of one process from /proc/<pid>/stat.
type procStat struct {
	pid, ppid, pgrp, sid int
	state                byte
	cpu                  uint64 // utime+stime in clock ticks
	comm                 string
}

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

// allProcs lists every live process the agent can see, zombies excluded.
func allProcs() []procStat {
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
			out = append(out, ps)
		}
	}
	return out
}

// inSession reports whether ps is in the session or process group sid (a
// command's shell leads both).
func (ps procStat) inSession(sid int) bool {
	return ps.sid == sid || ps.pgrp == sid
}

// sessionProcs lists the live processes in the session or process group sid.
func sessionProcs(sid int) []procStat {
	var out []procStat
	for _, ps := range allProcs() {
		if ps.inSession(sid) {
			out = append(out, ps)
		}
	}
	return out
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

// killSession sends SIGKILL to everything in session (and process group) sid,
// repeating until nothing is left or a bound is reached: a fork bomb keeps
// spawning while it is being killed.
func killSession(sid int) {
	for i := 0; i < 50; i++ {
		_ = syscall.Kill(-sid, syscall.SIGKILL)
		procs := sessionProcs(sid)
		if len(procs) == 0 {
			return
		}
		for _, ps := range procs {
			_ = syscall.Kill(ps.pid, syscall.SIGKILL)
			if ps.pgrp != sid {
				_ = syscall.Kill(-ps.pgrp, syscall.SIGKILL)
			}
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
