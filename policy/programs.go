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
	// args says how the program reads its arguments (see parseArgs).
	args optSpec
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
		p.args.index()
		programs[n] = p
	}
}

// readsArgs says how the programs named, registered already, read their
// arguments.
func readsArgs(names string, sp optSpec) {
	for _, n := range strings.Fields(names) {
		p, ok := programs[n]
		if !ok {
			panic("policy: readsArgs of " + n + ", which is not registered")
		}
		p.args = sp.ready()
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
		"view bat batcat jq xq gron tokei scc lsattr getfacl readelf objdump nm size ldd "+
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

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
