package main

import (
	"errors"

	"github.com/spf13/cobra"
)

func newShellCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "shell",
		Short: "not implemented yet",
		RunE: func(cmd *cobra.Command, args []string) error {
			return errors.New("shell: not implemented yet")
		},
	}
}
