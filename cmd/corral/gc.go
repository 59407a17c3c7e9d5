package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/corralhq/corral/checkpoint"
	"github.com/corralhq/corral/pool"
)

func newGCCmd() *cobra.Command {
	var older, copies, workspace, workDir string
	var keep int
	var bf backendFlags
	cmd := &cobra.Command{
		Use:   "gc [flags]",
		Short: "Remove the sandboxes of corral processes that are gone, or old checkpoints",
		Long: `gc removes the sandbox containers whose owning corral process ran on this host
and is gone (killed with -9, crashed, or the host rebooted). Sandboxes of live
corral processes and of other hosts sharing the engine are left alone. Every corral
that opens a sandbox does the same once at start-up. gc also removes the
workspaces a killed batch (run --tasks) left in corral's state directory
(~/.local/state/corral/pools, or --work-dir), the pools' slots with them, and
the slots of a killed corral serve --warm; only directories of the user gc runs
as, never what another user put there.

With --checkpoints AGE or --keep-checkpoints N, gc removes checkpoints instead:
those older than AGE (such as 7d or 36h), and those beyond the N newest of each
workspace — of every workspace, or of --workspace alone. Their refs go at once;
in a git repository their objects go at its next git gc. With --copies AGE, it
removes the isolated sessions' copies (--isolate) made longer ago than AGE that
were never applied, unless a session still uses one.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if older != "" || keep > 0 || copies != "" {
				return gcCheckpoints(cmd, older, keep, copies, workspace)
			}
			backend, err := bf.backend(logger(cmd))
			if err != nil {
				return err
			}
			removed, err := backend.GC(cmd.Context())
			for _, name := range removed {
				fmt.Fprintln(cmd.OutOrStdout(), "removed", name)
			}
			dirs, derr := pool.GC(cmd.Context(), workDir)
			for _, dir := range dirs {
				fmt.Fprintln(cmd.OutOrStdout(), "removed", dir)
			}
			return errors.Join(err, derr)
		},
	}
	cmd.Flags().StringVar(&older, "checkpoints", "", "remove the checkpoints older than `AGE` (7d, 36h)")
	cmd.Flags().IntVar(&keep, "keep-checkpoints", 0, "keep at most `N` checkpoints of each workspace, the newest")
	cmd.Flags().StringVar(&copies, "copies", "", "remove the isolated sessions' copies older than `AGE` (7d, 36h) that were not applied")
	cmd.Flags().StringVarP(&workspace, "workspace", "w", "", "only the checkpoints of this workspace")
	cmd.Flags().StringVar(&workDir, "work-dir", "", "where batches made their tasks' workspaces and servers their warm sandboxes' slots, as run's and serve's --work-dir (default: ~/.local/state/corral/pools; one of yours, or root's not writable by others)")
	bf.register(cmd.Flags(), false)
	return cmd
}

func gcCheckpoints(cmd *cobra.Command, older string, keep int, copies, workspace string) error {
	opts := checkpoint.GCOptions{Keep: keep, Workspace: workspace}
	if older != "" {
		d, err := parseAge(older)
		if err != nil {
			return fmt.Errorf("--checkpoints %w", err)
		}
		opts.OlderThan = d
	}
	if copies != "" {
		d, err := parseAge(copies)
		if err != nil {
			return fmt.Errorf("--copies %w", err)
		}
		opts.CopiesOlderThan = max(d, time.Nanosecond) // 0: every copy not in use
	}
	res, err := checkpoint.GC(cmd.Context(), opts)
	for _, r := range res {
		if r.Gone {
			fmt.Fprintf(cmd.OutOrStdout(), "%s: gone; its checkpoints' state removed\n", r.Workspace)
			continue
		}
		if older != "" || keep > 0 {
			fmt.Fprintf(cmd.OutOrStdout(), "%s: removed %d checkpoint(s), kept %d\n", r.Workspace, r.Removed, r.Kept)
		}
		if copies != "" {
			fmt.Fprintf(cmd.OutOrStdout(), "%s: removed %d isolated session copy(ies)\n", r.Workspace, r.CopiesRemoved)
		}
	}
	return err
}
