package policy

import (
	"fmt"
	"strings"
)

// Programs that run commands given to them as strings or after their own
// arguments, which are not plain wrappers: benchmark and watch tools,
// debuggers, profilers, environment managers, daemon starters.

func registerRunners() {
	reg("srm wipe", program{decision: Allow, rule: ruleWorkspaceChange, reason: "%s securely deletes files", check: checkRm})
	reg("hyperfine", program{decision: Allow, rule: ruleBuild, reason: "hyperfine benchmarks commands; they are checked", check: checkHyperfine})
	reg("nodemon", program{decision: Allow, rule: ruleBuild, reason: "nodemon runs a program again when files change", check: checkNodemon})
	reg("pee", program{decision: Allow, rule: ruleText, reason: "pee feeds its input to commands; they are checked", check: checkPee})
	reg("nix-shell", program{decision: Confirm, rule: rulePackageInstall, reason: "nix-shell builds an environment from packages it may fetch from the network; approval is needed", check: checkNixShell})
	reg("gdb lldb", program{decision: Allow, rule: ruleBuild, reason: "%s debugs a program", check: checkDebugger, args: debuggerArgs})
	reg("perf", program{decision: Allow, rule: ruleBuild, reason: "perf profiles a program", check: checkPerf})
	reg("direnv", program{decision: Allow, rule: ruleInfo, reason: "direnv shows the environment of a directory", check: checkDirenv})
	reg("aws-vault", program{decision: Confirm, rule: ruleCloud, reason: "aws-vault runs commands with cloud credentials; approval is needed", check: checkAwsVault})
	reg("start-stop-daemon", program{decision: Confirm, rule: rulePersistence, reason: "start-stop-daemon starts or stops a daemon outside this session; approval is needed", check: checkStartStopDaemon, args: startStopArgs})
	registerPublishers()
	registerWritten()
	reg("corepack", program{decision: Confirm, rule: rulePackageInstall, reason: "corepack installs package managers and their shims; approval is needed", check: func(w *walker, c *call) {
		if versionOnly(c) || len(c.args()) == 0 {
			w.add(Allow, ruleInfo, "corepack prints its version or help", c.part)
		}
	}})
	reg("sort", program{decision: Allow, rule: ruleText, reason: "sort processes text and prints the result", check: func(w *walker, c *call) {
		p := parseArgs(c.args(), spec("kostTS", "--key", "--output", "--field-separator", "--temporary-directory", "--buffer-size", "--compress-program", "--files0-from", "--random-source", "--batch-size", "--parallel"))
		for _, v := range p.values("--compress-program") {
			w.add(Confirm, ruleProgramOption, "sort --compress-program runs a program of the command's choosing; drop the option", c.part)
			w.programString(v, c.part, "sort --compress-program")
		}
		for _, o := range p.values("-o", "--output") {
			w.pathOp(opWrite, o, actor(c), false)
		}
	}})
	reg("less more most", program{decision: Allow, rule: ruleReadOnly, reason: "%s shows a file page by page", check: func(w *walker, c *call) {
		for _, a := range c.args() {
			if cmd, ok := strings.CutPrefix(a.s, "+"); ok {
				if j := strings.IndexByte(cmd, '!'); j >= 0 {
					w.add(Confirm, ruleEditorExec, c.name+" "+a.show()+" runs a shell command when it starts; run the command directly", c.part)
					w.shellStrings(c, c.name+" +!", []field{lit(cmd[j+1:])})
				}
			}
		}
	}})
	reg("dc", program{decision: Allow, rule: ruleText, reason: "dc computes and prints", check: func(w *walker, c *call) {
		// dc runs the rest of a line after ! as a shell command.
		var code []string
		p := parseArgs(c.args(), spec("ef", "--expression", "--file"))
		for _, v := range p.values("-e", "--expression") {
			code = append(code, v.s)
		}
		if c.stdin.hasText {
			code = append(code, c.stdin.text)
		}
		for _, s := range code {
			for _, line := range strings.Split(s, "\n") {
				if j := strings.IndexByte(line, '!'); j >= 0 && !strings.HasPrefix(line[j+1:], "=") && !strings.HasPrefix(line[j+1:], "<") && !strings.HasPrefix(line[j+1:], ">") {
					w.add(Confirm, ruleInlineCode, "dc ! runs a shell command; run the command directly", c.part)
					w.script(line[j+1:], c.part)
				}
			}
		}
	}})
	reg("sqlite3 sqlite duckdb", program{decision: Allow, rule: ruleBuild, reason: "%s queries a local database file", check: checkSqlite,
		args: spec("", "-cmd", "-init", "-separator", "-newline", "-nullvalue", "-escape", "-vfs", "-mmap", "-pagecache",
			"-lookaside", "-heap", "-maxsize", "-c").wholeWords()})
	reg("xterm uxterm rxvt urxvt", program{decision: Allow, rule: ruleTerminal, reason: "%s opens a terminal window", check: func(w *walker, c *call) {
		args := c.args()
		for i, a := range args {
			switch a.s {
			case "-display", "--display", "-d":
				if i+1 < len(args) {
					host, _, _ := strings.Cut(args[i+1].s, ":")
					if host != "" && host != "localhost" && host != "unix" && !isLocalURL(host) {
						w.add(Deny, ruleReverseShell, c.name+" "+a.s+" "+args[i+1].show()+" opens a shell on another machine's display (a reverse shell); run the commands you need directly", c.part)
					}
				}
			case "-e":
				c.delegated = true
				if i+1 < len(args) {
					w.command(c.sub(args[i+1:]))
				}
				return
			}
		}
	}})
	reg("loginctl", program{decision: Confirm, rule: ruleService, reason: "loginctl manages login sessions; approval is needed", check: checkLoginctl})
}

