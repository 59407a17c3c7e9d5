package main

import (
	"context"
	"fmt"
	"io"

	"github.com/docker/go-units"
	"github.com/spf13/pflag"

	"github.com/corralhq/corral"
	"github.com/corralhq/corral/checkpoint"
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

// options are the checkpoint options of the flags for ws; nil when they are
// off, or when checkpoints cannot be taken there (no git, no state
// directory): the tools still work, and warn hears that nothing can be
// undone.
func (f *checkpointFlags) options(ws string, warn io.Writer) (*checkpoint.Options, error) {
	if f.off {
		return nil, nil
	}
	max, err := units.RAMInBytes(f.maxSize)
	if err != nil || max <= 0 {
		return nil, fmt.Errorf("--checkpoint-max-file %q: want a size such as 10m", f.maxSize)
	}
	o := &checkpoint.Options{Workspace: ws, MaxFileSize: max, IncludeIgnored: f.ignored}
	if _, err := checkpoint.Open(context.Background(), *o); err != nil {
		fmt.Fprintf(warn, "corral: warning: no checkpoints, changes cannot be undone with corral restore: %v (--no-checkpoints silences this)\n", err)
		return nil, nil
	}
	return o, nil
}

// isolateFlags are --isolate and --with-uncommitted, of `run`, `mcp` and
// `shell`.
type isolateFlags struct {
	on              bool
	withUncommitted bool
}

func (f *isolateFlags) register(fs *pflag.FlagSet) {
	fs.BoolVar(&f.on, "isolate", false, "work on a private copy of the workspace (in corral's state directory), mounted at the workspace's path; the workspace and its repository are not mounted at all. Review the changes with corral diff --session ID, bring them in with corral apply")
	fs.BoolVar(&f.withUncommitted, "with-uncommitted", false, "with --isolate, put your uncommitted changes and untracked files (not ignored ones) into the copy; without it, a git workspace's copy holds HEAD's tree")
}

// isolation is the isolation of the flags; nil without --isolate.
func (f *isolateFlags) isolation() (*corral.Isolation, error) {
	if !f.on {
		if f.withUncommitted {
			return nil, fmt.Errorf("--with-uncommitted needs --isolate")
		}
		return nil, nil
	}
	return &corral.Isolation{WithUncommitted: f.withUncommitted}, nil
}
