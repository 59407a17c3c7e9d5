// Command corral runs an AI coding agent's tools — read, edit, write, bash — safely:
// shell commands in an ephemeral hardened container, file edits checked and atomic,
// every command classified by a policy engine. See README.md.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if err := run(); err != nil {
		var ee exitError
		if errors.As(err, &ee) {
			os.Exit(int(ee))
		}
		fmt.Fprintln(os.Stderr, "corral:", err)
		os.Exit(1)
	}
}

// exitError ends the process with a status, without printing anything more.
type exitError int

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return newRootCmd().ExecuteContext(ctx)
}
