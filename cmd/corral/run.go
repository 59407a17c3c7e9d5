package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/docker/go-units"
	"github.com/spf13/cobra"

	"github.com/corralhq/corral"
	"github.com/corralhq/corral/calls"
	"github.com/corralhq/corral/internal/records"
	"github.com/corralhq/corral/sandbox/kube"
)

// maxLineBytes caps one input line of `corral run` and `corral check --batch`; a
// longer line is reported as an error and skipped, so one bad line cannot
// exhaust memory.
const maxLineBytes = calls.MaxLineBytes

func newRunCmd() *cobra.Command {
	var f sessionFlags
	var b batchFlags
	var download string
	cmd := &cobra.Command{
		Use:   "run [flags] FILE|-  |  run --tasks TASKS.jsonl --out DIR [flags]",
		Short: "Run tool calls from a JSON-lines file or stdin, one result line each",
		Long: `run is the batch and replay runner. Each input line is one tool call:

  {"id": "1", "tool": "read|edit|write|bash", "args": {...}}

and for each, in order, run writes one result line, flushed before it reads the
next input line:

  {"id": "1", "tool": "read", "is_error": false, "content": "<the model's text>", "details": {...}}

Malformed lines, unknown tools and missing or mistyped arguments give an
is_error result, never a crash. Blank lines are skipped. The exit status is 0 when
every line was processed, whatever the tools answered; 130 after Ctrl-C or
SIGTERM, which cancel the running call (its result says so), remove the sandbox
and stop.` + batchHelp,
		Args: func(cmd *cobra.Command, args []string) error {
			if b.tasks != "" {
				if len(args) > 0 {
					return fmt.Errorf("--tasks takes the calls from its tasks, not from %s", args[0])
				}
				return nil
			}
			if b.out != "" || b.max != 0 || b.warm != 0 || b.rate != 0 || b.workDir != "" || b.snapshots != "" {
				return errors.New("--out, --max-sandboxes, --warm, --start-rate, --work-dir and --snapshots need --tasks")
			}
			if download != "" && !f.sandbox.backend.kubernetes() {
				return errors.New("--download needs --backend kubernetes: with Docker the workspace is the host's directory itself, and the calls change it in place")
			}
			return cobra.ExactArgs(1)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if b.tasks != "" {
				return runBatch(cmd, &f, &b, download)
			}
			in := cmd.InOrStdin()
			if args[0] != "-" {
				file, err := os.Open(args[0])
				if err != nil {
					return err
				}
				defer file.Close()
				in = file
			}
			stopUI, err := f.startUI(cmd.Context(), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer stopUI()
			h, closeHost, err := f.host(cmd.ErrOrStderr(), logger(cmd))
			if err != nil {
				return err
			}
			if out, ok := cmd.OutOrStdout().(*os.File); ok {
				if err := records.CheckFile(h.Workspace(), "the results (standard output)", out); err != nil {
					closeHost()
					return err
				}
			}
			s, err := h.Open(cmd.Context(), corral.SessionOptions{})
			if err == nil {
				err = calls.Run(cmd.Context(), s.Session, in, cmd.OutOrStdout(), nil)
			}
			if err == nil && download != "" {
				err = downloadWorkspace(cmd.Context(), s, download, cmd.ErrOrStderr())
			}
			if cerr := closeHost(); cerr != nil {
				fmt.Fprintln(cmd.ErrOrStderr(), "corral: closing the session:", cerr)
			}
			if s != nil && s.Copy() != nil {
				copyHint(cmd.ErrOrStderr(), s.Copy().Info())
			}
			if errors.Is(err, context.Canceled) {
				return exitError(130)
			}
			return err
		},
	}
	f.register(cmd.Flags())
	b.register(cmd)
	cmd.Flags().StringVar(&download, "download", "", "with --backend kubernetes, write the pod's final workspace into `DIR` when the calls are done (the protected paths and repositories' hooks and config are left out, and listed)")
	cmd.Flags().StringVar(&f.authToken, "auth-token", "", "with --ui, require this `TOKEN` of every request to the web view, as a bearer token or once as ?token= (default: $CORRAL_AUTH_TOKEN)")
	return cmd
}

// runResult is one output line of `corral run`.
type runResult = calls.Result

// downloadWorkspace writes the final workspace of a session whose sandbox
// keeps it (a Kubernetes pod) into dir.
func downloadWorkspace(ctx context.Context, s *corral.Session, dir string, stderr io.Writer) error {
	pod, ok := s.Sandbox().(*kube.Pod)
	if !ok {
		return errors.New("--download needs --backend kubernetes: with Docker the workspace is the host's directory itself")
	}
	res, err := pod.Download(ctx, dir)
	for _, skipped := range res.Skipped {
		fmt.Fprintf(stderr, "corral: --download left out %s\n", skipped)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "corral: downloaded the workspace into %s (%d files, %s)\n", dir, res.Files, units.HumanSize(float64(res.Bytes)))
	return nil
}
