package policy

import (
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"strings"
)

// Files a command writes and then has a build tool run: a Makefile's recipes,
// package.json's scripts, a justfile, tests or build scripts in a language the
// tool executes. The build tool is allowed; what the command wrote for it to
// run is checked as if it were run directly.

func registerWritten() {
	// also adds a check that runs when the command has written files.
	also := func(names string, fn func(w *walker, c *call)) {
		addCheck(names, pDev, func(w *walker, c *call) {
			if len(w.scripts) > 0 {
				fn(w, c)
			}
		})
	}
	addCheck("make gmake", pDev, checkWrittenMakefile)
	addCheck("make gmake just task mage npm pnpm yarn bun", pDev, checkDeployTarget)
	also("just", checkWrittenJustfile)
	also("npm pnpm yarn bun", checkWrittenPackageScripts)
	also("pytest py.test tox nox", func(w *walker, c *call) { w.writtenCode(c, ".py") })
	also("go", func(w *walker, c *call) {
		if a := c.args(); len(a) > 0 && (a[0].s == "test" || a[0].s == "run" || a[0].s == "generate") {
			w.writtenCode(c, ".go")
		}
		if a := c.args(); len(a) > 0 && a[0].s == "generate" {
			// go generate runs the //go:generate lines of the Go files.
			for file, text := range w.scripts {
				if strings.HasSuffix(file, ".go") {
					for _, cmd := range goGenerate(text) {
						w.add(Allow, ruleRunScript, "go generate runs the //go:generate lines of "+file+", written earlier in this command; they are checked", c.part)
						w.script(cmd, c.part)
					}
				}
			}
		}
	})
	addCheck("go", pDev, func(w *walker, c *call) {
		if a := c.args(); len(a) > 0 && a[0].s == "generate" && len(w.tampered) > 0 {
			checkTamperedFamily(w, c, "go-generate")
		}
	})
	also("cargo", func(w *walker, c *call) { w.writtenCode(c, ".rs") })
	also("jest vitest mocha ava tap node", func(w *walker, c *call) { w.writtenCode(c, ".js", ".mjs", ".cjs", ".ts", ".mts", ".cts") })
	also("rspec rake", func(w *walker, c *call) { w.writtenCode(c, ".rb", "Rakefile") })
	also("gradle gradlew mvn mvnw", func(w *walker, c *call) { w.writtenCode(c, ".gradle", ".kts", "pom.xml") })
	for name := range buildTools {
		if _, known := programs[name]; !known {
			continue // not made known here: strict mode still asks about it
		}
		addCheck(name, pDev, func(w *walker, c *call) {
			if len(w.tampered) > 0 {
				checkTampered(w, c)
			}
		})
	}
}

// addCheck makes fn run after the checks of the programs named; a program the
// policy does not know yet gets base as its defaults.
func addCheck(names string, base program, fn func(w *walker, c *call)) {
	for _, n := range strings.Fields(names) {
		p, ok := programs[n]
		if !ok {
			p = base
		}
		prev := p.check
		p.check = func(w *walker, c *call) {
			if prev != nil {
				prev(w, c)
			}
			fn(w, c)
		}
		programs[n] = p
	}
}

// writtenText returns the text of a file written earlier in the command, by its
// name relative to the current directory.
func (w *walker) writtenText(name string) (string, bool) {
	text, ok := w.scripts[w.canon(name)]
	return text, ok
}

// writtenCode scans the code files written earlier in the command that a test
// runner or build tool would execute, by file name or extension.
func (w *walker) writtenCode(c *call, suffixes ...string) {
	n := 0
	for file, text := range w.scripts {
		for _, s := range suffixes {
			if strings.HasSuffix(file, s) {
				w.scanCode(c, text, c.name+" (running "+path.Base(file)+")")
				n++
				break
			}
		}
		if n >= 8 {
			return
		}
	}
}

func checkWrittenMakefile(w *walker, c *call) {
	p := parseArgs(c.args(), spec("fCIWo", "--file", "--makefile", "--directory", "--include-dir", "--what-if", "--old-file", "--assume-old", "--new-file", "--assume-new"))
	dir := ""
	for _, d := range p.values("-C", "--directory") {
		dir = d.s + "/"
	}
	files := p.values("-f", "--file", "--makefile")
	if len(files) == 0 {
		files = []field{lit("GNUmakefile"), lit("makefile"), lit("Makefile")}
	}
	for _, f := range files {
		if !f.known() {
			continue
		}
		text, ok := w.writtenText(dir + f.s)
		if f.s == "-" || f.s == "/dev/stdin" {
			text, ok = c.stdin.text, c.stdin.hasText
		}
		if !ok {
			continue
		}
		w.add(Allow, ruleRunScript, c.name+" runs the recipes of "+f.s+", written earlier in this command; they are checked", c.part)
		for _, line := range recipeLines(text, true) {
			w.script(strings.ReplaceAll(line, "$$", "$"), c.part)
		}
		return
	}
}

