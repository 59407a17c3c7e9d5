package main

import (
	"fmt"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/corralhq/corral/internal/httpserve"
	"github.com/corralhq/corral/mcp"
)

func newMCPCmd() *cobra.Command {
	var (
		f           sessionFlags
		httpAddr    string
		idleTimeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "mcp [flags]",
		Short: "Serve read, edit, write and bash over the Model Context Protocol",
		Long: `mcp serves corral's tools to any MCP client (Claude Code, Codex, Cursor, Claude
Desktop, ...), so that the agent's commands run in corral's sandbox instead of on
the host. It speaks MCP over stdin/stdout by default, or streamable HTTP with --http.

Each MCP connection (over HTTP, each MCP session) gets its own tools session and
its own sandbox container, removed when the client goes away. A command the
policy wants confirmed, or a host no network list names (--network allow), is
put to the user through the client (MCP elicitation) when the client supports
it, and at the same time on the terminal (--confirm ask) and in the web view
(--ui): the first answer wins. A client that cannot elicit gets --confirm.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			f.authToken = httpserve.Token(f.authToken)
			stopUI, err := f.startUI(cmd.Context(), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer stopUI()
			h, closeHost, err := f.host(cmd.ErrOrStderr(), logger(cmd))
			if err != nil {
				return err
			}
			defer closeHost()
			srv := mcp.NewServer(h, mcp.Options{Version: version()})
			defer srv.Close()
			if httpAddr == "" {
				return srv.Run(cmd.Context(), &sdk.StdioTransport{})
			}
			ln, err := mcp.Listen(httpAddr, f.authToken)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "corral: serving MCP over streamable HTTP at http://%s/\n", ln.Addr())
			return srv.ServeHTTP(cmd.Context(), ln, mcp.HTTPOptions{Token: f.authToken, IdleTimeout: idleTimeout})
		},
	}
	f.register(cmd.Flags())
	cmd.Flags().StringVar(&httpAddr, "http", "", "serve streamable HTTP on `ADDR` (e.g. 127.0.0.1:8765) instead of stdio; a non-loopback address needs --auth-token")
	cmd.Flags().StringVar(&f.authToken, "auth-token", "", "require the header \"Authorization: Bearer `TOKEN`\" on every HTTP request, of MCP and of --ui (default: $CORRAL_AUTH_TOKEN)")
	cmd.Flags().DurationVar(&idleTimeout, "idle-timeout", 30*time.Minute, "over HTTP, end a session (and remove its sandbox) after this long without requests")
	return cmd
}
