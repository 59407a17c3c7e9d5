package tools

import (
	"context"
	"errors"
)

// BashParams are the arguments of bash.
type BashParams struct {
	Command string `json:"command" jsonschema:"the shell command to run"`
	Timeout int    `json:"timeout,omitempty" jsonschema:"timeout in seconds (default 120, at most 600)"`
}

// BashDescription teaches the model how to use bash.
const BashDescription = `Run a shell command in the sandbox. TODO`

// shell is the bash tool's state of one session.
type shell struct{}

func newShell(ctx context.Context, s *Session) (*shell, error) { return &shell{}, nil }

func (sh *shell) close() error { return nil }

func (s *Session) bash(ctx context.Context, p BashParams) (Result, error) {
	return Result{}, errors.New("bash: not implemented")
}
