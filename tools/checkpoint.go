package tools

import (
	"context"
)

// Checkpointer records the workspace before a call that may change it: edit
// and write, and bash unless the policy is sure the command changes nothing.
// It runs on the host, never in the sandbox. The checkpoint package provides
// one (through a small adapter where the session is assembled).
type Checkpointer interface {
	Checkpoint(ctx context.Context, req CheckpointRequest) (CheckpointInfo, error)
}

// CheckpointFunc adapts a function to Checkpointer.
type CheckpointFunc func(ctx context.Context, req CheckpointRequest) (CheckpointInfo, error)

// Checkpoint calls f.
func (f CheckpointFunc) Checkpoint(ctx context.Context, req CheckpointRequest) (CheckpointInfo, error) {
	return f(ctx, req)
}

// CheckpointRequest says which call a checkpoint is taken before.
type CheckpointRequest struct {
	CallID  string `json:"call_id"`
	Tool    string `json:"tool"`
	Command string `json:"command,omitempty"` // bash's
	Path    string `json:"path,omitempty"`    // edit's and write's, as the model named it
}

// CheckpointInfo is a checkpoint taken, as events carry it.
type CheckpointInfo struct {
	// ID is the checkpoint's number in the workspace (corral restore ID).
	ID  int    `json:"id"`
	Ref string `json:"ref,omitempty"`
	// Unchanged is set when nothing changed since the previous checkpoint.
	Unchanged bool `json:"unchanged,omitempty"`
	// Files counts the files changed since the previous checkpoint; Changed
	// lists them (perhaps not all), Added and Removed count their lines.
	Files   int                `json:"files"`
	Changed []CheckpointChange `json:"changed,omitempty"`
	Added   int                `json:"added"`
	Removed int                `json:"removed"`
	// Skipped are files the checkpoint did not record (too large,
	// repositories, unreadable).
	Skipped []CheckpointSkip `json:"skipped,omitempty"`
	// Notice says what corral repaired before this checkpoint (a workspace
	// made anew at the same path, a record it could not use).
	Notice string `json:"notice,omitempty"`
}

// CheckpointChange is a file changed since the previous checkpoint.
type CheckpointChange struct {
	Path    string `json:"path"`
	Status  string `json:"status"` // A, M, D or T (type changed)
	Added   int    `json:"added"`  // lines; -1 for a binary file
	Removed int    `json:"removed"`
}

// CheckpointSkip is a file a checkpoint did not record.
type CheckpointSkip struct {
	Path   string `json:"path"`
	Size   int64  `json:"size,omitempty"`
	Reason string `json:"reason"`
}

type toolKey struct{}

// checkpoint takes the checkpoint before a change, when the session has a
// Checkpointer. A failure refuses the change: the user was promised that
// every change can be undone.
func (s *Session) checkpoint(ctx context.Context, req CheckpointRequest) error {
	if s.opts.Checkpointer == nil {
		return nil
	}
	req.CallID = callID(ctx)
	if req.Tool == "" {
		req.Tool, _ = ctx.Value(toolKey{}).(string)
	}
	info, err := s.opts.Checkpointer.Checkpoint(ctx, req)
	if err != nil {
		s.emit(Event{Type: EventCheckpoint, CallID: req.CallID, Tool: req.Tool, Error: err.Error()})
		s.log.Warn("tools: checkpoint failed", "call", req.CallID, "err", err)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return userErrorf("corral could not record the workspace before this change (%v), and without a record it could not be undone: nothing was changed. Tell the user.", err)
	}
	s.emit(Event{Type: EventCheckpoint, CallID: req.CallID, Tool: req.Tool, Checkpoint: &info})
	return nil
}
