package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/corralhq/corral/internal/httpserve"
	"github.com/corralhq/corral/ui"
)

// serveUI serves the web view of hub on addr (HOST:PORT; an empty host is
// 127.0.0.1) until ctx is done or stop is called. A non-loopback address
// needs a token.
func serveUI(ctx context.Context, hub *ui.Hub, addr string, opts ui.Options, stderr io.Writer) (stop func(), err error) {
	ln, err := httpserve.Listen(addr, opts.Token, httpserve.ListenOptions{
		Flag: "--ui", Example: "127.0.0.1:8766", DefaultHost: "127.0.0.1",
		Why: "so that only you can see sessions and answer approvals",
	})
	if err != nil {
		return nil, err
	}
	url := "http://" + ln.Addr().String() + "/"
	if opts.Token != "" {
		url += "?token=TOKEN"
	}
	fmt.Fprintf(stderr, "corral: web view at %s\n", url)
	ctx, cancel := context.WithCancel(ctx)
	// Event streams never end on their own: the shutdown closes them.
	go httpserve.Serve(ctx, ln, hub.Handler(opts), httpserve.ServeOptions{})
	return cancel, nil
}

// startUI starts the web view of --ui, when given: every session opened after
// it is recorded and asks its approvals there too.
func (f *sessionFlags) startUI(ctx context.Context, stderr io.Writer) (stop func(), err error) {
	if f.uiAddr == "" {
		return func() {}, nil
	}
	f.authToken = httpserve.Token(f.authToken)
	f.hub = ui.NewHub()
	return serveUI(ctx, f.hub, f.uiAddr, ui.Options{Token: f.authToken}, stderr)
}

func newUICmd() *cobra.Command {
	var addr, token string
	cmd := &cobra.Command{
		Use:   "ui --events FILE... [flags]",
		Short: "Serve the web view of finished runs, read-only",
		Long: `ui serves the timeline of the runs in events files (written by --events of
corral run or corral mcp) as the web view that --ui shows live: each session's
calls, their output with its colours, diffs, policy verdicts, approvals and
other events. It takes no decisions.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			files, _ := cmd.Flags().GetStringArray("events")
			if len(files) == 0 {
				return errors.New("give at least one --events FILE")
			}
			hub, err := loadEvents(files)
			if err != nil {
				return err
			}
			stop, err := serveUI(cmd.Context(), hub, addr, ui.Options{Token: httpserve.Token(token), ReadOnly: true}, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer stop()
			<-cmd.Context().Done()
			return nil
		},
	}
	cmd.Flags().StringArray("events", nil, "an events `FILE` (JSON lines); repeatable")
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:8766", "serve on `ADDR`; a non-loopback address needs --auth-token")
	cmd.Flags().StringVar(&token, "auth-token", "", "require this `TOKEN` of every request, as a bearer token or once as ?token= (default: $CORRAL_AUTH_TOKEN)")
	return cmd
}

func loadEvents(files []string) (*ui.Hub, error) {
	hub := ui.NewHub()
	for _, name := range files {
		file, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		err = hub.Load(file, filepath.Base(name))
		file.Close()
		if err != nil {
			return nil, err
		}
	}
	return hub, nil
}

func newReportCmd() *cobra.Command {
	var out, title string
	cmd := &cobra.Command{
		Use:   "report EVENTS.jsonl... -o report.html",
		Short: "Write one self-contained HTML report of a run",
		Long: `report writes the runs in events files (written by --events) as one HTML file
that opens without a network: for each session a summary table — calls, errors,
denials, approvals and their decisions, time in bash, files changed with lines
added and removed — and the timeline of the web view.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return errors.New("give the report's file with -o FILE")
			}
			hub, err := loadEvents(args)
			if err != nil {
				return err
			}
			if title == "" {
				var names []string
				for _, a := range args {
					names = append(names, filepath.Base(a))
				}
				title = strings.Join(names, ", ")
			}
			tmp, err := os.CreateTemp(filepath.Dir(out), ".report-*.html")
			if err != nil {
				return err
			}
			defer os.Remove(tmp.Name())
			if err := ui.WriteReport(tmp, hub, title); err != nil {
				tmp.Close()
				return err
			}
			if err := tmp.Close(); err != nil {
				return err
			}
			if err := os.Chmod(tmp.Name(), 0o644); err != nil {
				return err
			}
			return os.Rename(tmp.Name(), out)
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "write the report to `FILE`")
	cmd.Flags().StringVar(&title, "title", "", "the report's title (default: the files' names)")
	return cmd
}
