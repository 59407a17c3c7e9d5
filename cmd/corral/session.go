package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/docker/go-units"
	"github.com/spf13/pflag"

	"github.com/corralhq/corral/images"
	"github.com/corralhq/corral/sandbox"
	"github.com/corralhq/corral/tools"
)

// sessionFlags are the flags of every command that opens a tools session: `run`
// and `mcp`.
type sessionFlags struct {
	sandbox        sandboxFlags
	policy         policyFlags
	confirm        string
	events         string
	writePolicy    string
	protect        []string
	noProtect      bool
	bashTimeout    time.Duration
	maxBashTimeout time.Duration
	logDir         string
	maxLog         string
	// stderr receives progress a person may want to see (an image build).
	stderr io.Writer

	eventsOnce sync.Once // opens eventsFile
	eventsFile *os.File
	eventsErr  error
}

func (f *sessionFlags) register(fs *pflag.FlagSet) {
	f.sandbox.register(fs)
	f.policy.register(fs)
	fs.StringVar(&f.confirm, "confirm", "deny", "what to do with a command the policy wants confirmed: deny (refuse it and tell the model approval was required), allow (run it), or ask (prompt on the terminal)")
	fs.StringVar(&f.events, "events", "", "write the event stream (call start and end with diffs, output chunks, outside file changes) to `FILE` as JSON lines")
	fs.StringVar(&f.writePolicy, "write-policy", string(tools.RequireRead), "when write may overwrite an existing file: require-read (only a file read in this session and unchanged since) or allow (any file)")
	fs.StringArrayVar(&f.protect, "protect", nil, "a workspace path edit and write must refuse, with what is below it (* matches within a name, ** any number of directories); repeatable, added to the defaults "+strings.Join(tools.DefaultProtected, ", "))
	fs.BoolVar(&f.noProtect, "no-default-protect", false, "do not protect "+strings.Join(tools.DefaultProtected, ", ")+" from edit and write")
	fs.DurationVar(&f.bashTimeout, "bash-timeout", tools.DefaultBashTimeout, "timeout of a bash command that names none")
	fs.DurationVar(&f.maxBashTimeout, "max-bash-timeout", tools.DefaultMaxBashTimeout, "the longest timeout a bash call may ask for")
	fs.StringVar(&f.logDir, "log-dir", "", "keep the full output of each bash command in `DIR` (default: a temporary directory removed when the session ends)")
	fs.StringVar(&f.maxLog, "max-log", "100m", "cap of each command's full log; past it, bytes are only counted")
}

// options checks the flags and turns them into session options, without the parts
// that need a running process (sandbox, events file).
func (f *sessionFlags) options() (tools.Options, error) {
	var o tools.Options
	switch tools.WritePolicy(f.writePolicy) {
	case tools.RequireRead, tools.AllowOverwrite:
		o.WritePolicy = tools.WritePolicy(f.writePolicy)
	default:
		return o, fmt.Errorf("--write-policy %q: want require-read or allow", f.writePolicy)
	}
	if f.bashTimeout <= 0 || f.maxBashTimeout <= 0 {
		return o, errors.New("--bash-timeout and --max-bash-timeout must be positive durations such as 2m")
	}
	if f.bashTimeout > f.maxBashTimeout {
		return o, fmt.Errorf("--bash-timeout %v is longer than --max-bash-timeout %v", f.bashTimeout, f.maxBashTimeout)
	}
	o.BashTimeout, o.MaxBashTimeout = f.bashTimeout, f.maxBashTimeout
	maxLog, err := units.RAMInBytes(f.maxLog)
	if err != nil || maxLog <= 0 {
		return o, fmt.Errorf("--max-log %q: want a size such as 100m", f.maxLog)
	}
	o.MaxLogBytes = maxLog
	o.LogDir = f.logDir
	o.Protected = []string{}
	if !f.noProtect {
		o.Protected = append(o.Protected, tools.DefaultProtected...)
	}
	o.Protected = append(o.Protected, f.protect...)
	switch f.confirm {
	case "deny":
	case "allow":
		o.Confirmer = tools.ConfirmFunc(func(context.Context, tools.ConfirmRequest) (bool, error) { return true, nil })
	case "ask":
		o.Confirmer = &ttyConfirmer{}
	default:
		return o, fmt.Errorf("--confirm %q: want deny, allow or ask", f.confirm)
	}
	return o, nil
}

