package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/docker/go-units"
	"github.com/spf13/cobra"

	"github.com/corralhq/corral/control"
	"github.com/corralhq/corral/internal/httpserve"
)

func newServeCmd() *cobra.Command {
	var (
		f           sessionFlags
		httpAddr    string
		stdio       bool
		maxSessions int
		idleTimeout time.Duration
		maxOutput   string
		maxRequest  string
		snapshots   string
		warm        int
		workDir     string
	)
	cmd := &cobra.Command{
		Use:   "serve (--http ADDR | --stdio) [flags]",
		Short: "Serve sessions to programs in any language: the control API",
		Long: `serve is corral's control API, for programs rather than models: evaluation
harnesses, CI systems, other agents' runtimes. A client creates sessions (each a
sandbox and a tools session on a workspace, with the options of corral run),
calls the tools with corral run's JSON, runs commands without the model's
shaping (exec: argv or a shell command, stdin bytes, stdout and stderr apart,
exit code, a timeout that ends every process, an output cap, streaming), reads
and writes files as bytes, snapshots a session (an image of its sandbox, a copy
of its workspace and of its /tmp) for new sessions to start from, and lists and
closes its sessions.

With --warm N, N sandboxes of the default configuration (the flags below) are
kept started ahead, on the Docker backend: a session that names no workspace
and no snapshot, and changes nothing of its sandbox, takes a ready one, and its
first command runs at once; others start cold. A session on a directory of
the workspace root is always cold: it works on that directory itself.

With --http ADDR it speaks HTTP and JSON (streams as NDJSON) on ADDR, loopback
unless --auth-token is given; with --stdio, JSON-RPC 2.0 on stdin and stdout,
one message a line. docs/api.md documents every request.

The flags below are every session's defaults; a session's options change them.
--workspace is the workspace root: a session works on it or a directory below
it, or on a fresh empty directory when it names none. Every session's sandbox
is removed when the server exits (after a kill -9: by corral gc).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if (httpAddr == "") == !stdio {
				return errors.New("give --http ADDR or --stdio")
			}
			f.authToken = httpserve.Token(f.authToken)
			maxOut, err := units.RAMInBytes(maxOutput)
			if err != nil || maxOut <= 0 {
				return fmt.Errorf("--max-output %q: want a size such as 64m", maxOutput)
			}
			maxReq, err := units.RAMInBytes(maxRequest)
			if err != nil || maxReq <= 0 {
				return fmt.Errorf("--max-request %q: want a size such as 64m", maxRequest)
			}
			if maxSessions < 0 {
				return errors.New("--max-sessions must not be negative")
			}
			switch {
			case warm < 0:
				return errors.New("--warm must not be negative")
			case warm > 0 && f.sandbox.backend.kubernetes():
				return errors.New("--warm keeps Docker sandboxes ready on this machine; on Kubernetes, claim pods from an agent-sandbox warm pool with --warm-pool NAME (corral kube pool create NAME --size N)")
			case warm > 0 && maxSessions > 0 && warm > maxSessions:
				return fmt.Errorf("--warm %d is more than --max-sessions %d: the ready sandboxes count against it", warm, maxSessions)
			case warm == 0 && workDir != "":
				return errors.New("--work-dir needs --warm")
			}
			stopUI, err := f.startUI(cmd.Context(), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer stopUI()
			cfg, closeEvents, err := f.fullConfig(cmd.ErrOrStderr(), logger(cmd))
			if err != nil {
				return err
			}
			defer closeEvents()
			if idleTimeout == 0 {
				idleTimeout = -1 // never
			}
			srv, err := control.NewServer(control.Options{
				Config:      cfg,
				Version:     version(),
				MaxSessions: maxSessions,
				IdleTimeout: idleTimeout,
				MaxOutput:   maxOut,
				MaxRequest:  maxReq,
				SnapshotDir: snapshots,
				Warm:        warm,
				WorkDir:     workDir,
			})
			if err != nil {
				return err
			}
			defer srv.Close()
			if stdio {
				return srv.ServeStdio(cmd.Context(), cmd.InOrStdin(), cmd.OutOrStdout())
			}
			ln, err := control.Listen(httpAddr, f.authToken)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "corral: serving the control API at http://%s/v1\n", ln.Addr())
			return srv.Serve(cmd.Context(), ln, control.HTTPOptions{Token: f.authToken})
		},
	}
	f.register(cmd.Flags())
	cmd.Flags().Lookup("workspace").Usage = "the workspace root: a session works on this directory or one below it (or on a fresh empty directory when it names none)"
	cmd.Flags().StringVar(&httpAddr, "http", "", "serve HTTP on `ADDR` (e.g. 127.0.0.1:8767; port 0 picks one); a non-loopback address needs --auth-token")
	cmd.Flags().BoolVar(&stdio, "stdio", false, "serve JSON-RPC 2.0 on stdin and stdout, one message a line")
	cmd.Flags().StringVar(&f.authToken, "auth-token", "", "require the header \"Authorization: Bearer `TOKEN`\" on every HTTP request, of the API and of --ui (default: $CORRAL_AUTH_TOKEN)")
	cmd.Flags().IntVar(&maxSessions, "max-sessions", 0, "most sessions open at once; more are refused (too_many_sessions) until one closes (0: no limit); with --warm, also the most sandboxes alive, the ready ones included")
	cmd.Flags().DurationVar(&idleTimeout, "idle-timeout", 30*time.Minute, "close a session (and remove its sandbox) after this long without requests; 0 never")
	cmd.Flags().StringVar(&maxOutput, "max-output", "64m", "most bytes a response holds in memory: an exec's output per stream when not streamed, a file read as JSON")
	cmd.Flags().StringVar(&maxRequest, "max-request", "64m", "most bytes of one request body (HTTP) or line (stdio)")
	cmd.Flags().StringVar(&snapshots, "snapshots", "", "the snapshot store sessions snapshot into and start from, shared with corral run --tasks and corral snapshot (default $XDG_STATE_HOME/corral/snapshots)")
	cmd.Flags().IntVar(&warm, "warm", 0, "keep `N` sandboxes of the default configuration started ahead (Docker): a session on a fresh workspace that changes nothing of its sandbox takes one, and starts at once; the ready ones count against --max-sessions")
	cmd.Flags().StringVar(&workDir, "work-dir", "", "with --warm, where the ready sandboxes' workspaces (slots) are made (default: ~/.local/state/corral/pools; one of yours, or root's not writable by others); corral gc removes what a killed server left there")
	return cmd
}
