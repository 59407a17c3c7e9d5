package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/corralhq/corral/batch"
)

var updateDocs = flag.Bool("update-docs", false, "rewrite the generated reference of docs/cli.md from the command tree")

const (
	cliDoc      = "../../docs/cli.md"
	cliDocStart = "<!-- BEGIN GENERATED: flags -->\n"
	cliDocEnd   = "<!-- END GENERATED -->\n"
)

// TestCLIDoc: the reference at the end of docs/cli.md is the command tree's own
// description — every command that is not hidden, with its use line, its
// descriptions and its flags. go test ./cmd/corral -run TestCLIDoc -update-docs
// rewrites it.
func TestCLIDoc(t *testing.T) {
	b, err := os.ReadFile(cliDoc)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i, j := strings.Index(s, cliDocStart), strings.Index(s, cliDocEnd)
	if i < 0 || j < i {
		t.Fatalf("%s has no generated reference between %q and %q", cliDoc, strings.TrimSpace(cliDocStart), strings.TrimSpace(cliDocEnd))
	}
	got, want := s[i+len(cliDocStart):j], cliReference(newRootCmd())
	if got == want {
		return
	}
	if *updateDocs {
		if err := os.WriteFile(cliDoc, []byte(s[:i+len(cliDocStart)]+want+s[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	gl, wl := strings.Split(got, "\n"), strings.Split(want, "\n")
	for k := 0; k < len(gl) || k < len(wl); k++ {
		var g, w string
		if k < len(gl) {
			g = gl[k]
		}
		if k < len(wl) {
			w = wl[k]
		}
		if g != w {
			t.Fatalf("%s's command reference differs from the commands at its line %d:\n\tdocs:     %s\n\tcommands: %s\nrun go test ./cmd/corral -run TestCLIDoc -update-docs", cliDoc, k+1, g, w)
		}
	}
}

// cliReference renders every available command under root, root included,
// depth first in the order help lists them.
func cliReference(root *cobra.Command) string {
	var sb strings.Builder
	sb.WriteString("\nEvery command also takes `-h, --help`, and `corral` takes `--version`.\n")
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c != root && !c.IsAvailableCommand() {
			return
		}
		writeCommand(&sb, c)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	return machineDependent().Replace(sb.String())
}

// machineDependent replaces what help texts compute on the machine that runs
// corral (batch mode's defaults, twice its cores) with what they mean, so that
// the reference is the same wherever it is generated.
func machineDependent() *strings.Replacer {
	return strings.NewReplacer(
		fmt.Sprintf("(default twice the cores: %d)", batch.DefaultMax()), "(default twice the cores)",
		fmt.Sprintf("(default twice the cores: %v)", batch.DefaultRate()), "(default twice the cores)",
	)
}

func writeCommand(sb *strings.Builder, c *cobra.Command) {
	fmt.Fprintf(sb, "\n### `%s`\n\n", c.CommandPath())
	if c.Short != "" {
		sb.WriteString(strings.TrimSuffix(c.Short, ".") + ".\n\n")
	}
	sb.WriteString("```text\n" + c.UseLine() + "\n```\n")
	if len(c.Aliases) > 0 {
		fmt.Fprintf(sb, "\nAlso named `%s`.\n", strings.Join(c.Aliases, "`, `"))
	}
	if c.Long != "" {
		sb.WriteString("\n```text\n" + strings.TrimRight(c.Long, "\n") + "\n```\n")
	}
	if c.Example != "" {
		sb.WriteString("\nExamples:\n\n```text\n" + strings.TrimRight(c.Example, "\n") + "\n```\n")
	}
	writeFlags(sb, "Flags", c.LocalNonPersistentFlags())
	what := "every command under it"
	if !c.HasParent() {
		what = "every command"
	}
	writeFlags(sb, "Flags of this command and "+what, c.PersistentFlags())
	var from []string
	for p := c.Parent(); p != nil && p.HasParent(); p = p.Parent() {
		if hasVisible(p.PersistentFlags()) {
			from = append(from, "`"+p.CommandPath()+"`")
		}
	}
	if len(from) > 0 {
		fmt.Fprintf(sb, "\nIt also takes the flags of %s for every command under it.\n", strings.Join(from, " and "))
	}
}

// writeFlags writes a table of the flags of fs that are neither hidden nor
// deprecated, in name order; nothing when there are none.
func writeFlags(sb *strings.Builder, title string, fs *pflag.FlagSet) {
	if !hasVisible(fs) {
		return
	}
	fmt.Fprintf(sb, "\n%s:\n\n| flag | default | usage |\n|---|---|---|\n", title)
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden || f.Deprecated != "" {
			return
		}
		arg, usage := pflag.UnquoteUsage(f)
		name := "--" + f.Name
		if arg != "" {
			name += " " + arg
		}
		if f.Shorthand != "" {
			name = "-" + f.Shorthand + ", " + name
		}
		def := ""
		switch {
		case f.DefValue == "", f.DefValue == "[]", f.Value.Type() == "bool" && f.DefValue == "false":
		default:
			def = "`" + codeCell(f.DefValue) + "`"
		}
		fmt.Fprintf(sb, "| `%s` | %s | %s |\n", codeCell(name), def, textCell(usage))
	})
}

func hasVisible(fs *pflag.FlagSet) bool {
	visible := false
	fs.VisitAll(func(f *pflag.Flag) {
		if !f.Hidden && f.Deprecated == "" {
			visible = true
		}
	})
	return visible
}

// textCell makes text safe in a markdown table's cell: one line, no column
// break, no emphasis or HTML of its own.
func textCell(s string) string {
	return strings.NewReplacer("\n", " ", "|", `\|`, "*", `\*`, "_", `\_`, "<", "&lt;").Replace(s)
}

// codeCell makes text safe in a code span of a table's cell, where only a
// line break and a column break mean anything.
func codeCell(s string) string {
	return strings.NewReplacer("\n", " ", "|", `\|`).Replace(s)
}
