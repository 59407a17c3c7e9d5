package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/docker/go-units"
	"github.com/spf13/pflag"

	"github.com/corralhq/corral/checkpoint"
	"github.com/corralhq/corral/tools"
)

// checkpointFlags configure the checkpoints of `run` and `mcp`.
type checkpointFlags struct {
	off     bool
	maxSize string
	ignored bool
}

func (f *checkpointFlags) register(fs *pflag.FlagSet) {
	fs.BoolVar(&f.off, "no-checkpoints", false, "do not record the workspace before each change (corral log, diff, restore)")
	fs.StringVar(&f.maxSize, "checkpoint-max-file", "10m", "files larger than `SIZE` are left out of checkpoints (and listed as skipped)")
	fs.BoolVar(&f.ignored, "checkpoint-ignored", false, "record the files .gitignore ignores too")
}

// open starts recording checkpoints of ws for session; nil when they are off.
func (f *checkpointFlags) open(ctx context.Context, ws, session string) (*checkpoint.Recorder, error) {
	if f.off {
		return nil, nil
	}
	max, err := units.RAMInBytes(f.maxSize)
	if err != nil || max <= 0 {
		return nil, fmt.Errorf("--checkpoint-max-file %q: want a size such as 10m", f.maxSize)
	}
	s, err := checkpoint.Open(ctx, checkpoint.Options{Workspace: ws, MaxFileSize: max, IncludeIgnored: f.ignored})
	if err != nil {
		return nil, err
	}
	return s.Begin(ctx, session)
}

// stderrOr is where warnings go.
func (f *sessionFlags) stderrOr() io.Writer {
	if f.stderr != nil {
		return f.stderr
	}
	return os.Stderr
}

// checkpointer adapts a Recorder to the tools session.
func checkpointer(r *checkpoint.Recorder) tools.Checkpointer {
	return tools.CheckpointFunc(func(ctx context.Context, req tools.CheckpointRequest) (tools.CheckpointInfo, error) {
		c, err := r.Checkpoint(ctx, checkpoint.Call{Call: req.CallID, Tool: req.Tool, Command: req.Command, Path: req.Path})
		if err != nil {
			return tools.CheckpointInfo{}, err
		}
		info := tools.CheckpointInfo{ID: c.ID, Ref: c.Ref, Unchanged: c.Unchanged, Files: c.Files, Added: c.Added, Removed: c.Removed}
		for _, x := range c.Changed {
			info.Changed = append(info.Changed, tools.CheckpointChange{Path: x.Path, Status: x.Status, Added: x.Added, Removed: x.Removed})
		}
		for _, x := range c.Skipped {
			info.Skipped = append(info.Skipped, tools.CheckpointSkip{Path: x.Path, Size: x.Size, Reason: x.Reason})
		}
		return info, nil
	})
}
