package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/corralhq/corral/checkpoint"
	"github.com/corralhq/corral/sandbox/docker"
)

// The isolated sessions' copies: apply, and diff --session. Thin: the work
// is the checkpoint package's.

// copyHint tells the user where an isolated session's changes are.
func copyHint(w io.Writer, info checkpoint.CopyInfo) {
	fmt.Fprintf(w, "corral: the isolated session's changes are in its copy of %s.\n  Review them: corral diff --workspace %s --session %s\n  Bring them in: corral apply --workspace %s %s\n",
		info.Workspace, info.Workspace, info.Session, info.Workspace, info.Session)
}

func newApplyCmd() *cobra.Command {
	var ws string
	var stash, dryRun, list, discard, asJSON bool
	cmd := &cobra.Command{
		Use:   "apply [flags] [SESSION]",
		Short: "Bring an isolated session's changes into the workspace",
		Long: `apply brings what an isolated session (--isolate) changed in its private copy
into the workspace, as unstaged changes: files written, created and removed,
modes and symbolic links included; the index, HEAD and the branches are not
touched, and nothing in the copy is run or trusted (its repository, hooks and
config are never used; its links are brought as links, never followed).
SESSION is the session's id, or the start of it; it may be left out when the
workspace has one copy. corral diff --session SESSION shows the changes first.

apply refuses, changing nothing:
  - while the session, or another on the workspace, is running;
  - when the workspace has uncommitted changes (those the copy was made with,
    by --with-uncommitted, do not count) — unless --stash, which sets them
    aside first with git stash (git stash pop brings them back). Outside git,
    any change since the copy counts, and --stash applies over them (corral
    records the tree first);
  - when a file the session changed was changed in the workspace too since the
    copy was made.

corral takes a checkpoint of the workspace first, so an apply can be undone
(the command says how), and removes the copy once applied. --discard removes
a copy without applying it.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			s, err := openStore(cmd, ws)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if list {
				return listCopies(ctx, out, s, asJSON)
			}
			session := ""
			if len(args) == 1 {
				session = args[0]
			}
			c, err := s.OpenCopy(ctx, session)
			if err != nil {
				return copyError(err, s.Workspace())
			}
			info := c.Info()
			if discard {
				if err := c.Remove(ctx); err != nil {
					return fmt.Errorf("not removed: %w", err)
				}
				fmt.Fprintf(out, "Removed the copy of session %s.\n", info.Session)
				return nil
			}
			if err := sandboxGone(ctx, info.Session); err != nil {
				return err
			}
			res, err := c.Apply(ctx, checkpoint.ApplyOptions{Stash: stash, DryRun: dryRun})
			if asJSON && (err == nil || res.Changes != nil) {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				if jerr := enc.Encode(res); jerr != nil {
					return jerr
				}
			}
			if err != nil {
				return applyError(err, info)
			}
			if asJSON {
				return nil
			}
			if len(res.Changes) == 0 {
				fmt.Fprintf(out, "Session %s changed nothing; corral apply --discard %s removes its copy.\n", info.Session, info.Session)
				return nil
			}
			verb := "Applied"
			if dryRun {
				verb = "Would apply"
			}
			fmt.Fprintf(out, "%s session %s to %s:\n", verb, info.Session, info.Workspace)
			printChanges(out, res.Changes)
			for _, sk := range res.NotApplied {
				fmt.Fprintf(out, "  not applied  %s: %s (in the copy: %s)\n", sk.Path, sk.Reason, info.Dir)
			}
			if dryRun {
				return nil
			}
			if res.Stashed != "" {
				fmt.Fprintf(out, "Your uncommitted changes were stashed first (%s): git stash pop brings them back.\n", res.Stashed[:min(12, len(res.Stashed))])
			}
			fmt.Fprintf(out, "To undo: corral restore --workspace %s %d\n", info.Workspace, res.Before.ID)
			return nil
		},
	}
	cmd.Flags().StringVarP(&ws, "workspace", "w", ".", "the workspace")
	cmd.Flags().BoolVar(&stash, "stash", false, "set the workspace's uncommitted changes aside with git stash first")
	cmd.Flags().BoolVarP(&dryRun, "dry-run", "n", false, "only say what would change, and what stands in the way")
	cmd.Flags().BoolVar(&list, "list", false, "list the workspace's isolated sessions' copies")
	cmd.Flags().BoolVar(&discard, "discard", false, "remove the copy without applying it")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result (or, with --list, the copies) as JSON")
	return cmd
}

// sandboxGone refuses while a sandbox of the session still exists: a killed
// corral's sandbox lives on for a few seconds and could still write the copy.
// Without an engine to ask there is no sandbox.
func sandboxGone(ctx context.Context, session string) error {
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	infos, err := docker.List(lctx)
	if err != nil {
		return nil
	}
	for _, in := range infos {
		if in.Session == session && in.State == "running" {
			return fmt.Errorf("not applied: the session's sandbox %s is still running; wait for it to end (corral gc removes the sandboxes of corral processes that are gone)", in.Name)
		}
	}
	return nil
}

func listCopies(ctx context.Context, out io.Writer, s *checkpoint.Store, asJSON bool) error {
	all, err := s.Copies(ctx)
	if err != nil {
		return err
	}
	if asJSON {
		if all == nil {
			all = []checkpoint.CopyInfo{}
		}
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(all)
	}
	if len(all) == 0 {
		fmt.Fprintf(out, "No isolated session's copy of %s.\n", s.Workspace())
		return nil
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SESSION\tCREATED\tFROM\tCOPY")
	for _, c := range all {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.Session, c.Created.Local().Format(time.DateTime), copySummary(c), c.Dir)
	}
	return tw.Flush()
}

// copySummary says what a copy was made from.
func copySummary(c checkpoint.CopyInfo) string {
	switch {
	case !c.Git:
		return "the files"
	case c.Commit == "":
		return "no commit"
	}
	from := c.Commit[:min(12, len(c.Commit))]
	if c.Branch != "" {
		from += " (" + c.Branch + ")"
	}
	if c.WithUncommitted {
		from += " + uncommitted"
	}
	return from
}

// printChanges lists files changed, one a line.
func printChanges(w io.Writer, ch []checkpoint.Change) {
	for _, c := range ch {
		lines := fmt.Sprintf("+%d -%d", c.Added, c.Removed)
		if c.Added < 0 {
			lines = "binary"
		}
		fmt.Fprintf(w, "  %s  %s (%s)\n", c.Status, c.Path, lines)
	}
}

// copyError says what to do when no copy was found.
func copyError(err error, ws string) error {
	var amb *checkpoint.AmbiguousError
	switch {
	case errors.As(err, &amb):
		return fmt.Errorf("%w; corral apply --workspace %s --list lists them", err, ws)
	case errors.Is(err, checkpoint.ErrNoCopy):
		return fmt.Errorf("%w of %s (corral apply --workspace %s --list lists them; a session makes one with --isolate)", err, ws, ws)
	}
	return err
}

// applyError says what to do when an apply was refused.
func applyError(err error, info checkpoint.CopyInfo) error {
	var dirty *checkpoint.DirtyError
	var conflict *checkpoint.ConflictError
	switch {
	case errors.As(err, &dirty) && dirty.Git:
		return fmt.Errorf("not applied: %w.\nCommit them, or pass --stash to set them aside with git stash first (git stash pop brings them back)", err)
	case errors.As(err, &dirty):
		return fmt.Errorf("not applied: %w.\nPass --stash to apply over them (corral records the workspace first, so corral restore can undo it)", err)
	case errors.As(err, &conflict):
		return fmt.Errorf("not applied: %w.\nThe session's versions are in its copy, %s: bring those files in by hand, then corral apply --discard %s", err, info.Dir, info.Session)
	case errors.Is(err, checkpoint.ErrBusy):
		return fmt.Errorf("not applied: %w; end the session first", err)
	}
	return err
}

// sessionDiff writes the changes of an isolated session's copy.
func sessionDiff(cmd *cobra.Command, ws, session string, paths []string) error {
	s, err := openStore(cmd, ws)
	if err != nil {
		return err
	}
	c, err := s.OpenCopy(cmd.Context(), session)
	if err != nil {
		return copyError(err, s.Workspace())
	}
	out, done := diffOutput(cmd.OutOrStdout())
	return errors.Join(c.Diff(cmd.Context(), out, paths...), done())
}
