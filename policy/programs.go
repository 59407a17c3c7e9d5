package policy

import (
	"sort"
	"strings"
	"sync"
)

// program is what the default policy knows about one program: the decision
// when nothing about the call matters, and a check that looks at the call.
type program struct {
	decision Decision
	rule     ruleID
	reason   string // may hold one %s for the program's name
	check    func(w *walker, c *call)
	// exempt programs do not read their arguments as files (echo, ls, stat),
	// so naming a credential file is not reading it.
	exempt bool
}

var programs = map[string]program{}

// reg registers what the policy knows about programs. A program registered
// twice is a bug (the second description would silently replace the first):
// it panics at start-up, and every test fails.
func reg(names string, p program) {
	for _, n := range strings.Fields(names) {
		if _, dup := programs[n]; dup {
			panic("policy: program " + n + " registered twice")
		}
		programs[n] = p
	}
}

var (
	namesOnce sync.Once
	names     []string
)

// programNames lists every program the policy knows, for matching globs.
func programNames() []string {
	namesOnce.Do(func() {
		for n := range programs {
			names = append(names, n)
		}
		sort.Strings(names)
	})
	return names
}

// Default decisions shared by many programs.
var (
	pRead  = program{decision: Allow, rule: ruleReadOnly, reason: "%s only reads files and prints what it finds"}
	pText  = program{decision: Allow, rule: ruleText, reason: "%s processes text and prints the result"}
	pInfo  = program{decision: Allow, rule: ruleInfo, reason: "%s prints information about the system", exempt: true}
	pDev   = program{decision: Allow, rule: ruleBuild, reason: "%s builds, checks or tests the project"}
	pEdit  = program{decision: Allow, rule: ruleWorkspaceChange, reason: "%s changes files in the workspace"}
	pShell = program{decision: Allow, rule: ruleShellBuiltin, reason: "%s only changes the shell's own state", exempt: true}
)

func init() {
	reg("cat head tail wc nl tac od hexdump xxd strings file cmp diff diff3 sdiff comm md5sum sha1sum "+
		"sha224sum sha256sum sha384sum sha512sum shasum b2sum cksum sum base32 zcat bzcat xzcat zstdcat zless zmore "+
		"view bat batcat jq yq xq gron tokei scc lsattr getfacl readelf objdump nm size ldd "+
		"pdftotext exiftool identify ffprobe mediainfo", pRead)
	reg("ls ll la dir vdir exa eza lsd realpath readlink basename dirname pwd which whereis type stat [[ "+
		"echo true false : sleep yes seq date cal expr factor numfmt", program{decision: Allow, rule: ruleReadOnly, reason: "%s only prints", exempt: true})
	reg("du tree", program{decision: Allow, rule: ruleReadOnly, reason: "%s lists files and their sizes", exempt: true})
	reg("uniq cut tr paste join fold fmt column expand unexpand rev tsort shuf split csplit iconv dos2unix "+
		"unix2dos colrm look base64 basenc bc envsubst", pText)
	reg("uname whoami id groups users who w hostnamectl uptime free nproc lscpu lsblk lsusb lspci "+
		"lsmod lsof ps pgrep pidof top htop btop vmstat iostat mpstat sar df locale localectl tty arch getconf "+
		"timedatectl ulimit logname last lastlog dmesg journalctl ss netstat ifconfig route arp "+
		"nvidia-smi sensors", pInfo)
	reg("dirs wait exit return shift break continue jobs fg bg disown umask times help caller "+
		"complete compgen compopt let logout suspend", pShell)
	reg("cmake ninja meson bazel bazelisk buck buck2 pants scons waf just task mage go gofmt goimports "+
		"golangci-lint staticcheck govulncheck gopls dlv rustc rustfmt cargo-clippy clippy-driver gcc g++ cc c++ "+
		"clang clang++ clang-format clang-tidy ld lld ar as ranlib strip javac java jar kotlinc kotlin scalac sbt "+
		"ant swift swiftc xcodebuild xcrun zig nim ghc cabal stack mix elixir erlc erl rebar3 "+
		"dart flutter tsc jest vitest mocha ava tap karma eslint prettier biome oxlint stylelint webpack vite rollup "+
		"esbuild swc turbo nx lerna pytest py.test tox nox coverage ruff black isort flake8 pylint mypy pyright "+
		"bandit pyflakes pycodestyle autopep8 yapf pydocstyle rake rspec rubocop phpunit phpstan psalm shellcheck "+
		"shfmt hadolint yamllint markdownlint actionlint tflint protoc buf ctest gtest "+
		"pre-commit hugo jekyll mkdocs sphinx-build pandoc latexmk pdflatex xelatex lualatex "+
		"bibtex dot plantuml mermaid convert magick ffmpeg cloc ctags cscope", pDev)
	reg("7z 7za 7zr rar unrar mktemp", pEdit)
	registerChecks()
}

