package policy

import (
	"fmt"
	"path"
	"strings"
	"sync"
)

// catchPanics makes Classify deny a command it panicked on; tests turn it off.
var catchPanics = true

// maxInput is the longest command the engine reads; a longer one is denied.
const maxInput = 1 << 20

// Engine classifies commands. It is safe for concurrent use; build one with New,
// or use Default.
type Engine struct {
	unknown   Decision
	maxFile   int64
	rules     []Rule
	workspace string
	contain   Containment
	// placeholders are the variables that hold a secret's placeholder.
	placeholders map[string]bool
}

// Options configure an Engine. The zero value is the default policy for a
// sandboxed agent.
type Options struct {
	// Strict makes programs the policy does not know need confirmation. Without
	// it they are allowed, because the sandbox contains what they can do.
	Strict bool
	// Unknown is the decision for programs the policy does not know (default
	// Allow). Strict raises it to at least Confirm.
	Unknown Decision
	// Rules are the user's rules, combined with the defaults: for each program
	// a command runs, a matching deny rule denies it, a matching confirm rule
	// needs confirmation, and a matching allow rule allows what the defaults
	// would only confirm. An allow rule never lifts a default deny, nor what
	// the structure of the command decides (a computed program name, a
	// redirection onto a protected file).
	Rules []Rule
	// Workspace is the absolute path of the workspace as commands see it.
	// Absolute paths inside it are treated as workspace paths (default: none,
	// so only relative paths are).
	Workspace string
	// MaxFileSize is the size in bytes of the largest file a command may make
	// without approval (fallocate -l, truncate -s, dd count=, head -c); 0
	// means DefaultMaxFileSize. A command writing an endless stream into a
	// file (yes > f, cat /dev/zero > f) needs approval whatever it is.
	MaxFileSize int64
	// Containment is what contains the commands: the sandbox, its network,
	// the checkpoints. The zero value is none (the policy used on its own)
	// and gets the conservative rules; a corral session passes its own.
	Containment Containment
	// Placeholders name the variables that hold, in the sandbox, a secret's
	// placeholder rather than a credential (corral's --secret: the egress
	// proxy puts the value in, for the hosts bound to it only). A command
	// that prints or sends one is not judged as handling a credential,
	// whatever its name.
	Placeholders []string
}

// New builds an engine. It fails when a rule's pattern is invalid.
func New(opts Options) (*Engine, error) {
	e := &Engine{unknown: opts.Unknown, maxFile: opts.MaxFileSize, contain: opts.Containment}
	if err := opts.Containment.validate(); err != nil {
		return nil, err
	}
	if opts.MaxFileSize < 0 {
		return nil, fmt.Errorf("max file size %d: want a size in bytes, or 0 for the default", opts.MaxFileSize)
	}
	for _, name := range opts.Placeholders {
		if e.placeholders == nil {
			e.placeholders = map[string]bool{}
		}
		e.placeholders[name] = true
	}
	if opts.Strict && e.unknown < Confirm {
		e.unknown = Confirm
	}
	if opts.Workspace != "" {
		if !path.IsAbs(opts.Workspace) {
			return nil, fmt.Errorf("workspace %q: want an absolute path", opts.Workspace)
		}
		e.workspace = path.Clean(opts.Workspace)
		if e.workspace == "/" {
			e.workspace = ""
		}
	}
	for _, r := range opts.Rules {
		if r.words == nil {
			compiled, err := NewRule(r.Decision, r.Pattern)
			if err != nil {
				return nil, err
			}
			compiled.Reason, compiled.Source = r.Reason, r.Source
			r = compiled
		}
		e.rules = append(e.rules, r)
	}
	return e, nil
}

var defaultEngine = sync.OnceValue(func() *Engine { return &Engine{} })

// Default returns the engine with the default policy: no user rules, unknown
// programs allowed.
func Default() *Engine { return defaultEngine() }

// Classify classifies a command with the default engine.
func Classify(command string) Verdict { return Default().Classify(command) }

// Unknown returns the decision for programs the policy does not know.
func (e *Engine) Unknown() Decision { return e.unknown }

// Classify decides whether a bash command may run. It reads the command as bash
// would and walks everything that would execute; the strictest decision of any
// part wins. It never panics and never runs anything.
func (e *Engine) Classify(command string) Verdict {
	return e.explain(command, false).Verdict
}

// Explanation is a verdict with the findings it was taken from, one for each
// part of the command that the policy judged, in the order bash would meet them.
type Explanation struct {
	Verdict
	Steps []Verdict `json:"steps"`
	// Resolution says, for each of Verdict.Programs (same index), how the
	// policy came to it: through which program it runs and the word as
	// written.
	Resolution []Resolution `json:"resolution,omitempty"`
}

// Resolution is how one program of a command was resolved.
type Resolution struct {
	// Via is the index in Programs of the program that runs this one (a
	// wrapper such as sudo, env, xargs, sh -c, or a function), or -1 when
	// the shell runs it directly.
	Via int `json:"via"`
	// Written is the command's name as written, when it differs from the
	// program it resolved to ('r'm, $'\x72m', an alias, a variable).
	Written string `json:"written,omitempty"`
}

// Explain classifies a command like Classify and also returns every finding.
func (e *Engine) Explain(command string) Explanation {
	return e.explain(command, true)
}

// ExplainIn is Explain for a command that starts in the directory cwd: a
// path relative to the workspace, or an absolute one (inside the workspace
// when the engine knows it). An empty cwd is the workspace.
func (e *Engine) ExplainIn(cwd, command string) Explanation {
	return e.explainIn(cwd, command, true)
}

func (e *Engine) explain(command string, all bool) (ex Explanation) {
	return e.explainIn("", command, all)
}

func (e *Engine) explainIn(cwd, command string, all bool) (ex Explanation) {
	defer func() {
		// A bug must not let a command through: deny what the engine could
		// not finish classifying. (Tests turn this off to see the bug.)
		if !catchPanics {
			return
		}
		if r := recover(); r != nil {
			ex = Explanation{Verdict: Verdict{Decision: Deny, Rule: ruleInternalError.name(),
				Reason: fmt.Sprintf("the policy failed to check this command (%v); rewrite it more simply", r)}}
		}
	}()
	if len(command) > maxInput {
		return Explanation{Verdict: Verdict{Decision: Deny, Rule: ruleTooLong.name(),
			Reason: fmt.Sprintf("the command is %d bytes long, more than the policy checks (%d); write long scripts to a file in the workspace and run that", len(command), maxInput)}}
	}
	w := &walker{e: e, explain: all, top: command}
	if cwd != "" {
		if c := w.canon(cwd); c != "." {
			w.sh.cwd = c
		}
	}
	w.script(command, command)
	w.runExitTraps(command)
	w.finishArith()
	ex = w.result()
	if note := e.contain.undoNote(); note != "" && ex.Decision == Allow && !ex.ReadOnly && !strings.Contains(ex.Reason, note) {
		ex.Reason += "; " + note
	}
	return ex
}

// Containment returns what the engine knows contains the commands.
func (e *Engine) Containment() Containment { return e.contain }

func (e *Engine) unknownAdvice() string {
	switch e.unknown {
	case Allow:
		return "the sandbox contains what it does"
	case Confirm:
		return "in strict mode a program the policy does not know needs approval"
	}
	return "programs the policy does not know are denied by the configuration"
}