func checkWrittenJustfile(w *walker, c *call) {
	for _, name := range []string{"justfile", "Justfile", ".justfile"} {
		if text, ok := w.writtenText(name); ok {
			w.add(Allow, ruleRunScript, c.name+" runs the recipes of "+name+", written earlier in this command; they are checked", c.part)
			for _, line := range recipeLines(text, false) {
				w.script(line, c.part)
			}
			return
		}
	}
}

// recipeLines returns the indented command lines of a Makefile (tab) or a
// justfile (any indent), continuation lines joined, recipe prefixes (@ - +)
// removed.
func recipeLines(text string, tabOnly bool) []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.Split(text, "\n") {
		indented := strings.HasPrefix(line, "\t") || !tabOnly && strings.HasPrefix(line, " ")
		if cur.Len() == 0 && !indented {
			continue
		}
		s := strings.TrimSpace(line)
		if cont, ok := strings.CutSuffix(s, "\\"); ok {
			cur.WriteString(cont + " ")
			continue
		}
		cur.WriteString(s)
		r := strings.TrimLeft(cur.String(), "@-+ ")
		cur.Reset()
		if r != "" && !strings.HasPrefix(r, "#") {
			out = append(out, r)
		}
		if len(out) >= 64 {
			break
		}
	}
	return out
}

// checkWrittenPackageScripts: npm test, yarn build, pnpm run x run the scripts
// of package.json (and their pre and post scripts).
func checkWrittenPackageScripts(w *walker, c *call) {
	text, ok := w.writtenText("package.json")
	if !ok {
		return
	}
	words := fieldStrings(c.opts().ops)
	if len(words) == 0 {
		words = []string{"install"}
	}
	name := words[0]
	switch name {
	case "run", "run-script", "rum", "urn":
		if len(words) < 2 {
			return
		}
		name = words[1]
	case "t", "tst":
		name = "test"
	case "i", "add", "ci":
		name = "install"
	}
	var pkg struct {
		Scripts map[string]string `json:"scripts"`
	}
	if err := json.Unmarshal([]byte(text), &pkg); err != nil {
		return
	}
	names := []string{"pre" + name, name, "post" + name}
	if name == "install" {
		names = []string{"preinstall", "install", "postinstall", "prepare"}
	}
	for _, n := range names {
		if s, ok := pkg.Scripts[n]; ok {
			w.add(Allow, ruleRunScript, c.name+" runs the script "+n+" of package.json, written earlier in this command; it is checked", c.part)
			w.script(s, c.part)
		}
	}
}

// deployTarget matches the names of build targets and package scripts that, by
// convention, deploy or release the project: they change remote systems.
var deployTarget = regexp.MustCompile(`(?i)^(deploy|release|publish|ship|rollout|upload|promote)([:_.-].*)?$`)

// checkDeployTarget: make deploy, npm run release, just publish.
func checkDeployTarget(w *walker, c *call) {
	var words []string
	for _, a := range c.opts().ops {
		if (c.name == "make" || c.name == "gmake") && strings.Contains(a.s, "=") {
			continue // VAR=value
		}
		words = append(words, a.s)
	}
	if len(words) == 0 {
		return
	}
	targets := words
	switch c.name {
	case "npm", "pnpm", "yarn", "bun":
		switch words[0] {
		case "run", "run-script", "rum", "urn":
			if len(words) < 2 {
				return
			}
			targets = words[1:2]
		default:
			if c.name == "npm" || c.name == "bun" {
				return
			}
			targets = words[:1] // yarn deploy, pnpm deploy
			if c.name == "pnpm" && words[0] == "deploy" {
				return // pnpm deploy copies a workspace package into a directory
			}
		}
	}
	for _, t := range targets {
		if deployTarget.MatchString(t) {
			w.add(Confirm, ruleDeploy, fmt.Sprintf("%s %s runs the project's %s step, which by convention changes remote systems; approval is needed", c.name, t, t), c.part)
			return
		}
	}
}

