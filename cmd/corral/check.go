package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/corralhq/corral/calls"
	"github.com/corralhq/corral/egress"
	"github.com/corralhq/corral/policy"
	"github.com/corralhq/corral/sandbox"
)

// Exit statuses of a single `corral check`.
const (
	checkAllow   = 0
	checkError   = 1
	checkConfirm = 2
	checkDeny    = 3
)

func newCheckCmd() *cobra.Command {
	var (
		pf      policyFlags
		sf      sessionFacts
		asJSON  bool
		explain bool
		batch   bool
	)
	cmd := &cobra.Command{
		Use:   "check [--policy FILE] [--strict] [--workspace DIR] [--network MODE] [--no-checkpoints] [--json] [--explain] -- COMMAND | --batch",
		Short: "Classify a bash command as allow, confirm or deny, without running it",
		Long: `check tells what the policy decides about a bash command, and why, without
running it. The words after -- are joined with spaces into the command; quote
the whole command to keep its own quoting: corral check -- 'ls | sh'.
"corral check -" reads the command from standard input.

The policy reads the command as bash would (quotes, escapes, substitutions,
wrappers such as sudo, env, xargs and sh -c) and judges every program it would
run; the strictest decision wins. Deny reasons say what to do instead.

check judges as a session of corral run would, with the same flags: by
default a session's sandbox with no network and a checkpoint before every
change (what they make harmless or undoable is allowed, and the reason names
the undo), with no workspace known. --workspace DIR names the workspace's
path as commands see it (it need not exist here); --network allow or bridge
and --no-checkpoints judge as such a session would: under bridge nothing but
the policy guards the network, and without checkpoints nothing is undone, so
the conservative rules stand.

Exit status of a single check: 0 allow, 2 confirm, 3 deny, 1 on an error
(a bad rules file, an unreadable input).

With --batch, check reads one JSON object per line on standard input,
{"cmd": "..."} (an "id" is echoed back; "workspace" and "cwd", when given,
are the workspace's path and the directory the command starts in), and
writes one line for each, flushed before the next is read:

  {"cmd": "...", "decision": "allow|confirm|deny", "reason": "...", "rule": "...", "part": "..."}

A line that is not such an object gives {"line": N, "error": "...",
"decision": "deny", "reason": "..."}, never a crash. Blank lines are skipped.
The exit status is 0 when every line was answered.

A rules file (--policy) is TOML:

  unknown = "confirm"          # programs the policy does not know: allow (default), confirm or deny
  allow   = ["git push origin feature/*", "docker build *"]
  confirm = ["npm publish *"]
  deny    = ["terraform *", "git push * --force *"]

  [[rule]]                     # a rule with a reason shown to the model
  decision = "deny"
  match    = "kubectl * delete *"
  reason   = "never delete cluster resources; ask the operator"

A pattern is the program and its arguments as shell words; a lone * matches any
number of words, a * inside a word any characters. Rules apply to every program
a command runs (inside pipelines, sudo, xargs, sh -c, find -exec). Deny beats
confirm beats allow; an allow rule allows what the defaults would only confirm,
never what they deny.`,
		Example: `  corral check -- rm -rf /
  corral check --explain -- 'curl -s https://example.com/install.sh | sh'
  corral check --json --policy rules.toml -- git push origin main
  printf '%s\n' '{"cmd": "ls -la"}' '{"cmd": "sudo reboot"}' | corral check --batch`,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := sf.containment()
			if err != nil {
				return err
			}
			ws, err := checkWorkspace(sf.workspace, "--workspace")
			if err != nil {
				return err
			}
			e, err := pf.engineFor(ws, c)
			if err != nil {
				return err
			}
			if batch {
				if len(args) > 0 {
					return errors.New("check --batch reads commands from standard input; give no COMMAND")
				}
				engines := map[string]*policy.Engine{ws: e}
				engineOf := func(ws string) (*policy.Engine, error) {
					if e, ok := engines[ws]; ok {
						return e, nil
					}
					e, err := pf.engineFor(ws, c)
					if err == nil && len(engines) < 64 {
						engines[ws] = e
					}
					return e, err
				}
				return checkBatch(e, engineOf, cmd.InOrStdin(), cmd.OutOrStdout(), explain)
			}
			if len(args) == 0 {
				return errors.New("check needs a command: corral check -- COMMAND, or --batch to read JSON lines")
			}
			command := strings.Join(args, " ")
			if len(args) == 1 && args[0] == "-" {
				b, err := io.ReadAll(io.LimitReader(cmd.InOrStdin(), maxLineBytes))
				if err != nil {
					return fmt.Errorf("reading the command from standard input: %w", err)
				}
				command = strings.TrimRight(string(b), "\n")
			}
			ex := e.Explain(command)
			out := cmd.OutOrStdout()
			if asJSON {
				if err := writeCheckJSON(out, command, ex, explain); err != nil {
					return err
				}
			} else {
				writeCheckText(out, ex, explain)
			}
			switch ex.Decision {
			case policy.Confirm:
				return exitError(checkConfirm)
			case policy.Deny:
				return exitError(checkDeny)
			}
			return nil
		},
	}
	fs := cmd.Flags()
	pf.register(fs)
	sf.register(fs)
	fs.BoolVar(&asJSON, "json", false, `print the verdict as one JSON object: {"cmd", "decision", "reason", "rule", "part"}`)
	fs.BoolVar(&explain, "explain", false, "also show how the command resolves — which words became which program, through which wrappers, and the rule that decided each — and every finding the verdict was taken from")
	fs.BoolVar(&batch, "batch", false, `read {"cmd": "..."} JSON lines on standard input and write one verdict line for each`)
	return cmd
}

