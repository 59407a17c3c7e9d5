package main

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/corralhq/corral/tools"
)

// mcpProtocolVersions are the MCP versions corral serves. corral's sessions are
// stateful — a sandbox container and a read-state per client — so it speaks the
// versions with a session handshake; newer clients fall back to it.
var mcpProtocolVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

func newMCPCmd() *cobra.Command {
	var (
		f           sessionFlags
		httpAddr    string
		authToken   string
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
policy wants confirmed is put to the user through the client (MCP elicitation)
when the client supports it; otherwise --confirm decides.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if authToken == "" {
				authToken = os.Getenv("CORRAL_AUTH_TOKEN")
			}
			f.stderr = cmd.ErrOrStderr()
			srv, err := newMCPServer(&f, slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn})))
			if err != nil {
				return err
			}
			defer f.closeEvents()
			defer srv.closeAll()
			if httpAddr == "" {
				err := srv.server.Run(cmd.Context(), &mcp.StdioTransport{})
				if errors.Is(err, context.Canceled) {
					return nil
				}
				return err
			}
			return serveMCPHTTP(cmd.Context(), srv, httpAddr, authToken, idleTimeout, cmd.ErrOrStderr())
		},
	}
	f.register(cmd.Flags())
	cmd.Flags().StringVar(&httpAddr, "http", "", "serve streamable HTTP on `ADDR` (e.g. 127.0.0.1:8765) instead of stdio; a non-loopback address needs --auth-token")
	cmd.Flags().StringVar(&authToken, "auth-token", "", "require the header \"Authorization: Bearer `TOKEN`\" on every HTTP request (default: $CORRAL_AUTH_TOKEN)")
	cmd.Flags().DurationVar(&idleTimeout, "idle-timeout", 30*time.Minute, "over HTTP, end a session (and remove its sandbox) after this long without requests")
	return cmd
}

// mcpServer is the MCP adapter: one tools session per MCP session.
type mcpServer struct {
	flags  *sessionFlags
	log    *slog.Logger
	server *mcp.Server

	mu       sync.Mutex // guards sessions and closed
	sessions map[*mcp.ServerSession]*mcpSession
	closed   bool
	// closing counts the sessions being closed since their client left;
	// closeAll waits for them, so that none is cut short by the exit.
	closing sync.WaitGroup

	callSeq atomic.Int64
}

// mcpSession is the tools session of one MCP session, opened on its first call.
type mcpSession struct {
	ready  chan struct{} // closed when s or err is set
	s      *tools.Session
	err    error
	close  func() error
	router *outputRouter
}

func newMCPServer(f *sessionFlags, log *slog.Logger) (*mcpServer, error) {
	// Check the flags once, so that a mistake fails at start-up, not at the
	// first call.
	if _, err := f.options(); err != nil {
		return nil, err
	}
	if _, err := f.sandbox.config(); err != nil {
		return nil, err
	}
	if _, err := f.policy.engine(); err != nil {
		return nil, err
	}
	m := &mcpServer{flags: f, log: log, sessions: map[*mcp.ServerSession]*mcpSession{}}
	m.server = mcp.NewServer(&mcp.Implementation{Name: "corral", Title: "corral sandboxed tools", Version: version()}, &mcp.ServerOptions{
		Instructions: mcpInstructions,
		Logger:       log,
		// No logging capability: corral logs to its own stderr.
		Capabilities:              &mcp.ServerCapabilities{},
		SupportedProtocolVersions: mcpProtocolVersions,
	})
	addMCPTool(m, tools.ToolRead, tools.ReadDescription, (*tools.Session).Read, &mcp.ToolAnnotations{ReadOnlyHint: true})
	addMCPTool(m, tools.ToolEdit, tools.EditDescription, (*tools.Session).Edit, &mcp.ToolAnnotations{DestructiveHint: ptr(false)})
	addMCPTool(m, tools.ToolWrite, tools.WriteDescription, (*tools.Session).Write, &mcp.ToolAnnotations{DestructiveHint: ptr(true)})
	addMCPTool(m, tools.ToolBash, tools.BashDescription, (*tools.Session).Bash, &mcp.ToolAnnotations{DestructiveHint: ptr(true), OpenWorldHint: ptr(false)})
	return m, nil
}

const mcpInstructions = `corral's tools work on one workspace. Read a file before you edit or overwrite it; edit replaces exact text that occurs once. bash runs each command in a sandboxed Linux container that sees only the workspace, at the same path; the working directory persists between calls, the environment does not. Some commands need the user's approval and some are refused by policy, with the reason.`