// shellStrings classifies strings a program runs through a shell.
func (w *walker) shellStrings(c *call, what string, strs []field) {
	for _, s := range strs {
		if !s.known() {
			w.add(Confirm, ruleDynamicCommand, fmt.Sprintf("%s runs a command computed at run time (%s); write it literally", what, s.show()), c.part)
			continue
		}
		w.script(s.s, c.part)
	}
}

func checkHyperfine(w *walker, c *call) {
	p := parseArgs(c.args(), spec("wrmMpcsSLPDuno", "--warmup", "--runs", "--min-runs", "--max-runs", "--prepare",
		"--conclude", "--cleanup", "--setup", "--shell", "--parameter-list", "--parameter-scan", "--parameter-step-size",
		"--time-unit", "--export-asciidoc", "--export-csv", "--export-json", "--export-markdown", "--export-orgmode",
		"--command-name", "--output", "--input", "--style", "--sort"))
	strs := append(p.values("-p", "--prepare", "-c", "--cleanup", "-s", "--setup", "--conclude"), p.ops...)
	w.shellStrings(c, "hyperfine", strs)
}

func checkNodemon(w *walker, c *call) {
	p := parseArgs(c.args(), spec("xewiVd", "--exec", "--ext", "--watch", "--ignore", "--delay", "--signal", "--config"))
	w.shellStrings(c, "nodemon --exec", p.values("-x", "--exec"))
}

func checkPee(w *walker, c *call) {
	w.shellStrings(c, "pee", c.opts().ops)
}

func checkNixShell(w *walker, c *call) {
	p := parseArgs(c.args(), spec("pAIE", "--run", "--command", "--packages", "--attr", "--include", "--expr", "--arg", "--argstr", "--option"))
	w.shellStrings(c, "nix-shell --run", p.values("--run", "--command"))
}

