package main

import (
	"errors"

	"github.com/spf13/cobra"
)

func newPsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "ps",
		Short: "not implemented yet",
		RunE: func(cmd *cobra.Command, args []string) error {
			return errors.New("ps: not implemented yet")
		},
	}
}
