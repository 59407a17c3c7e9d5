package docker

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"

	"github.com/corralhq/corral/sandbox"
)

// Commit makes an image of the running container's filesystem, tagged ref:
// its changes over the image are a layer of the new one. The container is
// not paused (a paused agent misses its heartbeats, and the sandbox would
// be taken for broken): commit between commands. The image keeps the configuration of the container's
// image (its environment, user, entry point), with labels added; nothing of
// corral's container settings (its agent, labels, mounts) goes into it.
func (c *Container) Commit(ctx context.Context, ref string, labels map[string]string) (string, error) {
	c.mu.Lock()
	api, conn, closed := c.api, c.client, c.closed
	c.mu.Unlock()
	switch {
	case closed:
		return "", sandbox.ErrClosed
	case conn == nil || conn.Err() != nil:
		return "", errors.New("sandbox: no running container to commit: run a command first")
	}
	img, err := api.ImageInspect(ctx, c.cfg.Image)
	if err != nil {
		return "", fmt.Errorf("sandbox: image %s: %w", c.cfg.Image, err)
	}
	cfg := &container.Config{}
	if img.Config != nil {
		cfg = &container.Config{
			User:       img.Config.User,
			Env:        img.Config.Env,
			Cmd:        img.Config.Cmd,
			Entrypoint: img.Config.Entrypoint,
			WorkingDir: img.Config.WorkingDir,
			Labels:     maps.Clone(img.Config.Labels),
			Volumes:    img.Config.Volumes,
			StopSignal: img.Config.StopSignal,
			Shell:      img.Config.Shell,
		}
	}
	if cfg.Labels == nil {
		cfg.Labels = map[string]string{}
	}
	maps.Copy(cfg.Labels, labels)
	resp, err := api.ContainerCommit(ctx, conn.Name(), container.CommitOptions{Reference: ref, Pause: false, Config: cfg, Comment: "corral snapshot of sandbox " + c.cfg.Session})
	if err != nil {
		return "", fmt.Errorf("sandbox: commit: %w", err)
	}
	return resp.ID, nil
}

// RemoveImage removes the image ref from the Docker engine (untagging it,
// and deleting its layers no other image uses); an image that is not there
// is not an error.
func RemoveImage(ctx context.Context, ref string) error {
	api, err := engine()
	if err != nil {
		return err
	}
	if _, err := api.ImageRemove(ctx, ref, image.RemoveOptions{PruneChildren: true}); err != nil && !isNotFound(err) {
		return fmt.Errorf("sandbox: remove image %s: %w", ref, err)
	}
	return nil
}

var _ sandbox.Committer = (*Container)(nil)

// Image returns the image the container runs (DefaultImage when the
// configuration named none).
func (c *Container) Image() string { return c.cfg.Image }
