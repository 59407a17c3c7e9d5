package policy

import (
	"regexp"
	"strings"
)

// The builtins of bash, listed once. bash resolves a command's name as an
// alias (unquoted), then a function, then one of these, then a program on
// PATH: a builtin of the same name as a program is the builtin (kill, echo,
// test, printf), and a program table entry under a builtin's name describes
// the builtin, never a program (the bash builtin continue is not an agent's
// CLI). TestBuiltins checks this list against mvdan.cc/sh's interp.IsBuiltin
// and that every builtin has a description.
var bashBuiltins = set(
	// POSIX special builtins
	":", ".", "break", "continue", "eval", "exec", "exit", "export", "readonly", "return", "set", "shift",
	"times", "trap", "unset",
	// other builtins of bash
	"alias", "bg", "bind", "builtin", "caller", "cd", "command", "compgen", "complete", "compopt", "declare",
	"dirs", "disown", "echo", "enable", "false", "fc", "fg", "getopts", "hash", "help", "history", "jobs",
	"kill", "let", "local", "logout", "mapfile", "popd", "printf", "pushd", "pwd", "read", "readarray",
	"shopt", "source", "suspend", "test", "[", "true", "type", "typeset", "ulimit", "umask", "unalias", "wait",
)

// isBuiltin reports whether bash runs name as a builtin (when no function or
// alias of that name is defined).
func isBuiltin(name string) bool { return bashBuiltins[name] }

// The builtins that change the shell — its directory, variables, positional
// parameters, aliases, hashed names, traps and options — are described here,
// and change it only through the shell's methods (shell.go). They change the
// shell only when the shell runs them itself (see run): env cd /tmp runs a
// program named cd, which changes nothing here.

// registerBuiltins describes the builtins no other file describes.
func registerBuiltins() {
	builtin := func(names, reason string, check func(w *walker, c *call)) {
		reg(names, program{decision: Allow, rule: ruleShellBuiltin, reason: reason, exempt: true, check: check})
	}
	reg("bind", pShell)
	reg("fc", program{decision: Allow, rule: ruleShellBuiltin, reason: "fc -l lists the shell history", exempt: true, check: func(w *walker, c *call) {
		p := parseArgs(c.args(), spec("e"))
		if !p.has("-l") {
			w.add(Confirm, ruleHistoryExec, "fc without -l runs commands again from the shell's history, which the policy cannot see; run the commands directly", c.part)
		}
	}})
	builtin("cd pushd popd", "%s changes the current directory", checkCd)
	builtin("set", "set changes shell options", checkSet)
	builtin("shopt", "shopt changes shell options", func(w *walker, c *call) {
		p := parseArgs(c.args(), spec(""))
		if p.has("-u") && p.has("-o") && contains(fieldStrings(p.ops), "history") {
			w.add(Deny, ruleHistoryWipe, "shopt -u -o history stops the shell from recording commands, which hides what was run; leave the history on", c.part)
		}
	})
	builtin("unset", "unset removes variables", checkUnset)
	builtin("export declare typeset local readonly", "%s sets variables and their attributes", checkDeclare)
	builtin("read mapfile readarray", "%s reads input into variables", checkRead)
	builtin("getopts", "getopts reads options into a variable", func(w *walker, c *call) {
		if a := c.args(); len(a) > 1 {
			w.sh.setVar(a[1].s, varState{})
			w.sh.setVar("OPTARG", varState{})
		}
	})
	reg("printf", program{decision: Allow, rule: ruleReadOnly, reason: "printf only prints", exempt: true, check: func(w *walker, c *call) {
		a := c.args()
		if len(a) > 1 && a[0].s == "-v" {
			w.arith = true // the name may be an array's element, or an integer
			w.embedded(a[1].s, c.part)
			d := printfData(a[2:], 0)
			w.assignName(a[1].s, varState{s: d.text, known: d.hasText, data: d.kind &^ dLiteral})
			a = a[2:]
		}
		// A number's conversion (%d, %x, %f ...) evaluates its argument as
		// arithmetic.
		if len(a) > 0 && (!a[0].known() || printfNumber.MatchString(a[0].s)) {
			w.arith = true
		}
	}})
	reg("test [", program{decision: Allow, rule: ruleReadOnly, reason: "%s only tests", exempt: true, check: func(w *walker, c *call) {
		a := c.args()
		for i := 0; i < len(a); i++ {
			switch a[i].s {
			case "-v", "-R":
				w.arith = true
				if i+1 < len(a) {
					w.embedded(a[i+1].s, c.part)
				}
			case "-eq", "-ne", "-lt", "-le", "-gt", "-ge":
				w.arith = true // the operands are evaluated as arithmetic
			}
		}
	}})
	builtin("hash", "hash remembers where programs are", checkHash)
	reg("alias", program{decision: Allow, rule: ruleAlias, reason: "alias defines a shortcut; its command is checked", check: checkAlias, exempt: true})
	builtin("unalias", "unalias removes aliases", func(w *walker, c *call) {
		p := parseArgs(c.args(), spec(""))
		w.sh.unalias(fieldStrings(p.ops), p.has("-a"))
	})
	reg("trap", program{decision: Allow, rule: ruleTrap, reason: "trap sets a command to run on a signal; that command is checked", check: checkTrap, exempt: true})
}

