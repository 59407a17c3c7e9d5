package main

import (
	"errors"

	"github.com/spf13/cobra"
)

func newImageCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "image",
		Short: "not implemented yet",
		RunE: func(cmd *cobra.Command, args []string) error {
			return errors.New("image: not implemented yet")
		},
	}
}
