package tools

import (
	"context"
	"errors"
)

// EditParams are the arguments of edit.
type EditParams struct {
	Path       string `json:"path" jsonschema:"file to edit, relative to the workspace root"`
	OldText    string `json:"oldText" jsonschema:"exact text to replace; must occur exactly once unless replaceAll"`
	NewText    string `json:"newText" jsonschema:"text to put in its place"`
	ReplaceAll bool   `json:"replaceAll,omitempty" jsonschema:"replace every occurrence of oldText"`
}

// EditDescription teaches the model how to use edit.
const EditDescription = `Edit a file. TODO`

func (s *Session) edit(ctx context.Context, p EditParams) (Result, error) {
	return Result{}, errors.New("edit: not implemented")
}
