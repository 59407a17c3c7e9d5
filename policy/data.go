package policy

import (
	"math"
	"path"
	"regexp"
	"strconv"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// dataKind says where the bytes flowing into a command come from: what a pipe,
// a here-document or a substitution carries. It decides what running those bytes
// as code, or sending them over the network, means.
type dataKind uint16

const (
	dLiteral  dataKind = 1 << iota // text written in the command itself
	dFile                          // a file's contents
	dDownload                      // data fetched from the network
	dDecoded                       // decoded or transformed text: what it says is hidden
	dSecret                        // credentials
	dEnv                           // the environment, or the identity of the machine or user
	dShell                         // the output of a shell or interpreter
	dUnknown                       // the output of some program
	dProc                          // (a field flag) a process substitution's file
	dEndless                       // an endless stream (yes, /dev/zero): written to a file, it fills the disk
	dHuge                          // a stream that ends, but past the size a file may have without approval
)

func (k dataKind) String() string {
	switch {
	case k&dDownload != 0:
		return "data downloaded from the network"
	case k&dDecoded != 0:
		return "decoded or transformed text"
	case k&dSecret != 0:
		return "credentials"
	case k&dEnv != 0:
		return "the environment or identity of the machine"
	case k&dShell != 0:
		return "a shell's output"
	case k&dFile != 0:
		return "a file's contents"
	case k&dUnknown != 0:
		return "a program's output"
	case k&dLiteral != 0:
		return "text written in the command"
	}
	return "nothing"
}

// data is what flows into a command.
type data struct {
	kind    dataKind
	text    string // the text, when it is literal and known
	hasText bool
	lits    []string // literal pieces of it, when only some of it is known
	names   string   // a glob standing for the paths it lists (ls, find)
	from    string   // the command that produced it, when it came through a pipe
	pipe    string   // the whole pipeline, for messages
}

func literalData(s string) data { return data{kind: dLiteral, text: s, hasText: true} }

func (d data) union(e data) data {
	out := data{kind: d.kind | e.kind}
	switch {
	case d.kind == 0:
		return e
	case e.kind == 0:
		return d
	case d.hasText && e.hasText && len(d.text)+len(e.text) < maxValue:
		out.text, out.hasText = d.text+e.text, true
		return out
	}
	// Keep the pieces that are known: { cat; echo "rm -rf ~"; } | sh.
	for _, x := range []data{d, e} {
		pieces := x.lits
		if x.hasText {
			pieces = []string{x.text}
		}
		for _, p := range pieces {
			if len(out.lits) < 16 && len(p) < maxValue {
				out.lits = append(out.lits, p)
			}
		}
	}
	return out
}

// Program families for data flow.
var (
	downloaders = set("curl", "wget", "fetch", "http", "https", "xh", "httpie", "lynx", "w3m", "links",
		"nc", "ncat", "netcat", "socat", "telnet", "ssh", "dig", "host", "nslookup", "aria2c", "lwp-request",
		"gsutil", "s3cmd", "rclone", "ftp", "tftp", "lftp", "sftp", "smbclient")
	transformers = set("base64", "base32", "basenc", "xxd", "uudecode", "openssl", "gpg", "gunzip", "zcat",
		"gzip", "bzip2", "bunzip2", "bzcat", "xz", "unxz", "xzcat", "zstd", "unzstd", "zstdcat", "lz4", "brotli",
		"rev", "tr", "iconv", "od", "hexdump", "sed", "awk", "gawk", "mawk", "nawk", "perl", "python", "python3",
		"ruby", "node", "jq", "rot13", "recode", "uncompress", "7z", "unzip", "tar", "envsubst", "m4", "cpp")
	// textTools rewrite text; they decode nothing of their own.
	textTools = set("sed", "awk", "gawk", "mawk", "nawk", "tr", "rev", "envsubst", "m4", "jq", "iconv")
	filters   = set("grep", "egrep", "fgrep", "rg", "head", "tail", "sort", "uniq", "cut", "fold", "fmt",
		"column", "tee", "cat", "tac", "nl", "pv", "buffer", "stdbuf", "dd", "paste", "expand", "unexpand", "less", "more")
	envDumps = set("env", "printenv", "set", "export", "declare", "typeset", "compgen", "whoami", "hostname",
		"id", "uname", "ifconfig", "ip", "hostid", "groups", "users", "who", "w", "logname", "hostnamectl")
	shells       = set("sh", "bash", "zsh", "dash", "ksh", "mksh", "fish", "csh", "tcsh", "ash", "yash", "rbash", "elvish", "nu", "xonsh", "pwsh", "powershell")
	interpreters = set("python", "python2", "python3", "pypy", "pypy3", "perl", "ruby", "node", "nodejs", "php", "lua", "luajit", "tclsh", "wish", "Rscript", "R", "julia", "deno", "bun", "osascript", "irb", "jshell", "groovy", "scala", "guile", "racket", "sbcl", "clisp", "ts-node", "tsx", "expect")
)

func set(names ...string) map[string]bool {
	if len(names) == 0 {
		return nil
	}
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// interpreterName strips a version from an interpreter's name: python3.12 is python3.
func interpreterName(name string) string {
	if interpreters[name] || shells[name] {
		return name
	}
	base := strings.TrimRight(name, "0123456789.")
	if base != name && (interpreters[base] || shells[base]) {
		return base
	}
	return name
}

// produce says what a list of statements writes to its standard output.
func (w *walker) produce(list []*syntax.Stmt, stdin data) data {
	if len(list) == 0 {
		return literalData("") // $() is empty
	}
	var out data
	for _, s := range list {
		out = out.union(w.produceStmt(s, stdin))
	}
	return out
}

func (w *walker) produceStmt(s *syntax.Stmt, stdin data) data {
	if s == nil || !w.tick() {
		return data{}
	}
	if stdin.kind == 0 {
		if d, ok := w.produced[s]; ok {
			return d
		}
	}
	d := w.produceStmt1(s, stdin)
	if stdin.kind == 0 {
		if w.produced == nil {
			w.produced = map[*syntax.Stmt]data{}
		}
		w.produced[s] = d
	}
	return d
}

func (w *walker) produceStmt1(s *syntax.Stmt, stdin data) data {
	for _, r := range s.Redirs {
		if r.N != nil && r.N.Value != "1" && r.N.Value != "0" {
			continue
		}
		switch r.Op {
		case syntax.RdrOut, syntax.AppOut, syntax.RdrClob, syntax.RdrAll, syntax.AppAll:
			return data{} // the output goes to a file
		case syntax.RdrIn, syntax.Hdoc, syntax.DashHdoc, syntax.WordHdoc:
			stdin = w.inputData(r)
		}
	}
	switch c := s.Cmd.(type) {
	case *syntax.CallExpr:
		if len(c.Args) == 0 {
			return data{}
		}
		argv := w.lastArgv
		if c != w.lastCall {
			argv = w.expandWords(c.Args)
		}
		return w.produceCall(argv, stdin)
	case *syntax.BinaryCmd:
		if c.Op == syntax.Pipe || c.Op == syntax.PipeAll {
			return w.produceStmt(c.Y, w.produceStmt(c.X, stdin))
		}
		return w.produceStmt(c.X, stdin).union(w.produceStmt(c.Y, stdin))
	case *syntax.Block:
		return w.produce(c.Stmts, stdin)
	case *syntax.Subshell:
		return w.produce(c.Stmts, stdin)
	case *syntax.IfClause:
		var out data
		for ic := c; ic != nil; ic = ic.Else {
			out = out.union(w.produce(ic.Then, stdin))
		}
		out.hasText = false
		return out
	case *syntax.WhileClause:
		out := w.produce(c.Do, stdin)
		out.hasText = false
		return out
	case *syntax.ForClause:
		out := w.produce(c.Do, stdin)
		out.hasText = false
		return out
	case *syntax.CaseClause:
		var out data
		for _, it := range c.Items {
			out = out.union(w.produce(it.Stmts, stdin))
		}
		out.hasText = false
		return out
	case *syntax.TimeClause:
		return w.produceStmt(c.Stmt, stdin)
	case *syntax.DeclClause:
		for _, a := range c.Args {
			if a.Name != nil || a.Value == nil || !strings.HasPrefix(a.Value.Lit(), "-") {
				return data{}
			}
		}
		return data{kind: dEnv} // export, export -p, declare -x: the environment
	case *syntax.FuncDecl, *syntax.TestClause, *syntax.ArithmCmd, *syntax.LetClause:
		return data{}
	}
	return data{kind: dUnknown}
}

// inputData says what an input redirection feeds a command.
func (w *walker) inputData(r *syntax.Redirect) data {
	switch r.Op {
	case syntax.Hdoc, syntax.DashHdoc:
		if r.Hdoc == nil {
			return literalData("")
		}
		return w.docData(r.Hdoc)
	case syntax.WordHdoc:
		fs := w.resolveParts(r.Word.Parts)
		var d data
		for _, f := range fs {
			d = d.union(fieldData(f))
		}
		if d.kind == 0 {
			return literalData("\n")
		}
		if d.hasText {
			d.text += "\n"
		}
		return d
	case syntax.RdrIn:
		fs := w.expandWord(r.Word)
		if len(fs) != 1 {
			return data{kind: dFile}
		}
		return w.fileData(fs[0])
	}
	return data{}
}

// docData resolves a here-document body.
func (w *walker) docData(doc *syntax.Word) data {
	var sb strings.Builder
	d := data{kind: dLiteral}
	known := true
	for _, p := range doc.Parts {
		switch p := p.(type) {
		case *syntax.Lit:
			sb.WriteString(unescapeDouble(p.Value))
		default:
			var b fieldBuilder
			w.resolvePart(&b, p, true, false)
			b.split()
			for _, f := range b.out {
				d.kind |= f.data
				if !f.known() {
					known = false
					if f.data == 0 {
						d.kind |= dUnknown
					}
				}
				sb.WriteString(f.s)
			}
		}
	}
	if known {
		d.text, d.hasText = sb.String(), true
	}
	return d
}

// fieldData says what a word used as input text carries.
func fieldData(f field) data {
	if f.known() && f.data == 0 {
		return literalData(f.s)
	}
	k := f.data
	if k == 0 {
		k = dUnknown
	}
	return data{kind: k | dLiteral}
}

// fileData says what reading a file gives.
func (w *walker) fileData(f field) data {
	if f.data&dProc != 0 && f.proc != nil {
		return *f.proc
	}
	switch s := f.s; {
	case s == "-" || s == "/dev/stdin":
		return data{} // the caller's input; handled by the caller
	case !f.known():
		return data{kind: dFile | dUnknown}
	}
	c := w.canon(f.s)
	if k := w.writtenKind(c); k != 0 {
		return data{kind: k}
	}
	if endlessDevices[c] {
		return data{kind: dFile | dEndless}
	}
	switch c {
	case "/etc/hostname", "/etc/machine-id", "/proc/sys/kernel/hostname", "/etc/hosts", "/proc/version":
		return data{kind: dEnv}
	}
	if projectSecretFile(c) {
		return data{kind: dSecret | dFile}
	}
	switch w.classifyPath(f).class {
	case pcSecret:
		return data{kind: dSecret}
	case pcNet:
		return data{kind: dDownload}
	}
	if strings.HasPrefix(c, "/proc/") && strings.HasSuffix(c, "/environ") {
		return data{kind: dEnv}
	}
	return data{kind: dFile}
}

// produceCall says what a program writes to its standard output.
func (w *walker) produceCall(argv []field, stdin data) data {
	if len(argv) == 0 {
		return data{}
	}
	var argData dataKind
	for _, a := range argv[1:] {
		argData |= a.data &^ dProc
	}
	name0 := argv[0]
	if !name0.known() {
		return data{kind: dUnknown | argData}
	}
	name := path.Base(name0.s)
	if inner := w.unwrap(name, argv); inner != nil {
		return w.produceCall(inner, stdin)
	}
	name = interpreterName(name)
	args := argv[1:]
	switch name {
	case "true", "false", ":", "test", "[", "sleep", "cd", "wait", "exit", "return", "unset", "shift", "mkdir", "touch":
		return literalData("")
	}
	switch {
	case name == "echo":
		var parts []string
		known, escapes := true, false
		for _, a := range args {
			if len(parts) == 0 {
				if strings.HasPrefix(a.s, "-") && strings.Trim(a.s, "-neE") == "" && a.s != "-" {
					escapes = escapes || strings.Contains(a.s, "e")
					continue
				}
			}
			if !a.known() {
				known = false
			}
			parts = append(parts, a.s)
		}
		text := strings.Join(parts, " ")
		if !known {
			k := argData
			if k == 0 {
				k = dUnknown
			}
			return data{kind: k | dLiteral}
		}
		if escapes && hasEncodedEscape(text) {
			return data{kind: dLiteral | dDecoded, text: ansiC(text) + "\n", hasText: true}
		}
		if escapes && strings.Contains(text, "\\") {
			return literalData(ansiC(text) + "\n")
		}
		return literalData(text + "\n")
	case name == "printf":
		return printfData(args, argData)
	case name == "yes":
		return data{kind: dLiteral | dEndless}
	case name == "dd":
		if len(argsOf(name, args).keyed("of")) > 0 {
			return data{} // it writes to its file
		}
		return data{kind: dFile | w.ddStream(argsOf(name, args), stdin)}
	case name == "openssl" && len(args) > 1 && args[0].s == "rand":
		// openssl rand [-hex|-base64] N: N random bytes.
		p := parseArgs(args[1:], spec("", "-out", "-rand", "-writerand", "-engine", "-provider").wholeWords())
		if len(p.values("-out")) > 0 {
			return data{}
		}
		if len(p.ops) > 0 {
			if n, ok := parseSize(p.ops[0].s, false); !ok || n > w.e.maxFileSize() {
				return data{kind: dDecoded | dHuge}
			}
		}
		return data{kind: dDecoded}
	case name == "seq":
		for _, a := range args {
			if n, err := strconv.ParseFloat(a.s, 64); err == nil && (math.IsInf(n, 0) || math.Abs(n) > 1e8) {
				return data{kind: dLiteral | dEndless} // seq inf, or as good as
			}
		}
		return data{kind: dLiteral}
	case name == "cat" || name == "tac" || name == "nl" || name == "head" || name == "tail" || name == "more" || name == "less":
		var out data
		files := 0
		// Options with a value are not files: head -c 10G reads its input.
		for _, a := range argsOf(name, args).ops {
			files++
			if a.s == "-" || a.s == "/dev/stdin" {
				out = out.union(stdin)
				continue
			}
			out = out.union(w.fileData(a))
		}
		if files == 0 {
			if name == "cat" {
				return stdin
			}
			out = data{kind: stdin.kind}
		}
		if name != "cat" {
			out.hasText = false
		}
		// head stops an endless stream, though maybe after more than a file
		// may hold; tail and tac never reach its end.
		switch {
		case name == "head" && out.kind&(dEndless|dHuge) != 0:
			if !w.headBound(args) {
				out.kind |= dHuge
			} else {
				out.kind &^= dHuge
			}
			out.kind &^= dEndless
		case name == "tail" || name == "tac":
			out.kind &^= dEndless | dHuge
		}
		return out
	case name == "pv":
		p := parseArgs(args, spec("LBiNswHdDma", "--rate-limit", "--buffer-size", "--interval", "--name", "--size", "--width", "--height", "--pidfile", "--delay-start", "--watchfd", "--remote", "--average-rate-window"))
		if len(p.ops) == 0 {
			return stdin
		}
		var out data
		for _, f := range p.ops {
			out = out.union(w.fileData(f))
		}
		return out
	case name == "tee" || name == "buffer":
		return stdin
	case name == "mktemp":
		if p := w.mktempPath(args); p != "" {
			return literalData(p + "\n")
		}
		return data{kind: dUnknown}
	case name == "ls" || name == "find" || name == "fd" || name == "fdfind" || name == "exa" || name == "eza":
		return data{kind: dUnknown, names: listedNames(name, args)}
	case (name == "grep" || name == "egrep" || name == "fgrep" || name == "rg") && grepListsFiles(name, args):
		// grep -rl PATTERN DIR lists files under DIR.
		return data{kind: dUnknown, names: grepListed(name, args)}
	case name == "git" && gitListsFiles(args):
		// git ls-files, git diff --name-only: paths in the repository.
		return data{kind: dUnknown, names: "*"}
	case (name == "dirname" || name == "basename") && len(args) == 1 && args[0].known() && len(argsOf(name, args).opts) == 0:
		if name == "dirname" {
			return literalData(path.Dir(args[0].s) + "\n")
		}
		return literalData(path.Base(args[0].s) + "\n")
	case name == "curl" || name == "wget":
		if writesToFile(name, args) {
			return data{}
		}
		return data{kind: dDownload}
	case downloaders[name]:
		return data{kind: dDownload | stdin.kind&dShell}
	case awkNames[name] && awkEndless(argsOf(name, args)):
		// awk 'BEGIN { while (1) print }' prints for ever.
		return data{kind: dUnknown | dEndless}
	case textTools[name] && (stdin.kind == 0 || stdin.kind == dFile) && argData&^dLiteral == 0 && knownOperands(name, args) && w.operandData(name, args) == 0:
		// Text of the workspace's files, rewritten (sed s/x/y/ tpl.sh): what
		// it says is that of the files, as a workspace script's is.
		return data{kind: dFile}
	case transformers[name]:
		k := stdin.kind | argData | w.operandData(name, args)
		if k == 0 {
			k = dUnknown
		}
		return data{kind: k&^dLiteral | dDecoded}
	case filters[name]:
		k := stdin.kind
		if k == 0 {
			k = dFile
		}
		switch name {
		case "sort", "uniq", "wc":
			k &^= dEndless | dHuge // they print once the input ends, or little
		}
		return data{kind: k | argData | w.operandData(name, args)}
	case envDumps[name]:
		return data{kind: dEnv}
	case shells[name] || interpreters[name]:
		return data{kind: dShell | argData}
	case name == "git":
		return data{kind: dFile}
	}
	return data{kind: dUnknown | argData}
}

// awkNames are the awks; awkLoop matches a loop that never ends by itself.
var (
	awkNames = set("awk", "gawk", "mawk", "nawk", "busybox-awk")
	awkLoop  = regexp.MustCompile(`while\s*\(\s*(1|"[^"]+")\s*\)|for\s*\(\s*;\s*;\s*\)`)
)

// awkEndless reports whether an awk program prints in a loop with no end.
func awkEndless(p parsed) bool {
	progs := p.values("-e", "--source")
	if len(progs) == 0 && len(p.ops) > 0 {
		progs = p.ops[:1]
	}
	for _, prog := range progs {
		code := stripStrings(prog.s)
		if awkLoop.MatchString(code) && strings.Contains(code, "print") && !strings.Contains(code, "exit") && !strings.Contains(code, "break") {
			return true
		}
	}
	return false
}

// operandData is what the files named among a filter's or transformer's
// operands carry that matters where it goes: credentials, the environment,
// downloads (base64 .env, grep KEY ~/.aws/credentials).
func (w *walker) operandData(name string, args []field) dataKind {
	var k dataKind
	for i, a := range argsOf(name, args).ops {
		if i >= 16 {
			break
		}
		if !a.known() || a.s == "" {
			continue
		}
		k |= w.fileData(a).kind & (dSecret | dEnv | dDownload | dEndless | dHuge)
	}
	return k
}

// knownOperands reports whether a program has operands, all of them known.
func knownOperands(name string, args []field) bool {
	ops := argsOf(name, args).ops
	for _, a := range ops {
		if !a.known() {
			return false
		}
	}
	return len(ops) > 0
}

// argsOf parses the arguments of the program name as it reads them.
func argsOf(name string, args []field) parsed {
	p, _ := lookup(name)
	return parseArgs(args, p.args)
}

// grepListsFiles reports whether grep prints only the names of files (-l).
func grepListsFiles(name string, args []field) bool {
	return argsOf(name, args).has("-l", "-L", "--files-with-matches", "--files-without-match", "--files")
}

// grepListed is a glob for the files grep -l lists: under its first directory
// operand, or the current one.
func grepListed(name string, args []field) string {
	p := argsOf(name, args)
	ops := p.ops
	if len(p.values("-e", "--regexp", "-f", "--file")) == 0 && !p.has("--files") && len(ops) > 0 {
		ops = ops[1:] // the pattern
	}
	if len(ops) == 0 {
		return "*"
	}
	if !ops[0].known() {
		return "*"
	}
	return strings.TrimSuffix(ops[0].s, "/") + "/*"
}

// gitListsFiles reports whether git prints paths of the repository: ls-files,
// diff --name-only, grep -l.
func gitListsFiles(args []field) bool {
	sub, rest, _ := gitSplit(args)
	switch sub {
	case "ls-files":
		return true
	case "diff", "show", "log", "grep":
		p := parseArgs(rest, gitSubArgs)
		return p.has("--name-only") || sub == "grep" && p.has("-l", "--files-with-matches")
	}
	return false
}

// hasEncodedEscape reports whether text holds escapes that spell characters by
// number (\x72, \162, \u0072): a way to hide what the text says.
func hasEncodedEscape(s string) bool {
	for i := 0; i+1 < len(s); i++ {
		if s[i] == '\\' {
			if c := s[i+1]; c == 'x' || c == 'u' || c == 'U' || c >= '0' && c <= '7' {
				return true
			}
			i++
		}
	}
	return false
}

// listedNames returns a glob standing for the paths ls or find prints: ls
// prints names relative to where it runs (unless -d or a pattern), find prints
// paths under the directory it searches.
func listedNames(name string, args []field) string {
	p := argsOf(name, args)
	dirOnly := name != "find" && p.has("-d", "--directory")
	var ops []field
	for k, a := range p.ops {
		if name == "find" && len(p.opts) > 0 && p.at[k] > p.opts[0].at || a.s == "(" || a.s == "!" {
			break
		}
		ops = append(ops, a)
	}
	if len(ops) == 0 || !ops[0].known() {
		return "*"
	}
	op := ops[0]
	switch {
	case name == "find" || name == "fd" || name == "fdfind":
		if name != "find" && len(ops) > 1 {
			op = ops[1]
		} else if name != "find" {
			return "*"
		}
		return strings.TrimSuffix(op.s, "/") + "/*"
	case dirOnly || op.glob:
		if op.glob {
			return op.pat
		}
		return op.s
	}
	return "*"
}

func printfData(args []field, argData dataKind) data {
	if len(args) == 0 {
		return data{}
	}
	i := 0
	if args[0].s == "-v" {
		return data{} // assigns a variable
	}
	if args[0].s == "--" {
		i++
	}
	if i >= len(args) {
		return data{}
	}
	format := args[i].s
	rest := args[i+1:]
	decoded := hasEncodedEscape(format)
	var sb strings.Builder
	known := args[i].known()
	for j := 0; j < len(format); j++ {
		if format[j] != '%' || j+1 >= len(format) {
			sb.WriteByte(format[j])
			continue
		}
		j++
		for j < len(format) && strings.IndexByte("-+ #0123456789.", format[j]) >= 0 {
			j++
		}
		if j >= len(format) {
			break
		}
		switch format[j] {
		case '%':
			sb.WriteByte('%')
		case 'b':
			decoded = true
			fallthrough
		default:
			if len(rest) > 0 {
				if !rest[0].known() {
					known = false
				}
				if strings.Contains(rest[0].s, "\\") && format[j] == 'b' {
					decoded = true
				}
				sb.WriteString(rest[0].s)
				rest = rest[1:]
			}
		}
	}
	for _, r := range rest {
		if !r.known() {
			known = false
		}
	}
	k := argData | dLiteral
	if decoded {
		k |= dDecoded
	}
	if !known {
		if argData == 0 {
			k |= dUnknown
		}
		return data{kind: k}
	}
	return data{kind: k, text: ansiC(sb.String()), hasText: true}
}

// writesToFile reports whether curl or wget saves what it fetches to a file
// rather than writing it to its standard output.
func writesToFile(name string, args []field) bool {
	for _, o := range argsOf(name, args).opts {
		switch {
		case name == "curl" && (o.name == "-o" || o.name == "--output"), name == "wget" && (o.name == "-O" || o.name == "--output-document"):
			if o.val.s != "-" {
				return true
			}
		case name == "curl" && (o.name == "-O" || o.name == "--remote-name" || o.name == "--remote-name-all" || o.name == "-J" || o.name == "--output-dir"):
			return true
		}
	}
	return false
}