// Build files: what a build tool runs is written in them, so a command that
// changes one plants commands that a later, innocent-looking build runs.
// buildFiles maps a file's name to the family of tools that run it.
var buildFiles = map[string]string{
	"Makefile": "make", "makefile": "make", "GNUmakefile": "make",
	"package.json": "npm", ".npmrc": "npm", ".yarnrc": "npm", ".yarnrc.yml": "npm", "bunfig.toml": "npm",
	"justfile": "just", "Justfile": "just", ".justfile": "just",
	"Taskfile.yml": "task", "Taskfile.yaml": "task",
	"pyproject.toml": "python", "setup.py": "python", "setup.cfg": "python", "tox.ini": "python",
	"noxfile.py": "python", "conftest.py": "python", "pytest.ini": "python",
	"Cargo.toml": "cargo", "build.rs": "cargo", ".cargo/config.toml": "cargo",
	"build.gradle": "gradle", "build.gradle.kts": "gradle", "settings.gradle": "gradle", "settings.gradle.kts": "gradle",
	"pom.xml": "mvn", "Rakefile": "rake", "CMakeLists.txt": "cmake", ".pre-commit-config.yaml": "pre-commit",
	"deno.json": "deno", "deno.jsonc": "deno", "magefile.go": "mage",
	"package.yaml": "npm", "package.json5": "npm", "composer.json": "composer",
	"lefthook.yml": "lefthook", "lefthook.yaml": "lefthook", ".lefthook.yml": "lefthook", "lefthook-local.yml": "lefthook",
	"Procfile": "procfile", "Procfile.dev": "procfile", "mise.toml": "mise", ".mise.toml": "mise",
	"devbox.json": "devbox", "turbo.json": "turbo", "nx.json": "nx", "project.json": "nx",
	"gulpfile.js": "npm", "Gruntfile.js": "npm", "Jakefile": "npm", "Earthfile": "earthly", "meson.build": "meson",
	"SConstruct": "scons", "build.xml": "ant", "Gemfile": "rake", "Guardfile": "rake",
}

// buildTools maps a build tool to its family.
var buildTools = map[string]string{
	"make": "make", "gmake": "make", "npm": "npm", "pnpm": "npm", "yarn": "npm", "bun": "npm", "npx": "npm",
	"just": "just", "task": "task", "pytest": "python", "py.test": "python", "tox": "python", "nox": "python",
	"pip": "python", "pip3": "python", "uv": "python", "poetry": "python", "hatch": "python", "pdm": "python",
	"cargo": "cargo", "gradle": "gradle", "gradlew": "gradle", "mvn": "mvn", "mvnw": "mvn", "rake": "rake",
	"cmake": "cmake", "pre-commit": "pre-commit", "deno": "deno", "mage": "mage",
	"composer": "composer", "lefthook": "lefthook", "foreman": "procfile", "honcho": "procfile", "overmind": "procfile",
	"mise": "mise", "devbox": "devbox", "turbo": "turbo", "nx": "nx", "earthly": "earthly", "meson": "meson",
	"scons": "scons", "ant": "ant", "bundle": "rake", "git": "git",
}

// gitHooks are the names of the hooks git runs.
var gitHooks = set("applypatch-msg", "pre-applypatch", "post-applypatch", "pre-commit", "pre-merge-commit",
	"prepare-commit-msg", "commit-msg", "post-commit", "pre-rebase", "post-checkout", "post-merge", "pre-push",
	"pre-receive", "update", "proc-receive", "post-receive", "post-update", "reference-transaction", "push-to-checkout",
	"pre-auto-gc", "post-rewrite", "sendemail-validate", "fsmonitor-watchman", "p4-pre-submit", "post-index-change")

// buildFileOf returns the family of tools that run the file at canonical
// path c, or "" when it is not a build file.
func buildFileOf(c string) string {
	if strings.Contains(c, unknown) {
		return ""
	}
	if f, ok := buildFiles[path.Base(c)]; ok {
		return f
	}
	if strings.HasSuffix(c, ".mk") {
		return "make"
	}
	if strings.HasSuffix(c, ".go") {
		return "go-generate" // its //go:generate lines
	}
	// A git hook: in .git/hooks, or a hooks directory git may be pointed
	// at (husky's .husky, .githooks, any hooks/).
	if dir, base := path.Split(c); gitHooks[base] && (strings.HasSuffix(dir, "hooks/") || strings.HasSuffix(dir, ".husky/") || strings.HasSuffix(dir, ".husky/_/")) {
		return "git"
	}
	if strings.HasSuffix(c, "/.cargo/config.toml") || c == ".cargo/config.toml" {
		return "cargo"
	}
	return ""
}

