//go:build unix

package checkpoint

import (
	"os/exec"
	"syscall"
	"time"
)

// killGroup makes cmd the leader of a process group of its own, killed
// whole when its context ends: a git blocked in an open, or a program it
// started, does not outlive the call, and corral stays responsive to a
// signal that cancels its context.
func killGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		if cmd.Process == nil {
			return nil
		}
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	cmd.WaitDelay = 5 * time.Second
}
