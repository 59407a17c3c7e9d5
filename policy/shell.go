package policy

import (
	"fmt"
	"maps"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// The shell a command runs in, as the policy follows it: what the command
// changes in it and what later parts of the command read back — variables
// and whether they are exported, arrays, the positional parameters, aliases,
// functions, names bound by hash, the current directory, exit traps and the
// options that change assignments. This is the one place that state is kept;
// it changes only through the methods below, called by the walker and by the
// builtins (builtins.go), never by what the policy knows of programs.
//
// Its scopes are bash's: a subshell — ( ), a pipeline's stage, a command or
// process substitution, a background job — starts with a copy whose changes
// are dropped when it ends; a program starts a new shell that has only the
// exported variables and functions and the current directory; a function
// runs in the shell that calls it, with its own positional parameters and
// local variables.

// shell is the state of one shell. Its maps may be shared with the shell of
// an enclosing scope: own says which belong to this one, and a method copies
// a shared map before it writes to it.
type shell struct {
	vars      map[string]varState
	arrays    map[string][]string // indexed arrays with known elements
	cands     map[string][]string // the values a loop variable takes
	aliases   map[string]string
	funcs     map[string]shellFunc
	hashed    map[string]string // hash -p PATH NAME: the program NAME runs
	pos       []string          // the positional parameters, when posKnown
	posKnown  bool
	arg0      string // $0, when arg0Known (sh -c STRING NAME)
	arg0Known bool
	cwd       string   // "" for the workspace; else a canonical path
	exitTraps []string // the handlers of trap ... EXIT, run when the shell ends
	allexport bool     // set -a: every assignment is exported
	// locals are the variables a function declared local, with what they
	// were before, restored when it returns; nil outside a function.
	locals *[]localVar
	own    ownMaps
}

type ownMaps uint8

const (
	ownVars ownMaps = 1 << iota
	ownArrays
	ownCands
	ownAliases
	ownFuncs
	ownHashed
	ownTraps
)

// shellFunc is a function defined in the command. body is nil when it is too
// large to check again at each call.
type shellFunc struct {
	body *syntax.Stmt
	src  string // the text body's positions refer to
}

type localVar struct {
	name   string
	before varState
	had    bool
	array  []string
	hadArr bool
}

// maxShellNames bounds the aliases, functions and hashed names a shell keeps.
const maxShellNames = 64

// owned makes the maps named by which this shell's own, copying those it
// shares with an enclosing shell.
func (s *shell) owned(which ownMaps) {
	if s.own&which == which {
		return
	}
	if which&ownVars != 0 && s.own&ownVars == 0 {
		s.vars = maps.Clone(s.vars)
	}
	if which&ownArrays != 0 && s.own&ownArrays == 0 {
		s.arrays = maps.Clone(s.arrays)
	}
	if which&ownCands != 0 && s.own&ownCands == 0 {
		s.cands = maps.Clone(s.cands)
	}
	if which&ownAliases != 0 && s.own&ownAliases == 0 {
		s.aliases = maps.Clone(s.aliases)
	}
	if which&ownFuncs != 0 && s.own&ownFuncs == 0 {
		s.funcs = maps.Clone(s.funcs)
	}
	if which&ownHashed != 0 && s.own&ownHashed == 0 {
		s.hashed = maps.Clone(s.hashed)
	}
	if which&ownTraps != 0 && s.own&ownTraps == 0 {
		s.exitTraps = append([]string(nil), s.exitTraps...)
	}
	s.own |= which
}

// subshell returns a copy of the shell for a subshell: it sees everything,
// and what it changes stays in it.
func (s *shell) subshell() shell {
	c := *s
	c.own = 0
	c.locals = nil
	return c
}

// program returns the shell a program started from this one sees: the
// exported variables (with env, the assignments before the command) and the
// current directory. Aliases, other variables, the positional parameters and
// traps do not pass to it, nor functions: bash passes those exported with
// export -f to the bash it starts, but not to sh, and the policy cannot tell
// which shell a program starts — a function that shadows a program must not
// hide it.
func (s *shell) program(env []envAssign) shell {
	c := shell{cwd: s.cwd, own: ^ownMaps(0)}
	if len(s.vars) > 0 || len(env) > 0 {
		c.vars = make(map[string]varState, len(s.vars)+len(env))
	}
	for name, v := range s.vars {
		if v.exported || v.unset || environVars[name] {
			c.vars[name] = v
		} else {
			// Not exported by this command: the program sees the value
			// the variable had in the environment, if it had one.
			c.vars[name] = varState{hasAlt: true}
		}
	}
	for _, a := range env {
		v := assignedState(a.val, true)
		v.exported = true
		c.vars[a.name] = v
	}
	return c
}

// environVars are always in the environment of an agent's shell: assigning
// one changes what programs see.
var environVars = set("HOME", "PATH", "PWD", "OLDPWD", "TMPDIR", "SHELL", "USER", "LOGNAME", "LANG", "TERM")

// setVar assigns a variable. An exported variable stays exported; with set
// -a every assignment is exported.
func (s *shell) setVar(name string, v varState) {
	s.owned(ownVars | ownArrays | ownCands)
	if s.vars == nil {
		s.vars = map[string]varState{}
	}
	if len(v.s) > maxValue {
		v = varState{}
	}
	if old, ok := s.vars[name]; ok && old.exported || s.allexport {
		v.exported = true
	}
	s.vars[name] = v
	delete(s.arrays, name)
	delete(s.cands, name)
}

// exportVar marks a variable exported: programs started later see it.
func (s *shell) exportVar(name string) {
	v, ok := s.vars[name]
	if !ok {
		return // never set here: exported only if the environment has it
	}
	s.owned(ownVars)
	v.exported = true
	s.vars[name] = v
}

// unexportVar stops passing a variable to programs (declare +x, export -n).
func (s *shell) unexportVar(name string) {
	v, ok := s.vars[name]
	if !ok || !v.exported {
		return
	}
	s.owned(ownVars)
	v.exported = false
	s.vars[name] = v
}

// restoreLocals ends a function's local variables: each gets back what it
// was before the function declared it.
func (s *shell) restoreLocals(ls []localVar) {
	if len(ls) == 0 {
		return
	}
	s.owned(ownVars | ownArrays)
	for i := len(ls) - 1; i >= 0; i-- {
		l := ls[i]
		if l.had {
			if s.vars == nil {
				s.vars = map[string]varState{}
			}
			s.vars[l.name] = l.before
		} else {
			delete(s.vars, l.name)
		}
		if l.hadArr {
			if s.arrays == nil {
				s.arrays = map[string][]string{}
			}
			s.arrays[l.name] = l.array
		} else {
			delete(s.arrays, l.name)
		}
	}
}

// unsetVar removes a variable: its environment value is not used either.
func (s *shell) unsetVar(name string) {
	s.setVar(name, varState{known: true, unset: true})
}

// setArray assigns an indexed array; elems nil when they are not known.
func (s *shell) setArray(name string, elems []string, known bool) {
	s.setVar(name, varState{})
	if !known || len(elems) > maxFields {
		return
	}
	s.owned(ownArrays)
	if s.arrays == nil {
		s.arrays = map[string][]string{}
	}
	s.arrays[name] = elems
}

// setLoopValues says which values a loop variable takes (for x in a b c).
func (s *shell) setLoopValues(name string, items []string) {
	s.setVar(name, varState{})
	if len(items) == 0 || len(items) > 16 {
		return
	}
	s.owned(ownCands)
	if s.cands == nil {
		s.cands = map[string][]string{}
	}
	s.cands[name] = items
}

// declareLocal makes a variable local to the function running, so that its
// value before is restored when the function returns. Outside a function it
// does nothing (bash refuses local there).
func (s *shell) declareLocal(name string) {
	if s.locals == nil {
		return
	}
	for _, l := range *s.locals {
		if l.name == name {
			return
		}
	}
	v, had := s.vars[name]
	a, hadArr := s.arrays[name]
	*s.locals = append(*s.locals, localVar{name, v, had, a, hadArr})
}

// setPositional sets the positional parameters ($1 ...): set --, a function's
// arguments, sh -c's words after the script.
func (s *shell) setPositional(args []field) {
	s.pos, s.posKnown = make([]string, 0, len(args)), true
	for _, a := range args {
		if !a.known() {
			s.posKnown = false
		}
		s.pos = append(s.pos, a.s)
	}
}

// setArg0 sets $0, as sh -c STRING NAME does.
func (s *shell) setArg0(f field) {
	s.arg0, s.arg0Known = f.s, f.known()
}

// defineAlias defines an alias; it is checked where it is used.
func (s *shell) defineAlias(name, val string) {
	s.owned(ownAliases)
	if s.aliases == nil {
		s.aliases = map[string]string{}
	}
	if _, ok := s.aliases[name]; ok || len(s.aliases) < maxShellNames {
		s.aliases[name] = val
	}
}

// unalias removes aliases: the names given, or all.
func (s *shell) unalias(names []string, all bool) {
	s.owned(ownAliases)
	if all {
		s.aliases = nil
		return
	}
	for _, n := range names {
		delete(s.aliases, n)
	}
}

// defineFunc defines a function. A body too large to check again at each
// call is kept as nil: the function exists, its calls are not followed.
func (s *shell) defineFunc(name string, body *syntax.Stmt, src string) {
	s.owned(ownFuncs)
	if s.funcs == nil {
		s.funcs = map[string]shellFunc{}
	}
	if _, ok := s.funcs[name]; !ok && len(s.funcs) >= maxShellNames {
		body = nil
	}
	s.funcs[name] = shellFunc{body: body, src: src}
}

// unsetFunc removes a function.
func (s *shell) unsetFunc(name string) {
	if _, ok := s.funcs[name]; !ok {
		return
	}
	s.owned(ownFuncs)
	delete(s.funcs, name)
}

// hash binds a name to the program at a path (hash -p PATH NAME).
func (s *shell) hash(name, prog string) {
	s.owned(ownHashed)
	if s.hashed == nil {
		s.hashed = map[string]string{}
	}
	if len(s.hashed) < maxShellNames {
		s.hashed[name] = prog
	}
}

// chdir changes the current directory to a canonical path ("" for the
// workspace, unknown when it cannot be known).
func (s *shell) chdir(c string) {
	if c == "." {
		c = ""
	}
	s.cwd = c
}

// addExitTrap adds a handler to run when the shell ends; it reports false
// when the shell keeps no more of them.
func (s *shell) addExitTrap(h string) bool {
	if len(s.exitTraps) >= 8 {
		return false
	}
	s.owned(ownTraps)
	s.exitTraps = append(s.exitTraps, h)
	return true
}

// takeExitTraps returns the exit handlers and forgets them.
func (s *shell) takeExitTraps() []string {
	t := s.exitTraps
	s.exitTraps = nil
	s.own |= ownTraps
	return t
}

// setOption turns a set -o option on or off, by its name or its letter.
func (s *shell) setOption(name string, on bool) {
	switch name {
	case "a", "allexport":
		s.allexport = on
	}
}

// isFunc reports whether name is a function of this shell.
func (s *shell) isFunc(name string) bool {
	_, ok := s.funcs[name]
	return ok
}

// loopVar returns the values the variable a word names takes in a loop.
func (s *shell) loopVar(raw string) []string {
	return s.cands[strings.Trim(raw, "${}\"")]
}

// inDir runs fn with the current directory changed to dir (env -C DIR, a
// wrapper's --chdir), as far as the policy can tell; nil leaves it.
func (w *walker) inDir(dir *field, fn func()) {
	if dir == nil {
		fn()
		return
	}
	saved := w.sh.cwd
	if dir.known() {
		w.sh.chdir(w.canon(dir.s))
	} else {
		w.sh.chdir(unknown)
	}
	fn()
	w.sh.chdir(saved)
}

// shellString checks sh -c STRING [$0 $1 ...]: the string's commands, in the
// shell sh starts, with the words after it as its positional parameters.
func (w *walker) shellString(c *call, rest []field) {
	if len(rest) == 0 {
		return
	}
	script := rest[0]
	if !script.known() || script.subst || script.data != 0 {
		k := script.data
		if k == 0 {
			k = dUnknown
		}
		w.execData(c, data{kind: k}, c.name+" -c", true)
		if !script.known() {
			return
		}
	}
	w.add(Allow, ruleShellString, fmt.Sprintf("%s -c runs the string as a script; its commands are checked one by one", c.name), c.part)
	w.sh.setPositional(rest[min(2, len(rest)):])
	if len(rest) > 1 {
		w.sh.setArg0(rest[1])
	}
	w.script(script.s, c.part)
}
