package sandbox

import (
	"context"
	"io"

	"github.com/corralhq/corral/fsys"
)

// Sandbox is what a session needs of a sandbox, whatever runs it: a place
// where commands run against the session's workspace, isolated from the
// host. Each backend (package sandbox/docker's containers, sandbox/kube's
// pods) implements it with the same agent and protocol, through a Client.
// Its methods are safe for concurrent use.
type Sandbox interface {
	// Session returns the session id that names the sandbox (its labels, its
	// container or pod).
	Session() string
	// Workspace returns the workspace directory as commands see it.
	Workspace() string
	// Start starts the sandbox now rather than at the first command.
	Start(ctx context.Context) error
	// Exec runs one command to its end. A command that ran and failed is a
	// result, not an error; errors are for a sandbox that could not run it:
	// a *DiedError when it died under the call (the next call starts a new
	// one and says so in its result), ErrClosed after Close.
	Exec(ctx context.Context, req ExecRequest) (ExecResult, error)
	// Shell runs an interactive shell wired to stdin and stdout (which
	// should be a terminal in raw mode) until it exits, and returns its
	// exit status. Window size changes are read from resize (nil for none;
	// a size already waiting there is the initial one, else 80x24). When
	// stdin ends the terminal gets ^D. A goroutine may stay blocked reading
	// stdin after Shell returns.
	Shell(ctx context.Context, stdin io.Reader, stdout io.Writer, resize <-chan WindowSize) (int, error)
	// FS returns the workspace as the file tools should reach it, for the
	// caller to close: the host's own directory where the sandbox mounts it
	// (Docker), or the workspace inside the sandbox through its agent
	// (an AgentFS), where it lives there.
	FS(ctx context.Context) (fsys.Root, error)
	// Close removes the sandbox; it works with an already cancelled ctx.
	// Later calls fail with ErrClosed.
	Close(ctx context.Context) error
}

// Backend makes sandboxes, and lists and reaps those it made: package
// sandbox/docker's Backend, or a sandbox/kube Backend. Settings that only
// one backend knows (a cluster's kubeconfig and namespace, say) belong to
// its own Backend value, not to Config.
type Backend interface {
	// Name names the backend in messages ("docker").
	Name() string
	// New validates cfg and returns a sandbox that starts at its first use
	// (Start, Exec or Shell).
	New(cfg Config) (Sandbox, error)
	// List describes every corral sandbox of the backend, running or not.
	List(ctx context.Context) ([]Info, error)
	// GC removes the sandboxes whose owner process is gone, and returns
	// their names.
	GC(ctx context.Context) ([]string, error)
}

// WindowSize is a terminal's size in character cells.
type WindowSize struct {
	Cols, Rows uint16
}

// Committer is a sandbox whose filesystem can become an image, from which
// later sandboxes start (package snapshot): the Docker backend's.
type Committer interface {
	// Commit makes an image of the sandbox's filesystem as it is now —
	// what commands installed or changed outside the workspace; not the
	// mounts (the workspace, /tmp and HOME) — tagged ref, with labels, and
	// returns its ID. The sandbox must be running.
	Commit(ctx context.Context, ref string, labels map[string]string) (string, error)
}