// Option parsing helpers. Programs disagree on syntax; these cover the common
// getopt style: short options cluster (-rf), long options take --opt=value
// or --opt value, and "--" ends the options.

// isOpt reports whether an argument is an option rather than an operand.
func isOpt(s string) bool { return len(s) > 1 && s[0] == '-' }

// hasShort reports whether a short-option cluster such as -rf holds ch.
func hasShort(s string, chars string) bool {
	if len(s) < 2 || s[0] != '-' || s[1] == '-' {
		return false
	}
	return strings.ContainsAny(s[1:], chars)
}

// flag reports whether any option before "--" is one of the short option
// letters in short (in a cluster) or one of the long options.
func (c *call) flag(short string, long ...string) bool {
	for _, a := range c.args() {
		s := a.s
		if s == "--" {
			return false
		}
		if short != "" && hasShort(s, short) {
			return true
		}
		for _, l := range long {
			if s == l || strings.HasPrefix(s, l+"=") {
				return true
			}
		}
	}
	return false
}

// optSpec says which options of a program take a value.
type optSpec struct {
	short string          // short options that take a value, e.g. "otC"
	long  map[string]bool // long options that take a value (without "=")
	// first makes the first operand end the options, as for programs that
	// run a command given after their own options (ssh HOST CMD -x).
	first bool
}

// firstOperand returns sp with options ending at the first operand.
func (sp optSpec) firstOperand() optSpec {
	sp.first = true
	return sp
}

func spec(short string, long ...string) optSpec {
	return optSpec{short: short, long: set(long...)}
}

// parsed is a program's arguments split into options and operands.
type parsed struct {
	opts []opt
	ops  []field
}

type opt struct {
	name string // "-o", "--output"; a short cluster gives one opt per letter
	val  field  // the value, for options that take one
	has  bool
}

// parseArgs splits args by the getopt conventions and sp.
func parseArgs(args []field, sp optSpec) parsed {
	var p parsed
	for i := 0; i < len(args); i++ {
		a := args[i]
		s := a.s
		switch {
		case s == "--":
			p.ops = append(p.ops, args[i+1:]...)
			return p
		case strings.HasPrefix(s, "--"):
			name, val, hasVal := strings.Cut(s, "=")
			o := opt{name: name}
			if hasVal {
				o.val, o.has = a, true
				o.val.s = val
				o.val.raw = ""
			} else if sp.long[name] && i+1 < len(args) {
				i++
				o.val, o.has = args[i], true
			}
			p.opts = append(p.opts, o)
		case isOpt(s):
			for j := 1; j < len(s); j++ {
				ch := s[j]
				o := opt{name: "-" + string(ch)}
				if strings.IndexByte(sp.short, ch) >= 0 {
					if j+1 < len(s) {
						o.val, o.has = a, true
						o.val.s = s[j+1:]
						o.val.raw = ""
					} else if i+1 < len(args) {
						i++
						o.val, o.has = args[i], true
					}
					p.opts = append(p.opts, o)
					break
				}
				p.opts = append(p.opts, o)
			}
		default:
			if sp.first {
				p.ops = append(p.ops, args[i:]...)
				return p
			}
			p.ops = append(p.ops, a)
		}
	}
	return p
}

// has reports whether any of the options was given.
func (p parsed) has(names ...string) bool {
	for _, o := range p.opts {
		for _, n := range names {
			if o.name == n {
				return true
			}
		}
	}
	return false
}

// values returns the values of the options.
func (p parsed) values(names ...string) []field {
	var out []field
	for _, o := range p.opts {
		if !o.has {
			continue
		}
		for _, n := range names {
			if o.name == n {
				out = append(out, o.val)
			}
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
