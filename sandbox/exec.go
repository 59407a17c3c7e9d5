package sandbox

import (
	"io"
	"time"
)

// ExecRequest is one shell command to run in the sandbox.
type ExecRequest struct {
	// Command is run by `bash -c` (or `sh -c` where the image has no bash) in its
	// own PTY and process group.
	Command string
	// Timeout ends the command (SIGTERM to its process group, SIGKILL 2 s later).
	// Zero means no timeout other than the context's.
	Timeout time.Duration
	// Output receives the raw PTY stream (colours and carriage returns intact) as
	// it arrives. The terminal does not turn LF into CRLF (ONLCR is off), so
	// lines end in a bare LF and every CR is the program's own. It is called
	// from one goroutine at a time, never after Exec returns; a slow writer
	// slows the command, never loses bytes. It must not block forever. Nil
	// discards.
	Output io.Writer
	// Cols and Rows set the PTY's window size; zero means 200x50.
	Cols, Rows uint16
}

// ExecResult says how a command ended. A command that ran and failed is not a Go
// error: its exit status is here. Errors are for a sandbox that could not run it.
type ExecResult struct {
	// ExitCode is the shell's exit status; 128+n when killed by signal n.
	ExitCode int `json:"exit_code"`
	// Signal names the signal that ended the command, if any ("SIGKILL").
	Signal string `json:"signal,omitempty"`
	// Duration is the wall time from start to the call's return.
	Duration time.Duration `json:"duration_ns"`
	// Dir is the directory the command started in.
	Dir string `json:"dir"`
	// DirReset is set when the previous command left the working directory
	// outside the workspace (or it vanished), so this one started at the root.
	DirReset bool `json:"dir_reset,omitempty"`
	// TimedOut, Canceled and InputWait say why the command was ended early.
	TimedOut bool `json:"timed_out,omitempty"`
	Canceled bool `json:"canceled,omitempty"`
	// InputWait is set when the command was ended because it sat waiting for
	// terminal input it would never get.
	InputWait bool `json:"input_wait,omitempty"`
	// OOMKilled is set when a process of the command was killed for memory.
	OOMKilled bool `json:"oom_killed,omitempty"`
	// ProcessLimit is set when the command hit the sandbox's process limit (a
	// fork bomb): forks failed, and everything it started was killed.
	ProcessLimit bool `json:"process_limit,omitempty"`
	// Restarted is set when the sandbox container had died and a new one was
	// started for this command: shell state and background processes were lost.
	Restarted bool `json:"restarted,omitempty"`
	// RestartReason says why the old container was gone, when known.
	RestartReason string `json:"restart_reason,omitempty"`
	// Background lists processes the command started that are still running
	// after its main process exited (`server &`).
	Background []Process `json:"background,omitempty"`
	// NotCopied lists the files of the repository's shadow that commands
	// changed and that were not copied to the host's repository, each as
	// "PATH (WHY)" with PATH relative to the workspace: a change git's own
	// format does not allow, a submodule the host's index does not have.
	// They were put back to what the host has.
	NotCopied []string `json:"not_copied,omitempty"`
}

// Process is a process still running in the sandbox.
type Process struct {
	PID     int    `json:"pid"`
	Command string `json:"command"`
}
