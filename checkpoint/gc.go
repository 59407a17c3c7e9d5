package checkpoint

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// GCOptions say which checkpoints GC removes. A checkpoint goes when it is
// older than OlderThan (when set) or beyond the Keep newest of its workspace
// (when set).
type GCOptions struct {
	StateDir  string // DefaultStateDir() when empty
	OlderThan time.Duration
	Keep      int
	// Workspace limits GC to one workspace; every workspace with checkpoints
	// when empty.
	Workspace string
	Git       string
	Now       time.Time // time.Now() when zero
	// CopiesOlderThan, when set, removes the isolated sessions' copies made
	// longer ago than that and not in use (checkpoints are then left alone
	// unless OlderThan or Keep is set too).
	CopiesOlderThan time.Duration
}

// GCResult is what GC removed, per workspace.
type GCResult struct {
	Workspace string `json:"workspace"`
	Removed   int    `json:"removed"`
	Kept      int    `json:"kept"`
	// CopiesRemoved counts the isolated sessions' copies removed.
	CopiesRemoved int `json:"copies_removed,omitempty"`
	// Gone is set when the workspace no longer exists and its state was
	// removed.
	Gone bool `json:"gone,omitempty"`
}

// GC removes old checkpoints: their entries in the log, their refs, and the
// objects only they held, from corral's repository.
func GC(ctx context.Context, opts GCOptions) ([]GCResult, error) {
	if opts.OlderThan <= 0 && opts.Keep <= 0 && opts.CopiesOlderThan <= 0 {
		return nil, errors.New("checkpoint: gc needs an age or a count to keep")
	}
	if opts.StateDir == "" {
		d, err := DefaultStateDir()
		if err != nil {
			return nil, err
		}
		opts.StateDir = d
	}
	if opts.Now.IsZero() {
		opts.Now = time.Now()
	}
	var dirs []string
	if opts.Workspace != "" {
		s, err := Open(ctx, Options{Workspace: opts.Workspace, StateDir: opts.StateDir, Git: opts.Git})
		if err != nil {
			return nil, err
		}
		dirs = []string{s.dir}
	} else {
		ents, err := os.ReadDir(opts.StateDir)
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("checkpoint: %w", err)
		}
		for _, e := range ents {
			if e.IsDir() {
				dirs = append(dirs, filepath.Join(opts.StateDir, e.Name()))
			}
		}
	}
	var out []GCResult
	var errs []error
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "workspace.json"))
		if err != nil {
			continue // not a workspace's state
		}
		var m meta
		if err := json.Unmarshal(b, &m); err != nil || m.Workspace == "" {
			continue
		}
		if _, err := os.Stat(m.Workspace); errors.Is(err, os.ErrNotExist) {
			out = append(out, GCResult{Workspace: m.Workspace, Gone: true})
			if err := os.RemoveAll(d); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		s, err := Open(ctx, Options{Workspace: m.Workspace, StateDir: opts.StateDir, Git: opts.Git})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		r, err := s.gc(ctx, opts)
		if err != nil {
			errs = append(errs, err)
		}
		out = append(out, r)
	}
	return out, errors.Join(errs...)
}

func (s *Store) gc(ctx context.Context, opts GCOptions) (GCResult, error) {
	res := GCResult{Workspace: s.ws}
	if opts.CopiesOlderThan > 0 {
		n, err := s.gcCopies(ctx, opts.Now.Add(-opts.CopiesOlderThan))
		res.CopiesRemoved = n
		if err != nil {
			return res, err
		}
	}
	if opts.OlderThan <= 0 && opts.Keep <= 0 {
		return res, nil
	}
	unlock, err := s.lock(ctx)
	if err != nil {
		return res, err
	}
	defer unlock()
	all, err := s.List(ctx)
	if err != nil {
		return res, err
	}
	var keep, drop []Checkpoint
	for i, c := range all {
		old := opts.OlderThan > 0 && opts.Now.Sub(c.Time) > opts.OlderThan
		many := opts.Keep > 0 && len(all)-i > opts.Keep
		if old || many {
			drop = append(drop, c)
		} else {
			keep = append(keep, c)
		}
	}
	res.Kept = len(keep)
	if len(drop) == 0 {
		return res, nil
	}
	var cmds bytes.Buffer
	for _, c := range drop {
		fmt.Fprintf(&cmds, "delete %s\n", c.Ref)
	}
	if _, err := s.git.run(ctx, s.git.repoEnv(), &cmds, "update-ref", "--stdin"); err != nil {
		return res, err
	}
	var log bytes.Buffer
	for _, c := range keep {
		b, _ := json.Marshal(c)
		log.Write(append(b, '\n'))
	}
	if err := writeFileAtomic(s.logFile(), log.Bytes(), 0o600); err != nil {
		return res, err
	}
	res.Removed = len(drop)
	l := last{ID: all[len(all)-1].ID}
	if len(keep) > 0 {
		k := keep[len(keep)-1]
		l.Commit, l.Tree = k.Commit, k.Tree
	}
	if err := s.writeLast(l); err != nil {
		return res, err
	}
	// corral's index keeps the blobs it names.
	if _, err := s.git.run(ctx, s.git.worktreeEnv(), nil, "gc", "--prune=now", "--quiet"); err != nil {
		return res, err
	}
	return res, nil
}

// gcCopies removes the copies made before cutoff that no session holds.
func (s *Store) gcCopies(ctx context.Context, cutoff time.Time) (int, error) {
	all, err := s.Copies(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, info := range all {
		if !info.Created.Before(cutoff) {
			continue
		}
		c, err := s.OpenCopy(ctx, info.Session)
		if err == nil {
			err = c.Remove(ctx)
		}
		switch {
		case errors.Is(err, ErrBusy):
		case err != nil:
			errs = append(errs, err)
		default:
			n++
		}
	}
	return n, errors.Join(errs...)
}
