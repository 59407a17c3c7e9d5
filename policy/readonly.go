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
// function looks for in the arguments as the program reads them.
var checkedReaders = map[string]func(p parsed) bool{
	"sort": func(p parsed) bool { return !p.has("-o", "--output", "--compress-program") },
	"shuf": func(p parsed) bool { return !p.has("-o", "--output") },
	"uniq": func(p parsed) bool { return len(p.ops) <= 1 },
	"xxd":  func(p parsed) bool { return len(p.ops) <= 1 },
	"tee":  func(p parsed) bool { return len(p.ops) == 0 },
	"tree": func(p parsed) bool { return !p.has("-o") },
	"file": func(p parsed) bool { return !p.has("-C", "--compile") },
	"date": func(p parsed) bool {
		if p.has("-s", "--set") {
			return false
		}
		for _, o := range p.ops {
			if !strings.HasPrefix(o.s, "+") {
				return false
			}
		}
		return true
	},
	"rg":       func(p parsed) bool { return !p.has("--pre") },
	"kill":     func(p parsed) bool { return p.has("-l", "-L", "--list", "--table") },
	"hostname": func(p parsed) bool { return len(p.ops) == 0 && !p.has("-F", "--file", "-b", "--boot") },
	"find": func(p parsed) bool {
		return !p.has("-delete", "-exec", "-execdir", "-ok", "-okdir", "-fprint", "-fprint0", "-fprintf", "-fls")
	},
	"sed": func(p parsed) bool {
		if p.has("-i", "--in-place", "-f", "--file") {
			return false
		}
		// A script that writes (w, W) or runs (e) is not read-only; looking
		// for the letters at all is coarse, and errs only on that side.
		for _, f := range append(p.values("-e", "--expression"), p.ops...) {
			if strings.ContainsAny(f.s, "wWe") {
				return false
			}
		}
		return true
	},
	"awk": awkReads, "gawk": awkReads, "mawk": awkReads, "nawk": awkReads,
	"go": func(p parsed) bool {
		if len(p.ops) == 0 {
			return true
		}
		switch p.ops[0].s {
		case "version", "doc", "help":
			return true
		case "env":
			return !parseArgs(p.ops[1:], spec("")).has("-w", "-u")
		}
		return false
	},
}

func awkReads(p parsed) bool {
	if p.has("-f", "--file", "-i", "--include", "-l", "--load", "-E", "--exec") {
		return false
	}
	for _, f := range append(p.values("-e", "--source"), p.ops...) {
		if strings.ContainsAny(f.s, ">|") || strings.Contains(f.s, "system") || strings.Contains(f.s, "getline") {
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
func gitReads(gp, p parsed) bool {
	for _, g := range gp.opts {
		switch g.name {
		case "-C", "--no-pager", "-P", "--no-optional-locks", "--literal-pathspecs", "--no-replace-objects", "--bare", "--paginate", "-p":
		default:
			return false // -c, --git-dir, --work-tree, --exec-path ... may run or redirect
		}
	}
	if len(gp.ops) == 0 {
		return true
	}
	sub := gp.ops[0].s
	if p.has("--output", "-o") && sub != "branch" {
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
		return len(p.ops) > 0 && p.ops[0].s == "list"
	case "stash":
		return len(p.ops) > 0 && (p.ops[0].s == "list" || p.ops[0].s == "show")
	case "config":
		return p.has("--get", "--get-all", "--get-regexp", "-l", "--list", "--get-urlmatch", "--show-origin") ||
			len(p.ops) > 0 && (p.ops[0].s == "get" || p.ops[0].s == "list")
	case "remote":
		if len(p.ops) > 0 {
			return false
		}
		for _, o := range p.opts {
			if !contains(gitListing[sub], o.name) {
				return false
			}
		}
		return true
	case "branch", "tag":
		// branch --contains X, tag -l 'v*': a pattern is read with a
		// listing option; any other operand creates or deletes.
		if len(p.ops) > 0 && !p.has("--contains", "--no-contains", "--merged", "--no-merged", "--points-at", "-l", "--list", "--sort", "--format") {
			return false
		}
		for _, o := range p.opts {
			if !contains(gitListing[sub], o.name) {
				return false
			}
		}
		return true
	}
	return false
}

// readOnlyCall reports whether a known program called so surely changes
// nothing beyond its output.
func readOnlyCall(name string, c *call) bool {
	if pureReaders[name] {
		return true
	}
	args := c.args()
	if name == "git" {
		return gitReads(c.opts(), c.gitSub())
	}
	if f := checkedReaders[name]; f != nil {
		return f(c.opts())
	}
	// prog --version, prog --help: the program prints and exits.
	if len(args) == 1 && (args[0].s == "--version" || args[0].s == "--help") {
		_, known := programs[name]
		return known
	}
	return false
}
