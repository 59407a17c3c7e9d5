package corral

import (
	"context"
	"errors"
	"fmt"

	"github.com/corralhq/corral/policy"
	"github.com/corralhq/corral/pool"
	"github.com/corralhq/corral/sandbox"
	"github.com/corralhq/corral/tools"
	"github.com/corralhq/corral/workspace"
)

// checkPool checks what a configuration with a pool may have, and takes the
// pool's backend. Without a pool, a workspace is required.
func checkPool(cfg *Config) error {
	p := cfg.Pool
	switch {
	case p == nil && cfg.Workspace == "":
		return errors.New("corral: no workspace given")
	case p == nil:
		return nil
	case cfg.Checkpoints != nil:
		return errors.New("corral: a pooled session works on a copy in the pool's slot, not on the workspace: it takes no checkpoints")
	case cfg.Isolate != nil:
		return errors.New("corral: a pooled session already works on a copy of its own: it cannot be isolated")
	case cfg.Backend != nil && cfg.Backend != p.Backend():
		return fmt.Errorf("corral: the pool's sandboxes come from the %s backend, not %s", p.Backend().Name(), cfg.Backend.Name())
	case cfg.Sandbox.Session != "":
		return errors.New("corral: each pooled sandbox names its own session: leave Sandbox.Session empty")
	}
	cfg.Backend = p.Backend()
	return nil
}

// claim takes the session's sandbox from the pool, fills its slot (with
// fill, or a copy of the workspace) and points the tools and the policy at
// it. When it fails, the sandbox is closed.
func (s *Session) claim(ctx context.Context, scfg sandbox.Config, opts *tools.Options, fill func(context.Context, string) error) (err error) {
	h := s.host
	scfg.Workspace, scfg.Source = "", ""
	box, err := h.cfg.Pool.Claim(ctx, scfg)
	if missingDefault(err) && h.image != nil {
		if err = h.image.build(ctx); err == nil {
			box, err = h.cfg.Pool.Claim(ctx, scfg)
		}
	}
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
			defer cancel()
			if cerr := box.Close(cctx); cerr != nil {
				h.log.Warn("closing a pooled sandbox of a session that failed to open", "err", cerr)
			}
		}
	}()
	dir := box.Dir()
	switch {
	case fill != nil:
		err = fill(ctx, dir)
	case h.cfg.Workspace != "":
		var skipped []string
		skipped, err = workspace.Copy(ctx, h.cfg.Workspace, dir)
		if len(skipped) > 0 {
			h.log.Info("left out of the session's copy of the workspace", "paths", skipped)
		}
	}
	if err != nil {
		return fmt.Errorf("corral: filling the session's workspace: %w", err)
	}
	// The policy knows the workspace by the path commands see it at.
	popts := h.popts
	popts.Workspace = dir
	engine, err := policy.New(popts)
	if err != nil {
		return err
	}
	opts.Policy = engine
	opts.Workspace = dir
	opts.LogDir = box.LogDir()
	s.box = box
	return nil
}

var _ sandbox.Sandbox = (*pool.Sandbox)(nil)
