package main

import (
	"encoding/json"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/corralhq/corral/sandbox"
)

func newPsCmd() *cobra.Command {
	var asJSON bool
	var bf backendFlags
	cmd := &cobra.Command{
		Use:   "ps [flags]",
		Short: "List corral's sandbox containers",
		Long: `ps lists the sandbox containers on the Docker engine (those labelled
corral.session), running or not, with the corral process that owns each. An owner
marked "gone" died without cleaning up: corral gc removes its sandbox, and so does
the next corral that starts.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			backend, err := bf.backend(logger(cmd))
			if err != nil {
				return err
			}
			infos, err := backend.List(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				if infos == nil {
					infos = []sandbox.Info{}
				}
				return enc.Encode(infos)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 3, ' ', 0)
			fmt.Fprintln(tw, "NAME\tSTATE\tOWNER\tCREATED\tWORKSPACE")
			for _, in := range infos {
				owner := strconv.Itoa(in.PID)
				switch {
				case !in.Local:
					owner += " (another host)"
				case !in.OwnerAlive:
					owner += " (gone)"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s ago\t%s\n", in.Name, in.State, owner,
					time.Since(in.Created).Round(time.Second), in.Workspace)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON array")
	bf.register(cmd.Flags(), false)
	return cmd
}
