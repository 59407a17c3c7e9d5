package corral

import (
	"context"

	"github.com/corralhq/corral/checkpoint"
	"github.com/corralhq/corral/tools"
)

// Checkpoints returns the store of the workspace's checkpoints, nil when the
// configuration takes none.
func (h *Host) Checkpoints() *checkpoint.Store { return h.store }

// checkpointer adapts a session's Recorder to the tools session.
func checkpointer(r *checkpoint.Recorder) tools.Checkpointer {
	return tools.CheckpointFunc(func(ctx context.Context, req tools.CheckpointRequest) (tools.CheckpointInfo, error) {
		c, err := r.Checkpoint(ctx, checkpoint.Call{Call: req.CallID, Tool: req.Tool, Command: req.Command, Path: req.Path})
		if err != nil {
			return tools.CheckpointInfo{}, err
		}
		info := tools.CheckpointInfo{ID: c.ID, Ref: c.Ref, Unchanged: c.Unchanged, Files: c.Files, Added: c.Added, Removed: c.Removed, Notice: c.Notice}
		for _, x := range c.Changed {
			info.Changed = append(info.Changed, tools.CheckpointChange{Path: x.Path, Status: x.Status, Added: x.Added, Removed: x.Removed})
		}
		for _, x := range c.Skipped {
			info.Skipped = append(info.Skipped, tools.CheckpointSkip{Path: x.Path, Size: x.Size, Reason: x.Reason})
		}
		return info, nil
	})
}
