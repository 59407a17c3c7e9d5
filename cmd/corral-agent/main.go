// Command corral-agent is corral's in-sandbox agent alone, as `corral-agent
// agent [SUBCOMMAND]` takes the arguments of `corral agent`: the binary of
// the Kubernetes backend's agent image, small and quick to start, because
// the agent starts a copy of itself (a tracker) for each command. See
// package sandbox/agent.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/corralhq/corral/sandbox/agent"
)

func main() {
	if len(os.Args) < 2 || os.Args[1] != "agent" {
		fmt.Fprintln(os.Stderr, "usage: corral-agent agent [track|install|pack|unpack|connect ...] (corral's in-sandbox agent; not for people)")
		os.Exit(2)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if err := agent.Main(context.Background(), os.Args[2:], os.Stdin, os.Stdout, log); err != nil {
		fmt.Fprintln(os.Stderr, "corral-agent:", err)
		os.Exit(1)
	}
}
