package pool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/corralhq/corral/sandbox"
)

// dirPrefix begins the name of every pool's directory.
const dirPrefix = "corral-pool-"

// ownerFile holds the labels of the process that owns a pool's directory.
const ownerFile = "owner.json"

// NewDir makes a directory in parent (the system's temporary directory when
// empty) that GC removes once this process is gone: a pool's, or one for
// workspaces made outside a pool's slots.
func NewDir(parent string) (string, error) {
	if parent == "" {
		parent = os.TempDir()
	}
	dir, err := os.MkdirTemp(parent, dirPrefix)
	if err != nil {
		return "", fmt.Errorf("pool: making a directory: %w", err)
	}
	if dir, err = filepath.EvalSymlinks(dir); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("pool: %w", err)
	}
	if err := writeOwner(dir); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
}

// RemoveDir removes a directory of NewDir's, and everything below it, even
// directories a command made read-only.
func RemoveDir(dir string) error { return removeAll(dir) }

// writeOwner records this process as the owner of dir.
func writeOwner(dir string) error {
	b, err := json.Marshal(sandbox.OwnerLabels("", dir))
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, ownerFile), b, 0o644); err != nil {
		return fmt.Errorf("pool: %w", err)
	}
	return nil
}

// GC removes the pools' directories in parent (the system's temporary
// directory when empty) whose owner process ran on this host and is gone —
// the slots a killed batch left, with the workspaces in them — and returns
// them. Their sandboxes are reaped by the backend's GC, by their labels.
func GC(ctx context.Context, parent string) ([]string, error) {
	if parent == "" {
		parent = os.TempDir()
	}
	ents, err := os.ReadDir(parent)
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, e := range ents {
		if err := ctx.Err(); err != nil {
			return removed, err
		}
		if !e.IsDir() || !strings.HasPrefix(e.Name(), dirPrefix) {
			continue
		}
		dir := filepath.Join(parent, e.Name())
		b, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			continue // being made, or not a pool's
		}
		var labels map[string]string
		if json.Unmarshal(b, &labels) != nil {
			continue
		}
		if local, alive := sandbox.OwnerState(labels); !local || alive {
			continue
		}
		if err := removeAll(dir); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, dir)
	}
	return removed, errors.Join(errs...)
}
