package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/docker/go-units"
	"github.com/spf13/cobra"

	"github.com/corralhq/corral/checkpoint"
)

// The checkpoint verbs: log, diff, restore. Thin: the work is the checkpoint
// package's.

func openStore(cmd *cobra.Command, ws string) (*checkpoint.Store, error) {
	return checkpoint.Open(cmd.Context(), checkpoint.Options{Workspace: ws})
}

func parseID(s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimPrefix(s, "#"))
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%q is not a checkpoint number (corral log lists them)", s)
	}
	return n, nil
}

func newLogCmd() *cobra.Command {
	var ws string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "log [flags]",
		Short: "List the checkpoints of a workspace",
		Long: `log lists the checkpoints corral took of a workspace, oldest first: one before
each call of a session that could change it (edit, write, and bash unless the
policy saw a read-only command). Each line shows the call the checkpoint was taken
before and what that call changed — the files, and lines added and removed, up to
the next checkpoint (or to the working tree as it is now, for the last) — and the
files the checkpoint left out. The last line gives the space the checkpoints take
beyond what the repository's branches and tags hold.

Restore one with corral restore N; see what changed since one with corral diff N.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			s, err := openStore(cmd, ws)
			if err != nil {
				return err
			}
			all, err := s.List(ctx)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				for _, c := range all {
					if err := enc.Encode(c); err != nil {
						return err
					}
				}
				return nil
			}
			out := cmd.OutOrStdout()
			if len(all) == 0 {
				fmt.Fprintf(out, "No checkpoints of %s.\n", s.Workspace())
				return nil
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tTIME\tSESSION\tCALL\tTOOL\tCALL'S CHANGES\tWHAT")
			for i, c := range all {
				changes := "?"
				switch {
				case i+1 < len(all) && all[i+1].ID == c.ID+1:
					changes = changeSummary(all[i+1].Files, all[i+1].Added, all[i+1].Removed)
				case i+1 == len(all):
					if ch, err := s.Changes(ctx, c.ID, checkpoint.Worktree); err == nil {
						a, r := 0, 0
						for _, x := range ch {
							a, r = a+max(x.Added, 0), r+max(x.Removed, 0)
						}
						changes = changeSummary(len(ch), a, r)
					}
				}
				what := c.Command
				if what == "" {
					what = c.Path
				}
				if len(c.Skipped) > 0 {
					what += fmt.Sprintf("  [%d file(s) not recorded: %s]", len(c.Skipped), skipSummary(c.Skipped))
				}
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", c.ID, c.Time.Local().Format(time.DateTime), c.Session, c.Call, c.Tool, changes, clip(what, 80))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			where := "corral's store"
			if s.Git() {
				where = "the repository, beyond its branches and tags"
			}
			if n, err := s.DiskUsage(ctx); err == nil {
				fmt.Fprintf(out, "%d checkpoint(s), %s in %s.\n", len(all), units.BytesSize(float64(n)), where)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&ws, "workspace", "w", ".", "the workspace")
	cmd.Flags().BoolVar(&asJSON, "json", false, "one JSON object a checkpoint, with every file changed and skipped")
	return cmd
}

func changeSummary(files, added, removed int) string {
	if files == 0 {
		return "none"
	}
	return fmt.Sprintf("%d file(s) +%d -%d", files, added, removed)
}

func skipSummary(sk []checkpoint.Skip) string {
	var parts []string
	for i, s := range sk {
		if i == 3 {
			parts = append(parts, fmt.Sprintf("%d more", len(sk)-3))
			break
		}
		parts = append(parts, s.Path+" ("+s.Reason+")")
	}
	return strings.Join(parts, ", ")
}

func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

func newDiffCmd() *cobra.Command {
	var ws, session string
	cmd := &cobra.Command{
		Use:   "diff [flags] N [M] [-- PATH...] | diff [flags] --session ID [-- PATH...]",
		Short: "Show what changed since a checkpoint, or in an isolated session",
		Long: `diff shows, as a unified diff after a summary of the files, what changed from
checkpoint N to checkpoint M, or to the working tree as it is now when M is not
given. PATH arguments after -- limit it to those files and directories.

With --session ID, it shows what an isolated session (--isolate) changed in its
copy of the workspace: what corral apply would bring. ID is the session's id or
the start of it (corral apply --list lists them).

On a terminal, control characters in the files' lines are shown escaped (ESC
as \x1b, a carriage return as \r), so that a file cannot drive the terminal;
piped or redirected, the diff is written as git makes it, for git apply.`,
		Args: cobra.RangeArgs(0, 64),
		RunE: func(cmd *cobra.Command, args []string) error {
			ids, paths := args, []string(nil)
			if at := cmd.ArgsLenAtDash(); at >= 0 {
				ids, paths = args[:at], args[at:]
			}
			if cmd.Flags().Changed("session") {
				if len(ids) > 0 {
					return errors.New("diff takes checkpoint numbers or --session, not both")
				}
				return sessionDiff(cmd, ws, session, paths)
			}
			if len(ids) < 1 || len(ids) > 2 {
				return errors.New("diff takes one or two checkpoint numbers")
			}
			from, err := parseID(ids[0])
			if err != nil {
				return err
			}
			to := checkpoint.Worktree
			if len(ids) == 2 {
				if to, err = parseID(ids[1]); err != nil {
					return err
				}
			}
			s, err := openStore(cmd, ws)
			if err != nil {
				return err
			}
			out, done := diffOutput(cmd.OutOrStdout())
			return errors.Join(s.Diff(cmd.Context(), out, from, to, paths...), done())
		},
	}
	cmd.Flags().StringVarP(&ws, "workspace", "w", ".", "the workspace")
	cmd.Flags().StringVarP(&session, "session", "s", "", "show what the isolated session `ID` changed in its copy")
	return cmd
}

func newRestoreCmd() *cobra.Command {
	var ws string
	var yes, dryRun bool
	cmd := &cobra.Command{
		Use:   "restore [flags] N [PATH...]",
		Short: "Make the workspace exactly as it was at a checkpoint",
		Long: `restore makes the working tree exactly the tree of checkpoint N: files changed
