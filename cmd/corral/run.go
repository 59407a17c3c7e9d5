package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/corralhq/corral"
	"github.com/corralhq/corral/tools"
)

// maxLineBytes caps one input line of `corral run`; a longer line is reported as an
// error and skipped, so one bad line cannot exhaust memory.
const maxLineBytes = 64 << 20

func newRunCmd() *cobra.Command {
	var f sessionFlags
	cmd := &cobra.Command{
		Use:   "run [flags] FILE|-",
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
and stop.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
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
			s, err := h.Open(cmd.Context(), corral.SessionOptions{})
			if err == nil {
				err = runLines(cmd.Context(), s.Session, in, cmd.OutOrStdout())
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
	cmd.Flags().StringVar(&f.authToken, "auth-token", "", "with --ui, require this `TOKEN` of every request to the web view, as a bearer token or once as ?token= (default: $CORRAL_AUTH_TOKEN)")
	return cmd
}

// lineShape tells what an input line must look like.
const lineShape = `Each line must be {"id": "...", "tool": "read|edit|write|bash", "args": {...}}.`

// fieldKinds names the JSON kind of each field of an input line.
var fieldKinds = map[string]string{"tool": "a string", "args": "an object"}

// runLine is one input line of `corral run`.
type runLine struct {
	ID   json.RawMessage `json:"id"`
	Tool string          `json:"tool"`
	Args json.RawMessage `json:"args"`
}

// runResult is one output line of `corral run`.
type runResult struct {
	ID      json.RawMessage `json:"id"`
	Tool    string          `json:"tool"`
	IsError bool            `json:"is_error"`
	Content string          `json:"content"`
	Details any             `json:"details,omitempty"`
}

// runLines reads calls from in and writes their results to out, one line each,
// flushed before the next line is read. It returns ctx's error when cancelled
// (after writing the result of the call that was running) and an error when in
// or out fail.
func runLines(ctx context.Context, s *tools.Session, in io.Reader, out io.Writer) error {
	w := bufio.NewWriter(out)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	lines := newLineReader(in)
	for n := 1; ; n++ {
		var l inputLine
		select {
		case l = <-lines.next():
		case <-ctx.Done():
			// Waiting for input that may never come: Ctrl-C ends the run.
			return ctx.Err()
		}
		if l.err != nil && l.err != io.EOF {
			return fmt.Errorf("reading input: %w", l.err)
		}
		if len(bytes.TrimSpace(l.line)) > 0 || l.tooLong {
			res := runOne(ctx, s, n, l.line, l.tooLong)
			if err := enc.Encode(res); err != nil {
				return fmt.Errorf("writing result: %w", err)
			}
			if err := w.Flush(); err != nil {
				return fmt.Errorf("writing result: %w", err)
			}
		}
		if l.err == io.EOF {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// inputLine is one line of input, or the error that ended it.
type inputLine struct {
	line    []byte
	tooLong bool
	err     error
}

// lineReader reads one line at a time, only when asked, on its own goroutine: the
// caller can stop waiting when its context is cancelled, and no line is read
// before the previous result was written.
type lineReader struct {
	r   *bufio.Reader
	out chan inputLine
}

func newLineReader(in io.Reader) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(in, 64<<10), out: make(chan inputLine, 1)}
}

// next starts reading the next line and returns the channel it will arrive on.
func (lr *lineReader) next() <-chan inputLine {
	go func() {
		line, tooLong, err := readLine(lr.r, maxLineBytes)
		lr.out <- inputLine{line, tooLong, err}
	}()
	return lr.out
}

func runOne(ctx context.Context, s *tools.Session, n int, line []byte, tooLong bool) runResult {
	if tooLong {
		return runResult{ID: json.RawMessage("null"), IsError: true,
			Content: fmt.Sprintf("Line %d is longer than %d MB and was skipped. Split large writes, or write the content in parts with edit.", n, maxLineBytes>>20)}
	}
	var call runLine
	if err := json.Unmarshal(line, &call); err != nil {
		what := "not a JSON object"
		var se *json.SyntaxError
		if errors.As(err, &se) {
			what = "not valid JSON (" + se.Error() + ")"
		}
		res := runResult{ID: json.RawMessage("null"), IsError: true,
			Content: fmt.Sprintf("Line %d is %s. %s", n, what, lineShape)}
		// Echo the id of an object whose other fields have the wrong type.
		var loose struct {
			ID json.RawMessage `json:"id"`
		}
		if json.Unmarshal(line, &loose) == nil && len(loose.ID) > 0 {
			res.ID = loose.ID
		}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			res.Content = fmt.Sprintf("Line %d: %q must be %s, got a JSON %s. %s", n, te.Field, fieldKinds[te.Field], te.Value, lineShape)
		}
		return res
	}
	res := runResult{ID: call.ID, Tool: call.Tool}
	if len(res.ID) == 0 {
		res.ID = json.RawMessage("null")
	}
	if call.Tool == "" {
		res.IsError = true
		res.Content = fmt.Sprintf("Line %d names no tool. %s", n, lineShape)
		return res
	}
	if id := idString(call.ID); id != "" {
		ctx = tools.WithCallID(ctx, id)
	}
	r, err := s.Call(ctx, call.Tool, call.Args)
	if err != nil {
		res.IsError = true
		res.Content = fmt.Sprintf("%s failed: %v", call.Tool, err)
		return res
	}
	res.IsError, res.Content, res.Details = r.IsError, r.Content, r.Details
	return res
}

// idString renders a JSON id (string or number) as text for events.
func idString(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		return n.String()
	}
	return ""
}

// readLine reads one line without its newline. A line longer than max is consumed
// and reported with tooLong, without keeping it.
func readLine(r *bufio.Reader, max int) (line []byte, tooLong bool, err error) {
	for {
		chunk, err := r.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(chunk) > max {
				tooLong, line = true, nil
			} else {
				line = append(line, chunk...)
			}
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		return bytes.TrimRight(line, "\r\n"), tooLong, err
	}
}
