package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/corralhq/corral/sandbox"
)

func newGCCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "gc",
		Short: "Remove the sandboxes of corral processes that are gone",
		Long: `gc removes the sandbox containers whose owning corral process ran on this host
and is gone (killed with -9, crashed, or the host rebooted). Sandboxes of live
corral processes and of other hosts sharing the engine are left alone. Every corral
that opens a sandbox does the same once at start-up.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			removed, err := sandbox.GC(cmd.Context())
			for _, name := range removed {
				fmt.Fprintln(cmd.OutOrStdout(), "removed", name)
			}
			return err
		},
	}
}