// printfNumber matches a printf format with a conversion of a number.
var printfNumber = regexp.MustCompile(`%[-+ #0'*.0-9]*[hlLqjzt]*[diouxXeEfFgGaA]`)

// assignName assigns a variable named by a word, as read, printf -v and
// getopts do: a[1] changes an element of the array a, whose elements are then
// not known.
func (w *walker) assignName(name string, v varState) {
	if base, _, ok := strings.Cut(name, "["); ok {
		w.sh.setVar(base, varState{data: v.data})
		return
	}
	w.sh.setVar(name, v)
}

func checkCd(w *walker, c *call) {
	p := parseArgs(c.args(), spec(""))
	if c.name == "popd" || c.name == "pushd" && len(p.ops) == 0 {
		// Back to a directory of the stack, which is not followed.
		w.sh.chdir(unknown)
		return
	}
	if len(p.ops) == 0 {
		w.sh.chdir("~")
		return
	}
	d := p.ops[0]
	if !d.known() || d.s == "-" || c.name == "pushd" && (strings.HasPrefix(d.s, "+") || strings.HasPrefix(d.s, "-")) {
		w.sh.chdir(unknown)
		return
	}
	if v, ok := w.sh.vars["CDPATH"]; ok && !strings.HasPrefix(d.s, "/") && !strings.HasPrefix(d.s, ".") && !strings.HasPrefix(d.s, "~") && (!v.known || v.s != "") {
		// CDPATH makes a relative directory one of its entries'.
		w.sh.chdir(unknown)
		return
	}
	w.sh.chdir(w.canon(d.s))
}

func checkSet(w *walker, c *call) {
	args := c.args()
	if len(args) == 0 {
		w.envDump("set", c.part)
	}
	for i := 0; i < len(args); i++ {
		a := args[i].s
		if a == "--" || a == "-" || !strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "+") {
			// set -- a b c (or set a b c) sets the positional parameters.
			start := i
			if a == "--" || a == "-" {
				start = i + 1
			}
			w.sh.setPositional(args[start:])
			return
		}
		on := a[0] == '-'
		if a[1:] == "o" {
			if i+1 < len(args) {
				i++
				name := args[i].s
				if name == "history" && !on {
					w.add(Deny, ruleHistoryWipe, "set +o history stops the shell from recording commands, which hides what was run; leave the history on", c.part)
				}
				w.sh.setOption(name, on)
			}
			continue
		}
		for _, l := range a[1:] {
			w.sh.setOption(string(l), on)
		}
	}
}

// checkUnset: unset -f removes functions; unset -v (or -n) variables; unset
// alone a variable, or the function of that name when there is no such
// variable — which the policy cannot always know, so it takes both as gone.
func checkUnset(w *walker, c *call) {
	funcs, vars := false, false
	for _, a := range c.args() {
		switch {
		case a.s == "-f":
			funcs = true
		case a.s == "-v" || a.s == "-n":
			vars = true
		case a.s == "HISTFILE" || a.s == "HISTSIZE" || a.s == "HISTFILESIZE":
			w.add(Deny, ruleHistoryWipe, "unset "+a.s+" stops the shell history from being saved, which hides what was run; leave the history settings alone", c.part)
		default:
			w.embedded(a.s, c.part)
			if !vars {
				w.sh.unsetFunc(a.s)
			}
			if !funcs {
				if base, _, ok := strings.Cut(a.s, "["); ok {
					w.sh.setVar(base, varState{}) // an element: the array is not known
				} else if _, known := w.sh.vars[a.s]; known || vars || !w.sh.isFunc(a.s) {
					w.sh.unsetVar(a.s)
				}
			}
		}
	}
}