// openSession opens a tools session from the flags. close releases everything it
// opened: the session, the sandbox container and the events file.
// Each of adjust may change the options before the session opens.
func (f *sessionFlags) openSession(ctx context.Context, adjust ...func(*tools.Options)) (s *tools.Session, close func() error, err error) {
	opts, err := f.options()
	if err != nil {
		return nil, nil, err
	}
	cfg, err := f.sandbox.config()
	if err != nil {
		return nil, nil, err
	}
	opts.Workspace = cfg.Workspace
	if opts.Policy, err = f.policy.engineIn(cfg.Workspace); err != nil {
		return nil, nil, err
	}
	var undo []func() error
	closeAll := func() error {
		var errs []error
		for i := len(undo) - 1; i >= 0; i-- {
			errs = append(errs, undo[i]())
		}
		return errors.Join(errs...)
	}
	// The full logs of bash commands live outside the workspace, mounted read-only
	// into the sandbox at the same path: the model can read or grep them with
	// either tool, and they never show up in the user's repository.
	if opts.LogDir == "" {
		dir, err := os.MkdirTemp("", "corral-logs-")
		if err != nil {
			return nil, nil, fmt.Errorf("making the bash log directory: %w", err)
		}
		opts.LogDir = dir
		undo = append(undo, func() error { return os.RemoveAll(dir) })
	} else if err := os.MkdirAll(opts.LogDir, 0o755); err != nil {
		return nil, nil, fmt.Errorf("--log-dir: %w", err)
	}
	if opts.LogDir, err = filepath.Abs(opts.LogDir); err != nil {
		return nil, nil, fmt.Errorf("--log-dir: %w", err)
	}
	cfg.ReadOnlyMounts = append(cfg.ReadOnlyMounts, opts.LogDir)
	box, err := sandbox.New(cfg)
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	undo = append(undo, func() error {
		// Remove the container even when ctx was cancelled by a signal.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		return box.Close(ctx)
	})
	opts.Sandbox = &imageBuilder{box: box, stderr: f.stderr}
	if opts.Events, err = f.eventSink(); err != nil {
		closeAll()
		return nil, nil, err
	}
	for _, a := range adjust {
		a(&opts)
	}
	s, err = tools.NewSession(ctx, opts)
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	undo = append(undo, s.Close)
	return s, closeAll, nil
}

// eventSink opens the --events file once: every session of the process (one
// per MCP client) writes to it. Each event is one write of one line, so a UI
// tailing the file sees it at once. Nil when --events is not given.
func (f *sessionFlags) eventSink() (tools.EventSink, error) {
	if f.events == "" {
		return nil, nil
	}
	f.eventsOnce.Do(func() {
		f.eventsFile, f.eventsErr = os.Create(f.events)
		if f.eventsErr != nil {
			f.eventsErr = fmt.Errorf("--events: %w", f.eventsErr)
		}
	})
	if f.eventsErr != nil {
		return nil, f.eventsErr
	}
	return tools.JSONLines(f.eventsFile), nil
}

// closeEvents closes the --events file, after the sessions that wrote to it.
func (f *sessionFlags) closeEvents() error {
	if f.eventsFile == nil {
		return nil
	}
	return f.eventsFile.Close()
}

// ttyConfirmer asks on the controlling terminal, which stays free when stdin
// carries the input of `corral run` or the MCP protocol.
type ttyConfirmer struct {
	mu sync.Mutex // serialises prompts
}

func (t *ttyConfirmer) Confirm(ctx context.Context, req tools.ConfirmRequest) (bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	tty, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	if err != nil {
		return false, errors.New("no terminal to ask for confirmation on; use --confirm=deny or --confirm=allow")
	}
	defer tty.Close()
	return askYesNo(ctx, tty, tty, req)
}

// askYesNo prints the question to w and reads the answer from r. Anything but yes
// is no; a cancelled context is no.
func askYesNo(ctx context.Context, r io.Reader, w io.Writer, req tools.ConfirmRequest) (bool, error) {
	fmt.Fprintf(w, "\ncorral: the agent wants to run\n    %s\n  %s (%s)\nRun it? [y/N] ", req.Command, req.Verdict.Reason, req.Verdict.Rule)
	answer := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(r).ReadString('\n')
		answer <- strings.ToLower(strings.TrimSpace(line))
	}()
	select {
	case a := <-answer:
		return a == "y" || a == "yes", nil
	case <-ctx.Done():
		fmt.Fprintln(w)
		return false, ctx.Err()
	}
}

// imageBuilder runs commands in the sandbox and, when the default image is
// missing, builds it once with progress on stderr instead of failing.
type imageBuilder struct {
	box    *sandbox.Container
	stderr io.Writer

	mu    sync.Mutex // serialises builds
	built bool
}

func (b *imageBuilder) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	res, err := b.box.Exec(ctx, req)
	var missing *sandbox.ImageNotFoundError
	if !errors.As(err, &missing) || missing.Image != images.Default || b.stderr == nil {
		return res, err
	}
	if err := b.build(ctx); err != nil {
		return res, err
	}
	return b.box.Exec(ctx, req)
}

func (b *imageBuilder) build(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.built {
		return nil
	}
	fmt.Fprintf(b.stderr, "corral: the sandbox image %s is missing: building it (once; `corral image build` does the same)\n", images.Default)
	if err := images.Build(ctx, images.BuildOptions{Name: images.Default, Stdout: b.stderr, Stderr: b.stderr}); err != nil {
		return fmt.Errorf("building the sandbox image %s: %w", images.Default, err)
	}
	b.built = true
	return nil
}
