// Command agent is a stand-in for `corral agent` that the sandbox tests build
// when ./cmd/corral does not build (another package of the tree is mid-change).
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/corralhq/corral/sandbox/agent"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(os.Args) == 6 && os.Args[1] == "agent" && os.Args[2] == "connect" {
		if err := agent.Connect(ctx, os.Args[3], os.Args[4], os.Args[5], os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "corral:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) != 2 || os.Args[1] != "agent" {
		fmt.Fprintln(os.Stderr, "usage: agent agent | agent agent connect PROXY HOST PORT")
		os.Exit(2)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if err := agent.Run(ctx, os.Stdin, os.Stdout, log); err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		os.Exit(1)
	}
}
