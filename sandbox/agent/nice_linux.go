package agent

import (
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

// commandNice is the nice value every command's shell starts with (and so
// everything it starts, which cannot lower it again without CAP_SYS_NICE).
// Within the sandbox's cgroup the agent, at 0, then weighs about nine times
// a command's process with the kernel's scheduler: a fork bomb's hundreds of
// processes can no longer starve it of the CPU it needs to answer its host's
// pings and to kill them — before, under a loaded host, the host found it
// silent for 5 s and ended the sandbox. Against the rest of the machine the
// sandbox's share is its cgroup's, whatever its processes' nice values.
const commandNice = 10

// spawner is the one OS thread that forks commands: its nice value is
// commandNice, and Linux gives a new process the nice value of the thread
// that forked it. The agent's other threads keep theirs.
var spawner struct {
	once sync.Once
	reqs chan func()
}

// startNiced runs start, which forks a command's process (exec.Cmd.Start),
// on the spawner thread. Where the nice value cannot be set (a sandbox
// whose kernel refuses it), the command starts as before.
func startNiced(start func() error) error {
	spawner.once.Do(func() {
		spawner.reqs = make(chan func())
		ready := make(chan struct{})
		go spawnerLoop(ready)
		<-ready
	})
	done := make(chan error, 1)
	spawner.reqs <- func() { done <- start() }
	return <-done
}

// spawnerLoop runs the spawner's requests on a thread of its own with
// commandNice. Never unlocked: the thread stays the spawner's alone, and ends
// with the agent. Not the main thread, whose nice value is the one ps and
// /proc show for the whole agent: a goroutine that finds itself there keeps
// it (so that no other spawner lands there) and starts the spawner anew.
func spawnerLoop(ready chan<- struct{}) {
	runtime.LockOSThread()
	if unix.Gettid() == unix.Getpid() {
		go spawnerLoop(ready)
		select {}
	}
	_ = unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), commandNice)
	close(ready)
	for f := range spawner.reqs {
		f()
	}
}
