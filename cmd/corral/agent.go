package main

import (
	"errors"

	"github.com/spf13/cobra"
)

func newAgentCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "agent",
		Short: "not implemented yet",
		RunE: func(cmd *cobra.Command, args []string) error {
			return errors.New("agent: not implemented yet")
		},
	}
}
