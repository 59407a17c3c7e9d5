package main

import (
	"errors"

	"github.com/spf13/cobra"
)

func newMCPCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "mcp",
		Short: "not implemented yet",
		RunE: func(cmd *cobra.Command, args []string) error {
			return errors.New("mcp: not implemented yet")
		},
	}
}