// checkDebugger: gdb and lldb run commands given with -ex or -o; "shell" and "!"
// run them through a shell, "python" and "script" run inline code; attaching to
// a running process needs approval.
// debuggerArgs is how gdb and lldb read their arguments: whole words, with one
// dash or two; --args ends them, the rest being the program and its
// arguments.
var debuggerArgs = func() optSpec {
	var valued, flags []string
	for _, n := range []string{"ex", "iex", "eval-command", "init-eval-command", "o", "one-line", "O", "one-line-before-file",
		"k", "one-line-on-crash", "x", "ix", "command", "init-command", "s", "source", "S", "source-before-file",
		"p", "pid", "attach-pid", "n", "attach-name", "cd", "d", "directory", "core", "c", "tty", "f", "file",
		"a", "arch", "data-directory"} {
		valued = append(valued, "-"+n, "--"+n)
	}
	for _, n := range []string{"batch", "nx", "q", "quiet", "silent", "args", "b", "no-lldbinit", "no-use-colors"} {
		flags = append(flags, "-"+n, "--"+n)
	}
	return spec("", valued...).withFlags(flags...).endAt("--args", "-args").wholeWords()
}()

// checkDebugger: gdb and lldb run commands given with -ex or -o; "shell" and "!"
// run them through a shell, "python" and "script" run inline code; attaching to
// a running process needs approval.
func checkDebugger(w *walker, c *call) {
	p := c.opts()
	for _, o := range p.opts {
		name := strings.TrimLeft(o.name, "-")
		switch name {
		case "x", "ix", "command", "init-command", "s", "source", "S", "source-before-file":
			w.add(Confirm, ruleInlineCode, c.name+" "+o.name+" runs the debugger commands in a file, which can run shell commands; approval is needed", c.part)
			continue
		case "p", "pid", "attach-pid", "n", "attach-name":
			w.add(Confirm, ruleDebugAttach, c.name+" "+o.name+" attaches to a running process and can change what it does; approval is needed", c.part)
			continue
		case "args":
			if len(p.ops) > 0 {
				w.command(c.sub(p.ops))
			}
			return
		case "ex", "iex", "eval-command", "init-eval-command", "o", "one-line", "O", "one-line-before-file", "k", "one-line-on-crash":
		default:
			continue
		}
		if !o.has {
			continue
		}
		cmd := o.val
		if !cmd.known() {
			w.add(Confirm, ruleDynamicCommand, c.name+" "+o.name+" runs a debugger command computed at run time; write it literally", c.part)
			continue
		}
		text := strings.TrimSpace(cmd.s)
		word, rest, _ := strings.Cut(text, " ")
		switch {
		case strings.HasPrefix(text, "!"):
			w.script(strings.TrimPrefix(text, "!"), c.part)
		case word == "shell" || word == "sh":
			w.script(rest, c.part)
		case word == "platform" && strings.HasPrefix(strings.TrimSpace(rest), "shell"):
			w.script(strings.TrimPrefix(strings.TrimSpace(rest), "shell"), c.part)
		case word == "python" || word == "py" || word == "pi" || word == "script" || word == "guile" || word == "pipe" || strings.HasPrefix(text, "|"):
			w.inlineCode(c, rest, c.name+" "+word)
		}
	}
	// lldb -- PROGRAM ARGS: the program to debug.
	if c.name == "lldb" && len(p.ops) > 0 && len(c.args()) > 0 && contains(fieldStrings(c.args()), "--") {
		w.command(c.sub(p.ops))
	}
}

func checkPerf(w *walker, c *call) {
	args := c.args()
	if len(args) == 0 {
		return
	}
	switch args[0].s {
	case "stat", "record", "trace", "top", "mem", "c2c", "kvm", "sched", "lock":
	default:
		return
	}
	p := parseArgs(args[1:], spec("eoptCFcGjmrIux", "--event", "--output", "--pid", "--tid", "--cpu", "--freq",
		"--count", "--cgroup", "--call-graph", "--repeat", "--interval-print", "--uid", "--field-separator", "--mmap-pages").firstOperand())
	if p.has("-p", "--pid", "-t", "--tid", "-u", "--uid") {
		return
	}
	c.delegated = len(p.ops) > 0
	if len(p.ops) > 0 {
		w.command(c.sub(p.ops))
	}
}

