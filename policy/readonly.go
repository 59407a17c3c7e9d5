package policy

import "strings"

// What the policy is sure changes nothing beyond a program's output. It feeds
// Verdict.ReadOnly, which callers use to skip work a changing command needs
// (a checkpoint, a review): a program belongs here only when none of its
// forms, with the options excluded, writes a file, runs another program that
// is not judged on its own, or changes the system. Redirections are judged
// apart (a program here writing through > is not read-only).

// pureReaders change nothing whatever their arguments.
var pureReaders = set(
	// files and text, read and printed
	"cat", "head", "tail", "wc", "nl", "tac", "od", "hexdump", "strings", "cmp", "diff", "diff3", "sdiff",
	"comm", "md5sum", "sha1sum", "sha224sum", "sha256sum", "sha384sum", "sha512sum", "shasum", "b2sum",
	"cksum", "sum", "base32", "base64", "basenc", "zcat", "bzcat", "xzcat", "zstdcat", "jq", "gron", "du",
	"cloc", "tokei", "scc", "stat", "lsattr", "getfacl", "readelf", "objdump", "nm", "size", "ldd",
	"cut", "tr", "paste", "join", "fold", "fmt", "column", "expand", "unexpand", "rev", "tsort", "colrm",
	"look", "grep", "fgrep", "egrep", "ag", "ack", "bc", "dc", "envsubst", "numfmt", "factor", "expr",
	// names and paths
	"ls", "ll", "la", "dir", "vdir", "exa", "eza", "lsd", "realpath", "readlink", "basename", "dirname",
	"pwd", "which", "whereis", "type",
	// printing
	"echo", "printf", "true", "false", ":", "sleep", "seq", "cal", "yes",
	"test", "[", "[[",
	// the system, printed
	"uname", "whoami", "id", "groups", "users", "who", "w", "uptime", "free", "nproc", "lscpu", "lsblk",
	"lsusb", "lspci", "lsmod", "lsof", "ps", "pgrep", "pidof", "df", "locale", "tty", "arch", "getconf",
	"printenv", "logname",
	// the shell's own state (variables, options, the working directory, jobs)
	"cd", "pushd", "popd", "dirs", "set", "shopt", "unset", "export", "readonly", "declare", "typeset",
	"local", "wait", "exit", "return", "shift", "break", "continue", "jobs", "umask", "times", "help",
	"caller", "getopts", "read", "mapfile", "readarray", "let", "hash", "alias", "unalias", "ulimit",
	"enable", "compgen", "complete", "compopt", "fc",
	// wrappers: what they run is an invocation of its own, judged apart
	"command", "builtin", "exec", "time", "timeout", "nice", "stdbuf", "xargs", "env", "ionice",
)

// checkedReaders change nothing unless given one of the arguments their
// function names.
var checkedReaders = map[string]func(args []field) bool{
	"sort": func(a []field) bool { return !anyOpt(a, "-o", "--output", "--compress-program") },
	"shuf": func(a []field) bool { return !anyOpt(a, "-o", "--output") },
	"uniq": func(a []field) bool { return operands(a) <= 1 },
	"xxd":  func(a []field) bool { return operands(a) <= 1 },
	"tee":  func(a []field) bool { return operands(a) == 0 },
	"tree": func(a []field) bool { return !anyOpt(a, "-o") },
	"file": func(a []field) bool { return !anyOpt(a, "-C", "--compile") },
	"date": func(a []field) bool { return !anyOpt(a, "-s", "--set") && allOperands(a, "+") },
	"rg":   func(a []field) bool { return !anyOpt(a, "--pre") },
	"kill": func(a []field) bool {
		return len(a) > 0 && (a[0].s == "-l" || a[0].s == "-L" || a[0].s == "--list" || a[0].s == "--table")
	},
	"hostname": func(a []field) bool {
		return operands(a) == 0 && !anyOpt(a, "-F", "--file", "-b", "--boot")
	},
	"find": func(a []field) bool {
		return !anyOpt(a, "-delete", "-exec", "-execdir", "-ok", "-okdir", "-fprint", "-fprint0", "-fprintf", "-fls")
	},
	"sed": func(a []field) bool {
		if anyOpt(a, "-i", "--in-place", "-f", "--file") {
			return false
		}
		// A script that writes (w, W) or runs (e) is not read-only; looking
		// for the letters at all is coarse, and errs only on that side.
		for _, f := range a {
			if !isOpt(f.s) && strings.ContainsAny(f.s, "wWe") {
				return false
			}
		}
		return true
	},
	"awk": awkReads, "gawk": awkReads, "mawk": awkReads, "nawk": awkReads,
	"git": gitReads,
	"go": func(a []field) bool {
		if len(a) == 0 {
			return true
		}
		switch a[0].s {
		case "version", "doc", "help":
			return true
		case "env":
			return !anyOpt(a[1:], "-w", "-u")
		}
		return false
	},
}