// plantBuildFile checks, when a command writes known text into a build file,
// the commands that text makes a later build run — the pair is as dangerous
// as the payload, whether the build runs in this command or in a later one.
func (w *walker) plantBuildFile(c string, text string) {
	part := "the text written to " + c
	switch buildFileOf(c) {
	case "make":
		for _, line := range recipeLines(text, true) {
			w.plantedText(nil, strings.ReplaceAll(line, "$$", "$"))
		}
		// A recipe may follow its target on the same line (all: ; cmd).
		for _, line := range strings.Split(text, "\n") {
			if _, recipe, ok := strings.Cut(line, ";"); ok && strings.Contains(line, ":") && !strings.HasPrefix(line, "\t") {
				w.plantedText(nil, strings.ReplaceAll(recipe, "$$", "$"))
			}
		}
	case "just":
		for _, line := range recipeLines(text, false) {
			w.plantedText(nil, line)
		}
	case "go-generate":
		for _, cmd := range goGenerate(text) {
			w.plantedText(nil, cmd)
		}
	case "npm":
		var pkg struct {
			Scripts map[string]string `json:"scripts"`
		}
		if json.Unmarshal([]byte(text), &pkg) == nil {
			w.inSubshell(func() {
				for _, s := range pkg.Scripts {
					w.script(s, part)
				}
			})
			return
		}
		w.plantedText(nil, text)
		w.plantedSettings(c, text) // .npmrc, .yarnrc
	default:
		w.plantedText(nil, text)
		w.plantedSettings(c, text)
	}
}

// Keys of configuration files that name the program a tool runs its work
// through (npm's script-shell, cargo's runner), and those whose value is a
// command (tox's commands, a Taskfile's cmds, pre-commit's entry).
var (
	programKey = regexp.MustCompile(`(?i)(^|[._-])(shell|script-shell|runner|wrapper|rustc-wrapper|linker|editor|pager|node-options|yarnpath|onload-script|interpreter)$`)
	commandKey = regexp.MustCompile(`(?i)(^|[._-])(commands?|cmds?|run|script|scripts|entry|test|build|exec|pre|post|before|after|setup|install|default)$`)
)

// plantedSettings checks the settings written into a build or tool file
// (TOML, INI, YAML, .npmrc): a key that names the program a tool runs through
// needs approval, since every later run of the tool — the host's too — goes
// through it; the value of a key that holds a command, and every list item,
// is checked as the command it is.
func (w *walker) plantedSettings(file, text string) {
	part := "the text written to " + file
	n := 0
	for _, line := range strings.Split(text, "\n") {
		if n >= 64 {
			return
		}
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == '[' || line[0] == ';' {
			continue
		}
		key, val := "", ""
		switch {
		case strings.HasPrefix(line, "- "):
			val = strings.TrimPrefix(line, "- ")
			if k, v, ok := cutKey(val); ok {
				key, val = k, v
			}
		default:
			k, v, ok := cutKey(line)
			if !ok {
				continue
			}
			key, val = k, v
		}
		val = strings.Trim(strings.TrimSpace(val), "'\"")
		if val == "" {
			continue
		}
		n++
		switch {
		case key != "" && programKey.MatchString(key):
			w.addS(Confirm, rulePackageConfig, fmt.Sprintf("the text written to %s sets %s, the program a tool runs its work through, at every later run; approval is needed", file, key), part)
			w.programString(lit(val), part, file+" "+key)
		case key == "" || commandKey.MatchString(key):
			w.scriptQuiet(val, part)
		}
	}
}

// cutKey splits a "key: value" or "key = value" line.
func cutKey(line string) (key, val string, ok bool) {
	i := strings.IndexAny(line, ":=")
	if i <= 0 {
		return "", "", false
	}
	key = strings.TrimSpace(line[:i])
	if strings.ContainsAny(key, " \t\"'$") {
		return "", "", false
	}
	return key, line[i+1:], true
}

