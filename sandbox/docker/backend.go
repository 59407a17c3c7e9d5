// Package docker is the Docker backend of sandbox: each session's sandbox
// is an ephemeral, hardened container that sees only the bind-mounted
// workspace, with corral's agent as its main process, reached over the
// container's attach stream. The engine is the one the environment names
// (DOCKER_HOST, ...). The backend also keeps the repository's shadow: no
// command ever sees the host's .git, only a copy whose changes are checked
// before they reach the host (git.go).
package docker

import (
	"context"

	"github.com/corralhq/corral/sandbox"
)

// Backend is the Docker backend, the default: each sandbox is a container
// of the engine the environment names (DOCKER_HOST, ...); see New, List, GC.
var Backend sandbox.Backend = backend{}

type backend struct{}

func (backend) Name() string { return "docker" }

func (backend) New(cfg sandbox.Config) (sandbox.Sandbox, error) {
	c, err := New(cfg)
	if err != nil {
		return nil, err
	}
	return c, nil
}

func (backend) List(ctx context.Context) ([]sandbox.Info, error) { return List(ctx) }

func (backend) GC(ctx context.Context) ([]string, error) { return GC(ctx) }

// MountsWorkspace says that the Docker backend's sandboxes mount their
// workspace from this machine: what is written into the directory on the
// host, even after the sandbox started, is there inside it (the slots of
// package pool rely on it).
func (backend) MountsWorkspace() bool { return true }

var _ sandbox.Sandbox = (*Container)(nil)
