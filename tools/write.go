package tools

import (
	"context"
	"errors"
)

// WriteParams are the arguments of write.
type WriteParams struct {
	Path    string `json:"path" jsonschema:"file to create or overwrite, relative to the workspace root"`
	Content string `json:"content" jsonschema:"the whole new content of the file"`
}

// WriteDescription teaches the model how to use write.
const WriteDescription = `Write a file. TODO`

func (s *Session) write(ctx context.Context, p WriteParams) (Result, error) {
	return Result{}, errors.New("write: not implemented")
}
