package sandbox

import (
	"context"
	"fmt"
	"sync"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/system"
	"github.com/docker/docker/client"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// dockerAPI is the part of the Docker Engine API the sandbox uses.
type dockerAPI interface {
	Info(ctx context.Context) (system.Info, error)
	ImageInspect(ctx context.Context, image string, opts ...client.ImageInspectOption) (image.InspectResponse, error)
	ContainerCreate(ctx context.Context, config *container.Config, host *container.HostConfig, net *network.NetworkingConfig, platform *ocispec.Platform, name string) (container.CreateResponse, error)
	ContainerAttach(ctx context.Context, id string, opts container.AttachOptions) (types.HijackedResponse, error)
	ContainerStart(ctx context.Context, id string, opts container.StartOptions) error
	ContainerInspect(ctx context.Context, id string) (container.InspectResponse, error)
	ContainerWait(ctx context.Context, id string, cond container.WaitCondition) (<-chan container.WaitResponse, <-chan error)
	ContainerRemove(ctx context.Context, id string, opts container.RemoveOptions) error
	ContainerList(ctx context.Context, opts container.ListOptions) ([]container.Summary, error)
}

var (
	dockerOnce   sync.Once
	dockerClient *client.Client
	dockerErr    error
)

// engine returns the process's Docker client, configured from the environment
// (DOCKER_HOST, ...) and negotiating the API version: engines older than the
// client refuse every call otherwise.
func engine() (dockerAPI, error) {
	dockerOnce.Do(func() {
		dockerClient, dockerErr = client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
		if dockerErr != nil {
			dockerErr = fmt.Errorf("docker client: %w", dockerErr)
		}
	})
	if dockerErr != nil {
		return nil, dockerErr
	}
	return dockerClient, nil
}
