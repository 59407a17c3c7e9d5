package policy

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

// registerBuiltins describes the builtins no other file describes.
func registerBuiltins() {
	reg("bind", pShell)
	reg("fc", program{decision: Allow, rule: ruleShellBuiltin, reason: "fc -l lists the shell history", exempt: true, check: func(w *walker, c *call) {
		p := parseArgs(c.args(), spec("e"))
		if !p.has("-l") {
			w.add(Confirm, ruleHistoryExec, "fc without -l runs commands again from the shell's history, which the policy cannot see; run the commands directly", c.part)
		}
	}})
}