func awkReads(a []field) bool {
	if anyOpt(a, "-f", "--file", "-i", "--include", "-l", "--load", "-E", "--exec") {
		return false
	}
	for _, f := range a {
		if !isOpt(f.s) && strings.ContainsAny(f.s, ">|") || strings.Contains(f.s, "system") || strings.Contains(f.s, "getline") {
			return false
		}
	}
	return true
}

var gitListing = map[string][]string{
	"branch":   {"-a", "--all", "-r", "--remotes", "-l", "--list", "-v", "-vv", "--verbose", "--show-current", "--contains", "--no-contains", "--merged", "--no-merged", "--points-at", "--sort", "--format", "--color", "--no-color", "--column", "--no-column"},
	"tag":      {"-l", "--list", "-n", "--contains", "--no-contains", "--merged", "--no-merged", "--points-at", "--sort", "--format", "--color", "--column", "--no-column"},
	"remote":   {"-v", "--verbose"},
	"worktree": {},
	"stash":    {},
	"config":   {},
}

// gitReads reports whether a git command only reads: a read-only subcommand,
// or a listing form of one that can also change things.
func gitReads(a []field) bool {
	globals, rest := gitSplit(a)
	for _, g := range globals {
		switch g.name {
		case "-C", "--no-pager", "-P", "--no-optional-locks", "--literal-pathspecs", "--no-replace-objects", "--bare", "--paginate", "-p":
		default:
			return false // -c, --git-dir, --work-tree, --exec-path ... may run or redirect
		}
	}
	if len(rest) == 0 {
		return true
	}
	sub, args := rest[0].s, rest[1:]
	if anyOpt(args, "--output", "-o") && sub != "branch" {
		return false
	}
	switch sub {
	case "status", "diff", "log", "show", "blame", "annotate", "shortlog", "describe", "rev-parse", "rev-list",
		"ls-files", "ls-tree", "cat-file", "grep", "whatchanged", "diff-tree", "diff-files", "diff-index",
		"for-each-ref", "show-ref", "show-branch", "name-rev", "merge-base", "count-objects", "verify-commit",
		"verify-tag", "check-ignore", "check-attr", "check-ref-format", "check-mailmap", "var", "help", "version",
		"range-diff", "cherry":
		return true
	case "worktree":
		return len(args) > 0 && args[0].s == "list"
	case "stash":
		return len(args) > 0 && (args[0].s == "list" || args[0].s == "show")
	case "config":
		return anyOpt(args, "--get", "--get-all", "--get-regexp", "-l", "--list", "--get-urlmatch", "--show-origin") ||
			len(args) > 0 && (args[0].s == "get" || args[0].s == "list")
	case "remote":
		return len(args) == 0 || len(args) == 1 && isOpt(args[0].s) && anyOpt(args, gitListing[sub]...)
	case "branch", "tag":
		allowed := gitListing[sub]
		for _, f := range args {
			if !isOpt(f.s) {
				// branch --contains X, tag -l 'v*': a value of a listing
				// option or a pattern; any other operand creates or deletes.
				if !anyOpt(args, "--contains", "--no-contains", "--merged", "--no-merged", "--points-at", "-l", "--list", "--sort", "--format") {
					return false
				}
				continue
			}
			name, _, _ := strings.Cut(f.s, "=")
			if !contains(allowed, name) {
				return false
			}
		}
		return true
	}
	return false
}

// anyOpt reports whether any argument before "--" is one of the options, as
// -x alone, a short cluster holding x (for one-letter options), --long or
// --long=value.
func anyOpt(args []field, names ...string) bool {
	for _, a := range args {
		s := a.s
		if s == "--" {
			return false
		}
		if !isOpt(s) {
			continue
		}
		for _, n := range names {
			switch {
			case s == n, strings.HasPrefix(n, "--") && strings.HasPrefix(s, n+"="):
				return true
			case len(n) == 2 && !strings.HasPrefix(s, "--") && len(s) > 2 && strings.IndexByte(s[1:], n[1]) >= 0:
				return true
			}
		}
	}
	return false
}

// operands counts the arguments that are not options.
func operands(args []field) int {
	n := 0
	for _, a := range args {
		if !isOpt(a.s) {
			n++
		}
	}
	return n
}

// allOperands reports whether every operand starts with prefix.
func allOperands(args []field, prefix string) bool {
	for _, a := range args {
		if !isOpt(a.s) && !strings.HasPrefix(a.s, prefix) {
			return false
		}
	}
	return true
}

// readOnlyCall reports whether a known program called with args surely
// changes nothing beyond its output.
func readOnlyCall(name string, args []field) bool {
	if pureReaders[name] {
		return true
	}
	if f := checkedReaders[name]; f != nil {
		return f(args)
	}
	// prog --version, prog --help: the program prints and exits.
	if len(args) == 1 && (args[0].s == "--version" || args[0].s == "--help") {
		_, known := programs[name]
		return known
	}
	return false
}
