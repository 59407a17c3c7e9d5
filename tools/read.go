package tools

import (
	"context"
	"errors"
)

// ReadParams are the arguments of read.
type ReadParams struct {
	Path   string `json:"path" jsonschema:"file or directory to read, relative to the workspace root"`
	Offset int    `json:"offset,omitempty" jsonschema:"1-based line number to start at (default 1)"`
	Limit  int    `json:"limit,omitempty" jsonschema:"maximum number of lines to return (default 2000)"`
}

// ReadDescription teaches the model how to use read.
const ReadDescription = `Read a file of the workspace. TODO`

func (s *Session) read(ctx context.Context, p ReadParams) (Result, error) {
	return Result{}, errors.New("read: not implemented")
}
