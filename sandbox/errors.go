package sandbox

import (
	"errors"
	"fmt"
)

// ErrClosed is returned by calls on a sandbox or a Client after Close.
var ErrClosed = errors.New("sandbox is closed")

// ImageNotFoundError says the sandbox image is not on the Docker engine.
type ImageNotFoundError struct {
	Image string
}

func (e *ImageNotFoundError) Error() string {
	if e.Image == DefaultImage {
		return fmt.Sprintf("sandbox image %s not found: build it with `corral image build`", e.Image)
	}
	return fmt.Sprintf("sandbox image %s not found: build it with `docker build -t %s DIR` or fetch it with `docker pull %s`", e.Image, e.Image, e.Image)
}

// DiedError is returned by a call whose sandbox container died under it (killed
// for memory, `docker kill`, an engine restart). The next call starts a new
// container and says so in its result.
type DiedError struct {
	// Container is the dead container's ID.
	Container string
	// Reason says what happened, as far as the engine knows.
	Reason string
	// OOMKilled is set when the engine saw the container run out of memory.
	OOMKilled bool
}

func (e *DiedError) Error() string {
	return "sandbox container died: " + e.Reason
}

// AgentError says the agent binary cannot serve as the in-sandbox agent.
type AgentError struct {
	Path   string
	Reason string
}

func (e *AgentError) Error() string {
	return fmt.Sprintf("sandbox agent %s: %s", e.Path, e.Reason)
}

// StartError says a command could not start: the request asks for what
// cannot be (a missing working directory, a root user, a malformed
// variable), or the sandbox could not start a process. The sandbox is fine.
type StartError struct {
	Reason string
}

func (e *StartError) Error() string {
	return "sandbox: " + e.Reason
}