// plantedText checks text put into a build file as the commands it may
// become: the whole of it as a script, and every double-quoted string in it
// (a package.json script, a TOML or YAML value).
func (w *walker) plantedText(c *call, text string) {
	part := text
	if c != nil {
		part = c.part
	}
	// Configuration (TOML, INI, YAML, JSON) is not a script as a whole; its
	// strings and settings are looked at.
	if !configText(text) {
		w.scriptQuiet(text, part)
	}
	for n, rest := 0, text; n < 16; n++ {
		i := strings.IndexByte(rest, '"')
		if i < 0 {
			break
		}
		j := strings.IndexByte(rest[i+1:], '"')
		if j < 0 {
			break
		}
		w.scriptQuiet(rest[i+1:i+1+j], part)
		rest = rest[i+j+2:]
	}
}

// goGenerate returns the commands of the //go:generate lines of Go source.
func goGenerate(text string) []string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		if cmd, ok := strings.CutPrefix(strings.TrimSpace(line), "//go:generate "); ok && len(out) < 64 {
			out = append(out, cmd)
		}
	}
	return out
}

// configText reports whether text reads as configuration rather than a
// script: a [section] line, or "key: value" and "key = value" lines and list
// items only.
func configText(text string) bool {
	lines, conf := 0, 0
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		lines++
		if line[0] == '[' && strings.HasSuffix(line, "]") {
			return true
		}
		if _, _, ok := cutKey(line); ok && !strings.Contains(line, "=(") || strings.HasPrefix(line, "- ") || line[0] == '{' || line[0] == '}' {
			conf++
		}
	}
	return lines > 0 && conf == lines
}

// checkTampered makes a build tool need approval when the command changed,
// in a way the policy could not follow, a file the tool runs.
func checkTampered(w *walker, c *call) {
	checkTamperedFamily(w, c, buildTools[c.name])
}

func checkTamperedFamily(w *walker, c *call, fam string) {
	for f := range w.tampered {
		if buildFileOf(f) != fam {
			continue
		}
		if _, known := w.scripts[f]; known {
			continue // its text is known and was checked
		}
		w.add(Confirm, ruleBuildFileChanged, fmt.Sprintf("%s runs what %s says, and this command changed %s in a way the policy cannot follow; change the build file in one command, read it, then run %s", c.name, f, f, c.name), c.part)
		return
	}
}

// packageScript checks a script a command sets in package.json (npm pkg set
// scripts.test=..., npm set-script): it runs at the next npm test, in this
// command or a later one, so it is checked now.
func (w *walker) packageScript(c *call, name string, val field) {
	if !val.known() {
		w.add(Confirm, rulePackageScript, fmt.Sprintf("%s sets the script %s of package.json to a value computed at run time; a later npm run would run it — write it literally", c.name, name), c.part)
		return
	}
	w.add(Allow, rulePackageScript, fmt.Sprintf("%s sets the script %s of package.json; what it runs is checked", c.name, name), c.part)
	w.inSubshell(func() { w.script(val.s, c.part) })
}

// npmPkgSet checks npm pkg set KEY=VALUE ... for keys that are scripts.
func (w *walker) npmPkgSet(c *call, args []field) {
	p := parseArgs(args, spec("w", "--workspace"))
	asJSON := p.has("--json")
	for _, a := range p.ops {
		key, val, ok := strings.Cut(a.s, "=")
		if !ok {
			continue
		}
		v := a
		v.s, v.raw = val, ""
		k := strings.ToLower(key)
		switch {
		case k == "scripts" || k == "":
			if !asJSON {
				continue
			}
			var m map[string]any
			if !v.known() || json.Unmarshal([]byte(v.s), &m) != nil {
				w.packageScript(c, key, field{s: unknown, raw: a.raw})
				continue
			}
			if k == "" {
				m, _ = m["scripts"].(map[string]any)
			}
			for n, s := range m {
				if str, ok := s.(string); ok {
					w.packageScript(c, n, lit(str))
				}
			}
		case strings.HasPrefix(k, "scripts.") || strings.HasPrefix(k, "scripts["):
			name := strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(key, "scripts."), "scripts["), "]")
			if asJSON && v.known() {
				var str string
				if json.Unmarshal([]byte(v.s), &str) == nil {
					v.s = str
				}
			}
			w.packageScript(c, name, v)
		case k == "config.script-shell" || k == "bin" || strings.HasPrefix(k, "bin.") || strings.HasPrefix(k, "bin["):
			w.add(Confirm, rulePackageScript, fmt.Sprintf("%s sets %s of package.json, which names a program npm runs; approval is needed", c.name, key), c.part)
		}
	}
}
