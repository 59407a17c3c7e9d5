package docker

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/corralhq/corral/sandbox"
)

// List describes every corral sandbox container on the engine, running or not.
func List(ctx context.Context) ([]sandbox.Info, error) {
	api, err := engine()
	if err != nil {
		return nil, err
	}
	return list(ctx, api)
}

func list(ctx context.Context, api dockerAPI) ([]sandbox.Info, error) {
	cs, err := api.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", sandbox.LabelSession))})
	if err != nil {
		return nil, err
	}
	out := make([]sandbox.Info, 0, len(cs))
	for _, c := range cs {
		in := sandbox.Info{
			ID:        c.ID,
			Session:   c.Labels[sandbox.LabelSession],
			Image:     c.Image,
			Workspace: c.Labels[sandbox.LabelWorkspace],
			State:     string(c.State),
			Status:    c.Status,
			Created:   time.Unix(c.Created, 0),
		}
		if len(c.Names) > 0 {
			in.Name = strings.TrimPrefix(c.Names[0], "/")
		}
		in.PID, _ = strconv.Atoi(c.Labels[sandbox.LabelPID])
		in.Local, in.OwnerAlive = sandbox.OwnerState(c.Labels)
		out = append(out, in)
	}
	return out, nil
}

// GC removes the sandbox containers whose owner process ran on this host and is
// gone (killed with -9, crashed, or the host rebooted), and returns their names.
// It then finishes the repository shadows those processes left: what their
// commands changed of HEAD, the index and the refs is checked and copied to
// the host's repository, and the shadows are removed.
// Containers of live owners and of other hosts sharing the engine are left alone.
func GC(ctx context.Context) ([]string, error) {
	api, err := engine()
	if err != nil {
		return nil, err
	}
	return gc(ctx, api)
}

func gc(ctx context.Context, api dockerAPI) ([]string, error) {
	infos, err := list(ctx, api)
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, in := range infos {
		if !in.Local || in.OwnerAlive {
			continue
		}
		err := api.ContainerRemove(ctx, in.ID, container.RemoveOptions{Force: true, RemoveVolumes: true})
		if err != nil && !isNotFound(err) {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, in.Name)
	}
	// Then what their repositories' shadows hold goes to the host, checked,
	// and the shadows go.
	if _, err := repairShadows(slog.New(slog.DiscardHandler)); err != nil {
		errs = append(errs, err)
	}
	return removed, errors.Join(errs...)
}
