package sandbox

import (
	"context"
	"io"

	"github.com/corralhq/corral/fsys"
)

// Sandbox is what a session needs of a sandbox, whatever runs it: a place
// where commands run against the session's workspace, isolated from the
// host. *Container (Docker) implements it; another backend (Kubernetes)
// implements it with the same agent and protocol, through a Client. Its
// methods are safe for concurrent use.
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
	// Shell runs an interactive shell wired to stdin and stdout until it
	// exits, and returns its exit status; see Container.Shell.
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

// Backend makes sandboxes, and lists and reaps those it made. Docker is the
// default; settings that only one backend knows (a cluster's kubeconfig
// and namespace, say) belong to its own Backend value, not to Config.
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

// Docker is the Docker backend, the default: each sandbox is a container of
// the engine the environment names (DOCKER_HOST, ...); see New, List, GC.
var Docker Backend = dockerBackend{}

type dockerBackend struct{}

func (dockerBackend) Name() string { return "docker" }

func (dockerBackend) New(cfg Config) (Sandbox, error) {
	c, err := New(cfg)
	if err != nil {
		return nil, err
	}
	return c, nil
}

func (dockerBackend) List(ctx context.Context) ([]Info, error) { return List(ctx) }

func (dockerBackend) GC(ctx context.Context) ([]string, error) { return GC(ctx) }

var _ Sandbox = (*Container)(nil)

// MountsWorkspace says that the Docker backend's sandboxes mount their
// workspace from this machine: what is written into the directory on the
// host, even after the sandbox started, is there inside it (the slots of
// package pool rely on it).
func (dockerBackend) MountsWorkspace() bool { return true }
