package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/corralhq/corral/internal/sanitize"
	"github.com/corralhq/corral/sandbox/internal/envpath"
	"github.com/corralhq/corral/sandbox/proto"
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

// Exec runs one command to its end through the agent. It starts in the
// client's directory (see Dir), which becomes the command's final directory
// when that is inside the workspace. A command that ran and failed is a
// result, not an error; errors are for a sandbox that could not run it (a
// *DiedError when it died under the call).
func (c *Client) Exec(ctx context.Context, req ExecRequest) (ExecResult, error) {
	begin := time.Now()
	if err := ctx.Err(); err != nil {
		return ExecResult{}, err
	}
	c.mu.Lock()
	dir, reset := c.dir, c.dirReset
	c.dirReset = false
	c.mu.Unlock()
	start := proto.StartMsg{Command: req.Command, Dir: dir, Cols: req.Cols, Rows: req.Rows}
	if c.hello.InputWait && c.inputWait > 0 {
		start.InputWaitMS = int(c.inputWait / time.Millisecond)
	}
	rr, err := c.run(ctx, runParams{start: start, output: req.Output, timeout: req.Timeout})
	res := ExecResult{Duration: time.Since(begin), TimedOut: rr.timedOut, Canceled: rr.canceled, Dir: dir, DirReset: reset}
	if err != nil {
		res.ExitCode = -1
		var d *DiedError
		if errors.As(err, &d) {
			res.OOMKilled = d.OOMKilled
		}
		return res, err
	}
	ex := rr.exit
	if ex.Error != "" {
		return res, fmt.Errorf("sandbox: %s", sanitize.Text(ex.Error))
	}
	// What the agent says is shown to the model and a UI: no text of its
	// (a process's name above all) may carry an escape or a new line.
	res.ExitCode, res.Signal = ex.ExitCode, sanitize.Text(ex.Signal)
	if !rr.got {
		return res, nil
	}
	res.Dir, res.DirReset = ex.Dir, reset || ex.DirReset
	res.InputWait, res.OOMKilled, res.ProcessLimit = ex.InputWait, ex.OOMKilled, ex.ProcessLimit
	for _, p := range ex.Background {
		res.Background = append(res.Background, Process{PID: p.PID, Command: sanitize.Text(p.Command)})
	}
	if res.InputWait {
		res.TimedOut = false
	}
	c.mu.Lock()
	switch {
	case ex.Cwd == "":
		c.dir = ex.Dir
	case envpath.Within(c.workspace, ex.Cwd):
		c.dir = ex.Cwd
	default:
		c.dir, c.dirReset = c.workspace, true
	}
	c.mu.Unlock()
	return res, nil
}

// Shell runs an interactive shell through the agent, in the client's
// directory; see Container.Shell.
func (c *Client) Shell(ctx context.Context, stdin io.Reader, stdout io.Writer, resize <-chan WindowSize) (int, error) {
	if err := ctx.Err(); err != nil {
		return -1, err
	}
	size := WindowSize{Cols: 80, Rows: 24}
	select {
	case ws, ok := <-resize:
		if ok && ws.Cols > 0 && ws.Rows > 0 {
			size = ws
		}
	default:
	}
	rr, err := c.run(ctx, runParams{
		start:  proto.StartMsg{Interactive: true, Dir: c.Dir(), Cols: size.Cols, Rows: size.Rows},
		output: stdout,
		stdin:  stdin,
		resize: resize,
	})
	if err != nil {
		return -1, err
	}
	if rr.exit.Error != "" {
		return -1, fmt.Errorf("sandbox: %s", sanitize.Text(rr.exit.Error))
	}
	if rr.canceled {
		return rr.exit.ExitCode, ctx.Err()
	}
	return rr.exit.ExitCode, nil
}