func ptr[T any](v T) *T { return &v }

// addMCPTool registers one tool. Its input schema comes from the same params
// struct the library decodes; the result's text is the model's text and its
// details travel as structured content.
func addMCPTool[P any](m *mcpServer, name, description string, call func(*tools.Session, context.Context, P) (tools.Result, error), ann *mcp.ToolAnnotations) {
	mcp.AddTool(m.server, &mcp.Tool{Name: name, Description: description, Annotations: ann},
		func(ctx context.Context, req *mcp.CallToolRequest, p P) (*mcp.CallToolResult, any, error) {
			ms, err := m.session(ctx, req.Session)
			if err != nil {
				return nil, nil, err
			}
			id := fmt.Sprintf("mcp-%d", m.callSeq.Add(1))
			ctx = tools.WithCallID(ctx, id)
			if tok := req.Params.GetProgressToken(); tok != nil && name == tools.ToolBash {
				stop := ms.router.progress(ctx, id, req.Session, tok)
				defer stop()
			}
			r, err := call(ms.s, ctx, p)
			if err != nil {
				return nil, nil, err
			}
			res := &mcp.CallToolResult{
				Content: []mcp.Content{&mcp.TextContent{Text: r.Content}},
				IsError: r.IsError,
			}
			if r.Details != nil {
				res.StructuredContent = r.Details
			}
			return res, nil, nil
		})
}

// session returns the tools session of ss, opening it on first use.
func (m *mcpServer) session(ctx context.Context, ss *mcp.ServerSession) (*mcpSession, error) {
	if ss == nil {
		return nil, errors.New("corral needs an MCP session (a connection with an initialize handshake)")
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, errors.New("the server is shutting down")
	}
	ms, ok := m.sessions[ss]
	if !ok {
		ms = &mcpSession{ready: make(chan struct{}), router: newOutputRouter()}
		m.sessions[ss] = ms
	}
	m.mu.Unlock()
	if !ok {
		m.open(ss, ms)
	}
	select {
	case <-ms.ready:
		return ms, ms.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// open opens the tools session of ss and closes it when the client goes away.
func (m *mcpServer) open(ss *mcp.ServerSession, ms *mcpSession) {
	fallback, _ := m.flags.options() // checked at start-up
	confirm := &elicitConfirmer{ss: ss, fallback: fallback.Confirmer}
	// The session outlives the call that opened it.
	ms.s, ms.close, ms.err = m.flags.openSession(context.Background(), func(o *tools.Options) {
		o.Confirmer = confirm
		o.Events = teeSink(o.Events, ms.router)
	})
	close(ms.ready)
	if ms.err != nil {
		m.mu.Lock()
		delete(m.sessions, ss)
		m.mu.Unlock()
		return
	}
	go func() {
		ss.Wait()
		m.mu.Lock()
		if _, ok := m.sessions[ss]; !ok {
			m.mu.Unlock()
			return // closeAll has it
		}
		delete(m.sessions, ss)
		m.closing.Add(1)
		m.mu.Unlock()
		defer m.closing.Done()
		if err := ms.close(); err != nil {
			m.log.Warn("closing a session", "err", err)
		}
	}()
}

// closeAll closes every open session: their sandboxes are removed.
func (m *mcpServer) closeAll() {
	m.mu.Lock()
	m.closed = true
	all := m.sessions
	m.sessions = map[*mcp.ServerSession]*mcpSession{}
	m.mu.Unlock()
	var wg sync.WaitGroup
	for _, ms := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-ms.ready
			if ms.err == nil {
				if err := ms.close(); err != nil {
					m.log.Warn("closing a session", "err", err)
				}
			}
		}()
	}
	wg.Wait()
	m.closing.Wait()
}

// elicitConfirmer asks the user through the MCP client when it supports
// elicitation, and falls back to the --confirm policy otherwise.
type elicitConfirmer struct {
	ss       *mcp.ServerSession
	fallback tools.Confirmer
}

func (c *elicitConfirmer) Confirm(ctx context.Context, req tools.ConfirmRequest) (bool, error) {
	ip := c.ss.InitializeParams()
	if ip == nil || ip.Capabilities == nil || ip.Capabilities.Elicitation == nil {
		if c.fallback == nil {
			return false, tools.ErrNoApprover
		}
		return c.fallback.Confirm(ctx, req)
	}
	res, err := c.ss.Elicit(ctx, &mcp.ElicitParams{
		Message: fmt.Sprintf("The agent wants to run this command in the sandbox:\n\n    %s\n\n%s (policy rule %s). Run it?",
			req.Command, req.Verdict.Reason, req.Verdict.Rule),
		RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{}},
	})
	if err != nil {
		return false, fmt.Errorf("asking the user through the MCP client: %w", err)
	}
	return res.Action == "accept", nil
}

