package main

import (
	"context"

	"github.com/spf13/cobra"
)

func newRootCmd() *cobra.Command {
	var logs logFlags
	root := &cobra.Command{
		Use:   "corral",
		Short: "Sandboxed read, edit, write and bash tools for AI coding agents",
		Long: `corral gives an AI coding agent the four tools that change the world — read,
edit, write and bash — and makes them safe to hand to an untrusted model: every
shell command runs in an ephemeral, hardened Docker container that sees only the
workspace; edits are exact and never clobber a change made since the file was
read; writes are atomic; a policy engine allows, confirms or denies each command.`,
		Version:       version(),
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			log, err := logs.logger(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			cmd.SetContext(context.WithValue(cmd.Context(), loggerKey{}, log))
			return nil
		},
	}
	logs.register(root.PersistentFlags())
	root.AddCommand(
		newRunCmd(),
		newCheckCmd(),
		newShellCmd(),
		newPsCmd(),
		newGCCmd(),
		newLogCmd(),
		newDiffCmd(),
		newRestoreCmd(),
		newApplyCmd(),
		newSnapshotCmd(),
		newKubeCmd(),
		newImageCmd(),
		newMCPCmd(),
		newServeCmd(),
		newAgentCmd(),
		newUICmd(),
		newReportCmd(),
	)
	return root
}
