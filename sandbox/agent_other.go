//go:build !linux

package sandbox

import (
	"context"
	"errors"
	"io"
	"log/slog"
)

// RunAgent serves the host's protocol inside a sandbox container; the agent
// runs on Linux only.
func RunAgent(ctx context.Context, in io.Reader, out io.Writer, log *slog.Logger) error {
	return errors.New("the sandbox agent runs on Linux only")
}