func checkDirenv(w *walker, c *call) {
	args := c.args()
	if len(args) == 0 {
		return
	}
	switch args[0].s {
	case "exec":
		c.delegated = true
		if len(args) > 2 {
			w.command(c.sub(args[2:]))
		}
	case "allow", "permit", "grant":
		w.add(Confirm, rulePersistence, "direnv allow lets the directory's .envrc run in every later shell that enters it; approval is needed", c.part)
	}
}

func checkAwsVault(w *walker, c *call) {
	args := c.args()
	if len(args) == 0 || args[0].s != "exec" {
		return
	}
	c.delegated = true
	w.add(Confirm, ruleCloud, "aws-vault exec runs a command with the credentials of a cloud account; approval is needed", c.part)
	// aws-vault exec [options] PROFILE [options] [--] CMD...
	sp := spec("", "--duration", "--mfa-token", "--region", "--prompt", "--backend").firstOperand()
	p := parseArgs(args[1:], sp)
	if len(p.ops) == 0 {
		return
	}
	if ops := parseArgs(p.ops[1:], sp).ops; len(ops) > 0 {
		w.command(c.sub(ops))
	}
}

// startStopArgs is how start-stop-daemon reads its arguments; the words after
// -- are the daemon's.
var startStopArgs = spec("xacugpnsRNPrdkS", "--exec", "--startas", "--chuid", "--user", "--group", "--pidfile",
	"--name", "--signal", "--retry", "--nicelevel", "--procsched", "--iosched", "--chroot", "--chdir", "--umask",
	"--output").withFlags("--start", "--stop", "--status", "--background", "--make-pidfile", "--remove-pidfile",
	"--oknodo", "--quiet", "--verbose", "--test", "--no-close", "--help", "--version")

func checkStartStopDaemon(w *walker, c *call) {
	p := c.opts()
	if len(p.values("-c", "--chuid")) > 0 {
		w.add(Deny, rulePrivilege, "start-stop-daemon --chuid runs the daemon as another user; privilege changes are not allowed", c.part)
	}
	var after []field // the daemon's arguments, after --
	for k := range p.ops {
		if p.at[k] > 0 && c.args()[p.at[k]-1].s == "--" {
			after = p.ops[k:]
			break
		}
	}
	for _, exe := range p.values("-x", "--exec", "-a", "--startas") {
		c.delegated = true
		w.command(c.sub(append([]field{exe}, after...)))
	}
}

func checkLoginctl(w *walker, c *call) {
	if ops := c.opts().ops; len(ops) > 0 {
		a := ops[0]
		switch a.s {
		case "poweroff", "reboot", "halt", "suspend", "hibernate", "hybrid-sleep", "suspend-then-hibernate", "kexec":
			w.add(Deny, rulePower, "loginctl "+a.s+" would stop or suspend the machine; never stop the machine — finish the task instead", c.part)
		case "terminate-user", "kill-user", "terminate-session", "kill-session", "terminate-seat":
			w.add(Deny, ruleKill, "loginctl "+a.s+" kills a whole login session, the user's other programs too; stop only the processes you started", c.part)
		case "enable-linger":
			w.add(Deny, rulePersistence, "loginctl enable-linger keeps the user's services running after logout, which is how persistence is installed; leave it alone", c.part)
		case "list-sessions", "list-users", "list-seats", "session-status", "user-status", "seat-status", "show-session", "show-user", "show-seat":
			w.add(Allow, ruleInfo, "loginctl "+a.s+" only shows sessions", c.part)
		}
		return
	}
	w.add(Allow, ruleInfo, "loginctl only lists sessions", c.part)
}

