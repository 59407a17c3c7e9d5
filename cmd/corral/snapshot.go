package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/docker/go-units"
	"github.com/spf13/cobra"

	"github.com/corralhq/corral/snapshot"
)

func newSnapshotCmd() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "snapshot ls | rm NAME...",
		Short: "List or remove the snapshots that batch tasks and API sessions take and start from",
		Long: `A snapshot is an image of a sandbox's filesystem (what its commands installed
or changed outside the workspace), a copy of its workspace and an archive of its
/tmp (HOME is there), so that tasks start from where one got to. A task of
corral run --tasks takes one with "snapshot": "NAME" and starts from one with
"from_snapshot": "NAME"; through the control API (corral serve), session.snapshot
takes one and session.create's "from_snapshot" starts from one. They are kept in --snapshots DIR (default
$XDG_STATE_HOME/corral/snapshots) and as the images corral/snapshot:NAME.`,
	}
	cmd.PersistentFlags().StringVar(&dir, "snapshots", "", "the snapshot store (default $XDG_STATE_HOME/corral/snapshots)")
	var asJSON bool
	ls := &cobra.Command{
		Use:   "ls",
		Short: "List the snapshots",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			store, err := snapshot.Open(dir)
			if err != nil {
				return err
			}
			list, err := store.List()
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				if list == nil {
					list = []*snapshot.Snapshot{}
				}
				return enc.Encode(list)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 3, ' ', 0)
			fmt.Fprintln(tw, "NAME\tIMAGE\tBASE\tWORKSPACE\tCREATED")
			for _, sn := range list {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d files, %s\t%s ago\n", sn.Name, sn.Image, sn.Base, sn.Files,
					units.HumanSize(float64(sn.Bytes)), time.Since(sn.Created).Round(time.Second))
			}
			return tw.Flush()
		},
	}
	ls.Flags().BoolVar(&asJSON, "json", false, "print a JSON array")
	rm := &cobra.Command{
		Use:   "rm NAME...",
		Short: "Remove snapshots: their copies and their images",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			store, err := snapshot.Open(dir)
			if err != nil {
				return err
			}
			var errs []error
			for _, name := range args {
				if err := store.Remove(cmd.Context(), name); err != nil {
					errs = append(errs, err)
					continue
				}
				fmt.Fprintln(cmd.OutOrStdout(), "removed", name)
			}
			return errors.Join(errs...)
		},
	}
	cmd.AddCommand(ls, rm)
	return cmd
}
