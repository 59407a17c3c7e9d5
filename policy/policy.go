// Package policy decides whether a shell command may run: allow, confirm (ask a
// human) or deny, with a reason. It reads the command as bash would, from the parse
// tree of mvdan.cc/sh, never from the raw string.
//
// Classify walks everything bash would execute — lists, pipelines, subshells,
// functions, loops, command and process substitutions, arithmetic, here-documents
// and redirections — and judges every program it would run; the strictest
// decision wins. Words are resolved as bash would resolve them (quotes, escapes,
// $'...', brace expansion, variables set earlier in the command); a program whose
// name is computed needs confirmation at least. Wrappers (sudo, env, timeout,
// xargs, find -exec, sh -c, eval, ssh, git -c, npx ...) are unwrapped and the
// command inside judged too. Data is followed through pipes, substitutions and
// files written earlier in the command: a download or decoded text run as code is
// denied, the environment or credentials sent over the network is denied.
//
// The defaults fit an agent in a sandbox: reading and ordinary development are
// allowed; effects beyond the task (pushes, installs, downloads, containers,
// recursive deletion in the workspace, kills) need confirmation; catastrophe and
// escape (deleting /, ~ or system directories, disks, fork bombs, reverse shells,
// reading or sending credentials, privilege escalation, writing startup files or
// history) are denied, with a reason that says what to do instead. Programs the
// policy does not know are allowed, or need confirmation in strict mode. A user's
// rules (see Rules) add to the defaults.
//
// An Engine is safe for concurrent use. Classify never runs anything and never
// panics: a command it cannot finish checking is denied.
package policy

import "fmt"

// Decision is the outcome of classifying a command. The zero value is Allow; a
// compound command takes the strictest decision of its parts (Deny > Confirm > Allow).
type Decision int

const (
	Allow   Decision = iota // the command may run
	Confirm                 // a human must approve the command first
	Deny                    // the command must not run
)

// String returns "allow", "confirm" or "deny".
func (d Decision) String() string {
	switch d {
	case Allow:
		return "allow"
	case Confirm:
		return "confirm"
	case Deny:
		return "deny"
	}
	return fmt.Sprintf("Decision(%d)", int(d))
}

// ParseDecision parses "allow", "confirm" or "deny".
func ParseDecision(s string) (Decision, error) {
	switch s {
	case "allow":
		return Allow, nil
	case "confirm":
		return Confirm, nil
	case "deny":
		return Deny, nil
	}
	return Allow, fmt.Errorf("unknown decision %q: want allow, confirm or deny", s)
}

// MarshalText writes a decision as its name, so a Verdict's JSON says "deny".
func (d Decision) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText reads a decision's name, as ParseDecision does.
func (d *Decision) UnmarshalText(b []byte) error {
	v, err := ParseDecision(string(b))
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// Verdict is the decision about one command and why it was taken.
type Verdict struct {
	Decision Decision `json:"decision"`
	// Reason is a sentence for the model and the human: what the command would do
	// that led to the decision.
	Reason string `json:"reason"`
	// Rule names the rule that decided: "default:" and a name for the built-in
	// rules (default:delete-tree-root, default:remote-code, default:git-push),
	// `user:deny "git push *" (rules.toml:12)` for a user's rule.
	Rule string `json:"rule,omitempty"`
	// Part is the part of the command the decision concerns (a simple command,
	// a redirection, a substitution), as written in the input.
	Part string `json:"part,omitempty"`
	// Programs lists every program the command runs, as resolved (wrappers
	// unwrapped: sudo rm -rf x lists sudo, then rm), in the order bash would
	// start them, each with its own decision. Shell builtins and functions
	// the command calls are listed too. Empty in the steps of an Explanation.
	Programs []Invocation `json:"programs,omitempty"`
	// ReadOnly is true only when the policy is sure nothing the command runs
	// changes files or state beyond its output (and the shell's own state:
	// variables, the working directory). A command the analysis cannot follow
	// entirely is never read-only.
	ReadOnly bool `json:"read_only"`
}

// Invocation is one program a command runs, as the policy resolved it.
type Invocation struct {
	// Program is the program's name, or its path when the command gave one
	// (./build.sh, /usr/bin/rm). When the name is computed at run time it is
	// the word as written ("$cmd").
	Program string `json:"program"`
	// Args are the arguments after the program's name, as bash would pass
	// them; a part the policy cannot know is shown as written.
	Args []string `json:"args"`
	// Literal says every word was resolved statically: no expansion whose
	// value is unknown, no glob bash would expand to file names.
	Literal bool `json:"literal"`
	// Decision is the strictest finding about this program's own call (the
	// programs it runs have their own Invocation).
	Decision Decision `json:"decision"`
	// Rule and Reason are those of the finding that decided.
	Rule   string `json:"rule,omitempty"`
	Reason string `json:"reason,omitempty"`
}