// publishers: programs whose subcommands (the words listed) publish the
// project to a registry or a store, which others then download.
var publishers = map[string][]string{
	"twine":            {"upload", "register"},
	"flit":             {"publish"},
	"hatch":            {"publish"},
	"pdm":              {"publish"},
	"nuget":            {"push", "delete"},
	"vsce":             {"publish", "unpublish"},
	"ovsx":             {"publish"},
	"goreleaser":       {"release", ""},
	"changeset":        {"publish"},
	"semantic-release": {""},
	"release-it":       {""},
	"np":               {""},
	"lerna":            {"publish", "version"},
	"sbt":              {"publish", "publishSigned", "release", "sonatypeBundleRelease"},
	"dart":             {"pub publish"},
	"flutter":          {"pub publish"},
	"rake":             {"release", "release:*", "publish", "deploy"},
	"swift":            {"package-registry publish"},
	"pod":              {"trunk push", "repo push"},
	"jf":               {"rt upload", "rt u", "npm-publish", "mvn-deploy"},
	"ghr":              {""},
}

func registerPublishers() {
	base := program{decision: Allow, rule: ruleBuild, reason: "%s builds or packages the project"}
	for name, verbs := range publishers {
		addCheck(name, base, func(w *walker, c *call) { checkPublish(w, c, verbs) })
	}
}

func checkPublish(w *walker, c *call, verbs []string) {
	args := c.args()
	for _, a := range args {
		if a.s == "--dry-run" || a.s == "-n" && c.name == "semantic-release" || a.s == "--snapshot" || a.s == "--skip=publish" {
			return
		}
	}
	words := fieldStrings(c.opts().ops)
	line := strings.Join(words, " ")
	for _, v := range verbs {
		ok := false
		switch {
		case v == "":
			ok = len(words) == 0 || c.name == "goreleaser" && words[0] == "release"
		case strings.HasSuffix(v, ":*"):
			for _, wd := range words {
				if strings.HasPrefix(wd, strings.TrimSuffix(v, "*")) {
					ok = true
				}
			}
		case strings.Contains(v, " "):
			ok = line == v || strings.HasPrefix(line, v+" ")
		default:
			ok = contains(words, v) && (c.name == "rake" || c.name == "sbt" || len(words) > 0 && words[0] == v)
		}
		if ok {
			w.add(Confirm, rulePublish, fmt.Sprintf("%s %s publishes the project to a registry or store, for others to download; approval is needed", c.name, strings.TrimSpace(line)), c.part)
			return
		}
	}
}

// checkSqlite: sqlite3's dot commands .shell and .system run shell commands,
// and .output, .once and .import with a | run one for the output or input.
func checkSqlite(w *walker, c *call) {
	p := c.opts()
	cmds := append(fieldStrings(p.values("-cmd")), fieldStrings(p.ops)...)
	if c.stdin.hasText {
		cmds = append(cmds, strings.Split(c.stdin.text, "\n")...)
	}
	for _, s := range cmds {
		if dbWipe.MatchString(s) {
			w.add(Confirm, ruleDataLoss, c.name+" would delete a table or all its data in a local database file, which the checkpoint does not record (such files are ignored by git); approval is needed", c.part)
		}
		for _, line := range strings.Split(s, "\n") {
			line = strings.TrimSpace(line)
			word, rest, _ := strings.Cut(line, " ")
			rest = strings.TrimSpace(rest)
			switch word {
			case ".shell", ".system":
				w.add(Confirm, ruleInlineCode, c.name+" "+word+" runs a shell command; run the command directly", c.part)
				w.script(strings.Trim(rest, "'\""), c.part)
			case ".output", ".once", ".import", ".read":
				if t := strings.Trim(rest, "'\""); strings.HasPrefix(t, "|") {
					w.add(Confirm, ruleInlineCode, c.name+" "+word+" |... runs a shell command; run the command directly", c.part)
					w.script(strings.TrimPrefix(t, "|"), c.part)
				}
			case ".load":
				w.add(Confirm, ruleInlineCode, c.name+" .load loads a native extension, which runs code; approval is needed", c.part)
			}
		}
	}
}
