package main

import (
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// logFlags choose how corral's own diagnostics (and those of its sandboxes and
// tools) are written to stderr. Every command has them.
type logFlags struct {
	level  string
	format string
}

func (f *logFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.level, "log-level", "warn", "the least severe diagnostics corral writes to stderr: debug, info, warn or error")
	fs.StringVar(&f.format, "log-format", "text", "the form of diagnostics on stderr: text or json (one object a line)")
}

// logger builds the logger the flags ask for, writing to w.
func (f *logFlags) logger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", f.level)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch strings.ToLower(f.format) {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", f.format)
}

// loggerKey is where the root command keeps the logger of the command line.
type loggerKey struct{}

// logger returns the logger the root command built from the flags.
func logger(cmd *cobra.Command) *slog.Logger {
	if l, ok := cmd.Context().Value(loggerKey{}).(*slog.Logger); ok {
		return l
	}
	return slog.New(slog.DiscardHandler)
}
