// Package policy decides whether a shell command may run: allow, confirm (ask a
// human) or deny, with a reason. It reads the command as bash would, from the parse
// tree of mvdan.cc/sh, never from the raw string.
package policy

import "fmt"

// Decision is the outcome of classifying a command. The zero value is Allow; a
// compound command takes the strictest decision of its parts (Deny > Confirm > Allow).
type Decision int

const (
	Allow Decision = iota
	Confirm
	Deny
)

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

func (d Decision) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

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
	// Rule names the rule that decided, e.g. "default:rm-root" or "user:deny[2]".
	Rule string `json:"rule,omitempty"`
	// Part is the part of the command the decision concerns (a simple command,
	// a redirection, a substitution), as written in the input.
	Part string `json:"part,omitempty"`
}
