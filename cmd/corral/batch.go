package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/corralhq/corral/batch"
	"github.com/corralhq/corral/snapshot"
)

// batchFlags are the flags of `corral run --tasks`.
type batchFlags struct {
	tasks     string
	out       string
	max       int
	warm      int
	rate      float64
	workDir   string
	snapshots string
}

func (b *batchFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&b.tasks, "tasks", "", "batch mode: run the tasks of this JSON-lines `FILE`, each in a sandbox of its own (see corral run --help)")
	fs.StringVar(&b.out, "out", "", "with --tasks, the output `DIR`: DIR/<id>/results.jsonl and events.jsonl per task, DIR/summary.json")
	fs.IntVar(&b.max, "max-sandboxes", 0, fmt.Sprintf("with --tasks, the most sandboxes alive at once, ready ones included (default twice the cores: %d)", batch.DefaultMax()))
	fs.IntVar(&b.warm, "warm", 0, "with --tasks, how many of the sandboxes to start ahead for the tasks to come, so that a task finds its sandbox ready (Docker; --max-sandboxes minus this many tasks run at once)")
	fs.Float64Var(&b.rate, "start-rate", 0, fmt.Sprintf("with --tasks, the most sandboxes started a second, evenly spaced (default twice the cores: %v)", batch.DefaultRate()))
	fs.StringVar(&b.workDir, "work-dir", "", "with --tasks, where the tasks' workspaces are made (default: ~/.local/state/corral/pools; one of yours, or root's not writable by others); corral gc removes what a killed batch left there")
	fs.StringVar(&b.snapshots, "snapshots", "", "with --tasks, the snapshot store of the tasks' snapshot and from_snapshot (default $XDG_STATE_HOME/corral/snapshots)")
}

// batchHelp is the part of run's help about --tasks.
const batchHelp = `

With --tasks FILE --out DIR, run is batch mode: each line of FILE is a task,
run in a sandbox of its own, in parallel up to --max-sandboxes, started at most
--start-rate a second:

  {"id": "t1", "workspace": "repo", "image": "corral/dev:bookworm",
   "memory": "1g", "cpus": 1, "pids_limit": 256, "network": "none",
   "env": {"K": "V"}, "timeout": "10m",
   "calls": [{"id": "1", "tool": "bash", "args": {"command": "make test"}}]}

The workspace comes from "workspace" (a directory, copied for the task; with
"shared": true used in place), "git" and "rev" (a repository cloned at a
revision), "tar" (a tar file, gzipped or not) or "from_snapshot" (a snapshot's
image and workspace); none gives an empty one. "calls_file" names a file of
calls in run's input form instead of "calls". "snapshot": "NAME" snapshots the
task's sandbox when its calls are done, for later tasks' "from_snapshot".
Paths are relative to FILE's directory; the other fields default to the flags.

Each task writes DIR/<id>/results.jsonl and DIR/<id>/events.jsonl; DIR/summary.json
gives each task's status, calls, errors, duration, sandbox start time and the
exit status of its last bash command. A task that fails (a malformed line
among them) fails alone. The exit status is 0 when every task ran, 1 when one
failed, 130 after Ctrl-C, which stops every task and removes every sandbox.`

// runBatch is `corral run --tasks`.
func runBatch(cmd *cobra.Command, f *sessionFlags, b *batchFlags, download string) error {
	stderr := cmd.ErrOrStderr()
	switch {
	case b.out == "":
		return errors.New("--tasks needs --out DIR, where each task's results and the summary go")
	case f.uiAddr != "" || f.events != "" || download != "" || f.logDir != "":
		return errors.New("--ui, --events, --download and --log-dir are for one session: with --tasks each task has its own events and logs in --out")
	case f.isolate.on:
		return errors.New("--isolate: with --tasks each task already works on its own copy (unless shared)")
	}
	file, err := os.Open(b.tasks)
	if err != nil {
		return fmt.Errorf("--tasks: %w", err)
	}
	abs, err := filepath.Abs(b.tasks)
	if err != nil {
		return err
	}
	tasks, err := batch.ReadTasks(file, filepath.Dir(abs))
	file.Close()
	if err != nil {
		return err
	}
	base, err := f.config(nil)
	if err != nil {
		return err
	}
	base.Workspace, base.Checkpoints, base.Isolate = "", nil, nil
	base.Sandbox.Workspace = ""
	base.Logger = logger(cmd)
	var store *snapshot.Store
	for _, l := range tasks {
		if l.Err == nil && (l.Task.Snapshot != "" || l.Task.FromSnapshot != "") {
			if store, err = snapshot.Open(b.snapshots); err != nil {
				return err
			}
			break
		}
	}
	sum, err := batch.Run(cmd.Context(), batch.Options{
		Tasks:     tasks,
		Out:       b.out,
		Base:      base,
		Max:       b.max,
		Warm:      b.warm,
		Rate:      b.rate,
		WorkDir:   b.workDir,
		Snapshots: store,
		Progress:  stderr,
		Terminal:  isTerminal(stderr),
	})
	if err != nil {
		return err
	}
	switch {
	case cmd.Context().Err() != nil:
		return exitError(130)
	case sum.Failed > 0:
		return exitError(1)
	}
	return nil
}

// isTerminal says whether w is a terminal.
func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