// checkDeclare handles export, declare and kin run as programs are (command
// export x=1); the shell's own declaration commands are walked in declClause.
func checkDeclare(w *walker, c *call) {
	var opts string
	for _, a := range c.args() {
		if strings.HasPrefix(a.s, "-") {
			opts += a.s[1:]
			continue
		}
		name, val, ok := strings.Cut(a.s, "=")
		if !ok {
			continue
		}
		v := a
		v.s, v.raw = val, ""
		w.envVar(name, v, c.part, c.name == "export")
		if !strings.Contains(opts, "f") {
			w.declared(name, assignedState(v, true), c.name == "local", c.name == "export" || strings.Contains(opts, "x"))
		}
	}
}

func checkRead(w *walker, c *call) {
	p := parseArgs(c.args(), spec("adinNptuCcO"))
	names := p.ops
	arrays := p.values("-a")
	if c.name != "read" {
		// mapfile ARRAY; readarray ARRAY: MAPFILE when none is given.
		arrays, names = names, nil
		if len(arrays) == 0 {
			arrays = []field{lit("MAPFILE")}
		}
	} else if len(names) == 0 && len(arrays) == 0 {
		names = []field{lit("REPLY")}
	}
	for _, v := range append(names, arrays...) {
		w.embedded(v.s, c.part)
		w.assignName(v.s, varState{data: c.stdin.kind})
	}
	// read x <<< 'text': the variables get the text's words.
	if c.name == "read" && c.stdin.hasText && c.stdin.kind == dLiteral && len(names) > 0 && len(arrays) == 0 {
		line, _, _ := strings.Cut(c.stdin.text, "\n")
		words := strings.Fields(line)
		for i, v := range names {
			val := ""
			switch {
			case i == len(names)-1 && i < len(words):
				val = strings.Join(words[i:], " ")
			case i < len(words):
				val = words[i]
			}
			w.assignName(v.s, varState{s: val, known: true})
		}
	}
}

func checkHash(w *walker, c *call) {
	p := parseArgs(c.args(), spec("pd"))
	for _, target := range p.values("-p") {
		if !target.known() {
			w.add(Confirm, ruleDynamicCommand, "hash -p binds a name to a program computed at run time; run the program by its own name", c.part)
			continue
		}
		for _, n := range p.ops {
			w.sh.hash(n.s, target.s)
		}
	}
}

func checkAlias(w *walker, c *call) {
	for _, a := range c.args() {
		name, val, ok := strings.Cut(a.s, "=")
		if !ok || a.s == "-p" {
			continue
		}
		if !a.known() {
			w.add(Confirm, ruleAlias, "alias defines a shortcut to a command computed at run time; write it literally", c.part)
			continue
		}
		w.sh.defineAlias(name, val) // checked where it is used, with its arguments
		// and here: an alias that shadows a common command does harm wherever
		// aliases are expanded later.
		if !w.expanding[name] {
			if w.expanding == nil {
				w.expanding = map[string]bool{}
			}
			w.expanding[name] = true
			w.scriptQuiet(val, c.part)
			delete(w.expanding, name)
		}
	}
}

func checkTrap(w *walker, c *call) {
	args := c.args()
	if len(args) == 0 {
		return
	}
	// trap [-lp] [[HANDLER] SIGNAL...]
	p := parseArgs(args, spec("").firstOperand())
	if p.has("-l", "-p", "-P") || len(p.ops) < 2 {
		return
	}
	h := p.ops[0]
	if h.s == "-" || h.s == "" || isFD(h.s) {
		return
	}
	if !h.known() {
		w.add(Confirm, ruleTrapDynamic, "trap sets a handler computed at run time; write the handler literally", c.part)
		return
	}
	exitOnly := true
	for _, sig := range p.ops[1:] {
		if s := strings.ToUpper(sig.s); s != "EXIT" && s != "0" && s != "SIGEXIT" {
			exitOnly = false
		}
	}
	// An exit handler runs when the shell ends, with the shell as it is
	// then; other handlers may run at any time, so they are checked now.
	if exitOnly && w.sh.addExitTrap(h.s) {
		return
	}
	w.script(h.s, c.part)
}

// runExitTraps checks the handlers of trap ... EXIT as bash runs them: when
// the shell ends.
func (w *walker) runExitTraps(part string) {
	for _, h := range w.sh.takeExitTraps() {
		w.script(h, part)
	}
}