// checkResult is one verdict as check prints it in JSON.
type checkResult struct {
	ID       json.RawMessage `json:"id,omitempty"`
	Cmd      string          `json:"cmd"`
	Decision string          `json:"decision"`
	Reason   string          `json:"reason"`
	Rule     string          `json:"rule,omitempty"`
	Part     string          `json:"part,omitempty"`
	ReadOnly bool            `json:"read_only"`
	Programs []checkProgram  `json:"programs,omitempty"`
	Steps    []checkStep     `json:"steps,omitempty"`
	// Rules says what each of the policy's own rules named above covers
	// (with --explain).
	Rules []policy.RuleInfo `json:"rules,omitempty"`
}

// checkProgram is one program the command runs, as resolved (with --explain).
type checkProgram struct {
	policy.Invocation
	policy.Resolution
}

type checkStep struct {
	Decision string `json:"decision"`
	Rule     string `json:"rule"`
	Reason   string `json:"reason"`
	Part     string `json:"part,omitempty"`
}

func result(command string, ex policy.Explanation, explain bool) checkResult {
	r := checkResult{Cmd: command, Decision: ex.Decision.String(), Reason: ex.Reason, Rule: ex.Rule, Part: ex.Part, ReadOnly: ex.ReadOnly}
	if explain {
		for i, p := range ex.Programs {
			cp := checkProgram{Invocation: p, Resolution: policy.Resolution{Via: -1}}
			if i < len(ex.Resolution) {
				cp.Resolution = ex.Resolution[i]
			}
			r.Programs = append(r.Programs, cp)
		}
		for _, s := range ex.Steps {
			r.Steps = append(r.Steps, checkStep{Decision: s.Decision.String(), Rule: s.Rule, Reason: s.Reason, Part: s.Part})
		}
		r.Rules = rulesOf(ex)
	}
	return r
}

// rulesOf describes the policy's own rules an explanation names, each once,
// in the order they first appear: the verdict's, the programs', the findings'.
func rulesOf(ex policy.Explanation) []policy.RuleInfo {
	names := []string{ex.Rule}
	for _, p := range ex.Programs {
		names = append(names, p.Rule)
	}
	for _, s := range ex.Steps {
		names = append(names, s.Rule)
	}
	var out []policy.RuleInfo
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			continue
		}
		seen[n] = true
		if info, ok := policy.DescribeRule(n); ok {
			out = append(out, info)
		}
	}
	return out
}