// teeSink sends events to a and b; either may be nil.
func teeSink(a tools.EventSink, b tools.EventSink) tools.EventSink {
	if a == nil {
		return b
	}
	return tools.EventFunc(func(e tools.Event) {
		a.Emit(e)
		b.Emit(e)
	})
}

// outputRouter sends the output events of bash calls that asked for progress to
// their MCP progress notifications.
type outputRouter struct {
	mu    sync.Mutex // guards calls
	calls map[string]*progressStream
}

func newOutputRouter() *outputRouter {
	return &outputRouter{calls: map[string]*progressStream{}}
}

func (r *outputRouter) Emit(e tools.Event) {
	if e.Type != tools.EventOutput {
		return
	}
	r.mu.Lock()
	p := r.calls[e.CallID]
	r.mu.Unlock()
	if p != nil {
		p.add(e.Data)
	}
}

// progressStream batches a call's output into progress notifications: at most
// one every progressInterval, carrying the output that arrived since the last.
type progressStream struct {
	mu      sync.Mutex // guards pending, total
	pending []byte
	total   int
	wake    chan struct{}
}

const (
	progressInterval = 250 * time.Millisecond
	// maxProgressMessage caps the text of one notification; the rest of a flood
	// is in the result and the log.
	maxProgressMessage = 4096
)

func (p *progressStream) add(data string) {
	p.mu.Lock()
	p.total += len(data)
	p.pending = append(p.pending, data...)
	if over := len(p.pending) - maxProgressMessage; over > 0 {
		p.pending = append(p.pending[:0], p.pending[over:]...)
	}
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

func (p *progressStream) take() (string, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := string(p.pending)
	p.pending = p.pending[:0]
	return s, p.total
}

// progress starts sending progress notifications for call id; stop ends them
// after a last notification with what remains.
func (r *outputRouter) progress(ctx context.Context, id string, ss *mcp.ServerSession, token any) (stop func()) {
	p := &progressStream{wake: make(chan struct{}, 1)}
	r.mu.Lock()
	r.calls[id] = p
	r.mu.Unlock()
	done := make(chan struct{})
	finished := make(chan struct{})
	send := func() {
		msg, total := p.take()
		if msg == "" {
			return
		}
		// Progress must increase: bytes of output so far.
		ss.NotifyProgress(context.WithoutCancel(ctx), &mcp.ProgressNotificationParams{
			ProgressToken: token, Progress: float64(total), Message: tools.PlainText(msg),
		})
	}
	go func() {
		defer close(finished)
		tick := time.NewTicker(progressInterval)
		defer tick.Stop()
		for {
			select {
			case <-done:
				send()
				return
			case <-p.wake:
				select {
				case <-tick.C:
					send()
				case <-done:
					send()
					return
				}
			}
		}
	}()
	return func() {
		r.mu.Lock()
		delete(r.calls, id)
		r.mu.Unlock()
		close(done)
		<-finished
	}
}

// serveMCPHTTP serves streamable HTTP on addr until ctx is done.
func serveMCPHTTP(ctx context.Context, m *mcpServer, addr, token string, idle time.Duration, stderr io.Writer) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--http %q: want HOST:PORT, e.g. 127.0.0.1:8765", addr)
	}
	if !isLoopback(host) && token == "" {
		return fmt.Errorf("--http %s listens beyond this machine: give --auth-token (or $CORRAL_AUTH_TOKEN) so that only your clients can run commands, or listen on 127.0.0.1", addr)
	}
	var h http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return m.server },
		&mcp.StreamableHTTPOptions{SessionTimeout: idle, Logger: m.log})
	if token != "" {
		h = bearerAuth(token, h)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "corral: serving MCP over streamable HTTP at http://%s/\n", ln.Addr())
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		srv.Shutdown(shutdown)
		return nil
	}
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// bearerAuth refuses requests without `Authorization: Bearer token`.
func bearerAuth(token string, next http.Handler) http.Handler {
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := []byte(r.Header.Get("Authorization"))
		if subtle.ConstantTimeCompare(got, want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="corral"`)
			http.Error(w, "missing or wrong bearer token", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// version is corral's version, from the build information.
func version() string {
	return strings.TrimPrefix(buildVersion(), "v")
}