since get their content, mode or link target of then; files deleted since come
back; files created since are removed. Files the checkpoint did not record —
ignored ones, and those it lists as skipped (too large, repositories) — are left
alone, and so are .git, HEAD, the branches and the index. PATH arguments limit
the restore to those files and directories.

corral first takes a checkpoint of the tree as it is, so a restore can be undone
(the command says which). It shows what it will do and asks before doing it,
unless --yes is given; it refuses while a session runs on the workspace.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			id, err := parseID(args[0])
			if err != nil {
				return err
			}
			opts := checkpoint.RestoreOptions{Paths: args[1:]}
			s, err := openStore(cmd, ws)
			if err != nil {
				return err
			}
			plan, err := s.PlanRestore(ctx, id, opts)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			changes := printPlan(out, plan)
			if changes == 0 {
				fmt.Fprintf(out, "The workspace already matches checkpoint %d.\n", id)
				return nil
			}
			if dryRun {
				return nil
			}
			if !yes {
				ok, err := askYes(fmt.Sprintf("Restore checkpoint %d (%d change(s))? [y/N] ", id, changes))
				if err != nil {
					return fmt.Errorf("%w; pass --yes to restore without asking", err)
				}
				if !ok {
					return errors.New("not restored")
				}
			}
			res, err := s.Restore(ctx, id, opts)
			if errors.Is(err, checkpoint.ErrBusy) {
				return fmt.Errorf("not restored: %w; end it first", err)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "Restored checkpoint %d. To undo: corral restore --workspace %s %d\n", id, s.Workspace(), res.Before.ID)
			return nil
		},
	}
	cmd.Flags().StringVarP(&ws, "workspace", "w", ".", "the workspace")
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "restore without asking")
	cmd.Flags().BoolVarP(&dryRun, "dry-run", "n", false, "only show what would change")
	return cmd
}

// printPlan lists a restore's actions and returns how many change something.
func printPlan(w io.Writer, p checkpoint.Plan) int {
	n := 0
	for _, a := range p.Actions {
		switch a.Op {
		case "write", "link":
			fmt.Fprintf(w, "  restore  %s\n", a.Path)
			n++
		case "remove":
			fmt.Fprintf(w, "  remove   %s\n", a.Path)
			n++
		case "rmdir":
			fmt.Fprintf(w, "  remove   %s/ (if empty)\n", a.Path)
		case "keep":
			fmt.Fprintf(w, "  keep     %s: %s\n", a.Path, a.Reason)
		}
	}
	return n
}

// askYes asks a question on the terminal.
func askYes(question string) (bool, error) {
	tty, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	if err != nil {
		return false, errors.New("no terminal to ask on")
	}
	defer tty.Close()
	fmt.Fprint(tty, question)
	line, err := bufio.NewReader(tty).ReadString('\n')
	if err != nil && line == "" {
		return false, err
	}
	a := strings.ToLower(strings.TrimSpace(line))
	return a == "y" || a == "yes", nil
}

// parseAge parses a duration that may also be given in days ("7d").
func parseAge(s string) (time.Duration, error) {
	if d, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseFloat(d, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("%q: want a duration such as 7d or 36h", s)
		}
		return time.Duration(n * float64(24*time.Hour)), nil
	}
	dur, err := time.ParseDuration(s)
	if err != nil || dur < 0 {
		return 0, fmt.Errorf("%q: want a duration such as 7d or 36h", s)
	}
	return dur, nil
}