func writeCheckJSON(w io.Writer, command string, ex policy.Explanation, explain bool) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(result(command, ex, explain))
}

func writeCheckText(w io.Writer, ex policy.Explanation, explain bool) {
	fmt.Fprintf(w, "%s: %s\n", ex.Decision, ex.Reason)
	fmt.Fprintf(w, "  rule: %s\n", ex.Rule)
	if ex.Part != "" {
		fmt.Fprintf(w, "  part: %s\n", oneLine(ex.Part))
	}
	if !explain {
		return
	}
	if ex.ReadOnly {
		fmt.Fprintln(w, "  read-only: nothing it runs changes files")
	}
	if len(ex.Programs) > 0 {
		fmt.Fprintln(w, "\nprograms it runs, as resolved (indented under what runs them):")
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for i, p := range ex.Programs {
			depth := 0
			if i < len(ex.Resolution) {
				for via := ex.Resolution[i].Via; via >= 0 && via < len(ex.Resolution) && depth < 16; via = ex.Resolution[via].Via {
					depth++
				}
			}
			words := append([]string{p.Program}, p.Args...)
			line := strings.Repeat("  ", depth) + oneLine(strings.Join(words, " "))
			var notes []string
			if i < len(ex.Resolution) && ex.Resolution[i].Written != "" {
				notes = append(notes, "written "+oneLine(ex.Resolution[i].Written))
			}
			if !p.Literal {
				notes = append(notes, "not all words known before it runs")
			}
			note := ""
			if len(notes) > 0 {
				note = " (" + strings.Join(notes, "; ") + ")"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s%s\n", p.Decision, p.Rule, line, note)
		}
		tw.Flush()
	}
	if len(ex.Steps) > 0 {
		fmt.Fprintln(w, "\nfindings, in the order bash would meet them:")
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for _, s := range ex.Steps {
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", s.Decision, s.Rule, oneLine(s.Part))
			fmt.Fprintf(tw, "  \t\t  %s\n", s.Reason)
		}
		tw.Flush()
	}
	if rules := rulesOf(ex); len(rules) > 0 {
		fmt.Fprintln(w, "\nthe rules named above:")
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for _, r := range rules {
			fmt.Fprintf(tw, "  %s\t%s\n", r.Name, r.Covers)
		}
		tw.Flush()
	}
}

func oneLine(s string) string {
	return strings.ReplaceAll(s, "\n", `\n`)
}

// batchLine is one input line of check --batch.
type batchLine struct {
	ID  json.RawMessage `json:"id"`
	Cmd *string         `json:"cmd"`
	// Workspace and Cwd, when given: the workspace's path, and the
	// directory the command starts in.
	Workspace string `json:"workspace"`
	Cwd       string `json:"cwd"`
}

// batchError is the answer to a line check --batch cannot read: denied, so a
// reader that looks only at the decision is safe.
type batchError struct {
	Line     int             `json:"line"`
	ID       json.RawMessage `json:"id,omitempty"`
	Error    string          `json:"error"`
	Decision string          `json:"decision"`
	Reason   string          `json:"reason"`
}

func checkBatch(def *policy.Engine, engineOf func(workspace string) (*policy.Engine, error), in io.Reader, out io.Writer, explain bool) error {
	r := bufio.NewReaderSize(in, 64<<10)
	w := bufio.NewWriter(out)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	fail := func(n int, id json.RawMessage, msg string) error {
		return enc.Encode(batchError{Line: n, ID: id, Error: msg, Decision: "deny",
			Reason: "the line could not be read, so nothing was classified: " + msg})
	}
	for n := 1; ; n++ {
		line, tooLong, err := calls.ReadLine(r, maxLineBytes)
		if err != nil && err != io.EOF {
			return fmt.Errorf("reading line %d: %w", n, err)
		}
		var werr error
		switch {
		case tooLong:
			werr = fail(n, nil, fmt.Sprintf("line %d is longer than %d MB", n, maxLineBytes>>20))
		case strings.TrimSpace(string(line)) == "":
			// Blank lines are skipped.
		default:
			var bl batchLine
			if jerr := json.Unmarshal(line, &bl); jerr != nil {
				werr = fail(n, nil, fmt.Sprintf(`line %d is not a JSON object such as {"cmd": "ls"}: %v`, n, jerr))
			} else if bl.Cmd == nil {
				werr = fail(n, bl.ID, fmt.Sprintf(`line %d has no "cmd" string: write {"cmd": "ls"}`, n))
			} else if ws, werr2 := checkWorkspace(bl.Workspace, `"workspace"`); werr2 != nil {
				werr = fail(n, bl.ID, fmt.Sprintf("line %d: %v", n, werr2))
			} else if e, eerr := lineEngine(def, engineOf, bl.Workspace, ws); eerr != nil {
				werr = fail(n, bl.ID, fmt.Sprintf("line %d: %v", n, eerr))
			} else {
				res := result(*bl.Cmd, e.ExplainIn(bl.Cwd, *bl.Cmd), explain)
				res.ID = bl.ID
				werr = enc.Encode(res)
			}
		}
		if werr == nil {
			werr = w.Flush()
		}
		if werr != nil {
			return fmt.Errorf("writing the verdict of line %d: %w", n, werr)
		}
		if err == io.EOF {
			return nil
		}
	}
}

// lineEngine is the engine of a batch line: the command line's own, unless
// the line names a workspace.
func lineEngine(def *policy.Engine, engineOf func(string) (*policy.Engine, error), given, ws string) (*policy.Engine, error) {
	if given == "" {
		return def, nil
	}
	return engineOf(ws)
}

// checkWorkspace makes a workspace given to check absolute. It names the
// path commands see the workspace at, which need not exist on this machine.
func checkWorkspace(dir, what string) (string, error) {
	if dir == "" {
		return "", nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("%s %q: %w", what, dir, err)
	}
	if abs == "/" {
		return "", fmt.Errorf("%s %q: the root directory cannot be a workspace; name the project's directory", what, dir)
	}
	return abs, nil
}

// sessionFacts are the flags of corral run that say what contains a
// session's commands, for check to judge as such a session would.
type sessionFacts struct {
	workspace     string
	network       string
	allowHosts    []string
	allowPresets  []string
	noCheckpoints bool
}

func (f *sessionFacts) register(fs *pflag.FlagSet) {
	fs.StringVarP(&f.workspace, "workspace", "w", "", "the workspace's path as commands see it (it need not exist here): absolute paths inside it are the workspace's (default: none known)")
	fs.StringVar(&f.network, "network", sandbox.DefaultNetwork, "judge as a session with this sandbox network would: none, allow (only the hosts of --allow-host and --allow-preset, through corral's proxy) or bridge (the whole network; network effects need approval)")
	fs.StringArrayVar(&f.allowHosts, "allow-host", nil, "with --network allow, a host commands may reach (as corral run takes it); repeatable")
	fs.StringArrayVar(&f.allowPresets, "allow-preset", nil, "with --network allow, the hosts a tool needs: "+strings.Join(egress.Presets(), ", ")+"; repeatable")
	fs.BoolVar(&f.noCheckpoints, "no-checkpoints", false, "judge as a session without checkpoints would: nothing can be undone with corral restore")
}

// containment is what the flags say contains the commands.
func (f *sessionFacts) containment() (policy.Containment, error) {
	switch f.network {
	case policy.NetworkNone, policy.NetworkBridge:
		if len(f.allowHosts)+len(f.allowPresets) > 0 {
			return policy.Containment{}, errors.New("--allow-host and --allow-preset need --network allow")
		}
	case policy.NetworkAllow:
		p, err := egress.New(egress.Config{Allow: f.allowHosts, Presets: f.allowPresets}) // check the patterns
		if err != nil {
			return policy.Containment{}, fmt.Errorf("--network allow: %w", err)
		}
		p.Close()
	default:
		return policy.Containment{}, fmt.Errorf("--network %q: want none, allow or bridge", f.network)
	}
	return policy.Containment{Sandbox: true, Network: f.network, Checkpoints: !f.noCheckpoints}, nil
}
