package policy

import (
	"fmt"
	"path"
	"regexp"
	"strings"
)

// Checks of programs that change files.

// How the programs that change files read their arguments (GNU coreutils
// and findutils, unless said).
var (
	rmArgs = spec("").optional("", "--interactive", "--preserve-root").withFlags("--force", "--recursive", "--dir",
		"--one-file-system", "--no-preserve-root", "--verbose")
	cpArgs = spec("St", "--suffix", "--target-directory", "--sparse", "--no-preserve").optional("", "--backup", "--context",
		"--reflink", "--preserve", "--update").withFlags("--archive", "--force", "--recursive", "--link", "--no-clobber",
		"--symbolic-link", "--no-target-directory", "--parents", "--remove-destination", "--dereference", "--no-dereference",
		"--one-file-system", "--strip-trailing-slashes", "--verbose", "--attributes-only", "--copy-contents", "--debug",
		"--interactive", "--exchange")
	installArgs = spec("gmotS", "--group", "--mode", "--owner", "--target-directory", "--suffix", "--strip-program").optional("", "--backup", "--context").withFlags("--directory",
		"--compare", "--preserve-timestamps", "--strip", "--no-target-directory", "--verbose", "--debug")
	lnArgs = spec("St", "--suffix", "--target-directory").optional("", "--backup").withFlags("--symbolic", "--force",
		"--no-dereference", "--no-target-directory", "--relative", "--verbose", "--logical", "--physical", "--interactive", "--directory")
	chmodArgs = spec("", "--reference", "--from").withFlags("--recursive", "--changes", "--silent", "--quiet", "--verbose",
		"--preserve-root", "--no-preserve-root", "--dereference", "--no-dereference")
	touchArgs = spec("mrdt", "--mode", "--reference", "--date", "--time").optional("", "--context").withFlags("--parents",
		"--verbose", "--no-create", "--no-dereference")
	teeArgs      = spec("").optional("", "--output-error").withFlags("--append", "--ignore-interrupts")
	truncateArgs = spec("sr", "--size", "--reference").withFlags("--no-create", "--io-blocks")
	shredArgs    = spec("ns", "--iterations", "--size", "--random-source").optional("u", "--remove").withFlags("--exact", "--force", "--zero", "--verbose")
	sedArgs      = spec("efl", "--expression", "--file", "--line-length").optional("i", "--in-place").withFlags("--quiet",
		"--silent", "--regexp-extended", "--separate", "--null-data", "--unbuffered", "--posix", "--sandbox", "--debug", "--follow-symlinks")
	awkArgs = spec("fvFWEeil", "--file", "--assign", "--field-separator", "--source", "--include", "--load", "--exec")
	tarArgs = spec("fCIFLbgHKNTVX", "--file", "--directory", "--use-compress-program", "--to-command",
		"--info-script", "--new-volume-script", "--rsh-command", "--exclude", "--files-from", "--checkpoint-action",
		"--transform", "--xform", "--owner", "--group", "--mode", "--format", "--label", "--newer", "--after-date",
		"--blocking-factor").optional("", "--checkpoint", "--backup").withFlags("--extract", "--get", "--create", "--append",
		"--update", "--list", "--absolute-names", "--to-stdout", "--verbose")
	zipArgs   = spec("bnOtxiPd", "-TT", "--unzip-command", "--temp-path", "--password", "--out")
	unzipArgs = spec("dxP")
	gzipArgs  = spec("SbTo", "--suffix", "--threads", "--output").withFlags("--stdout", "--to-stdout", "--list", "--test",
		"--decompress", "--keep", "--force", "--recursive")
	patchArgs = spec("pioDBFrVYzdgs", "--input", "--output", "--directory", "--reject-file")
	// find's options are whole words; the tests that take a value, the
	// actions that run a command up to ";" or "+", and -fprintf's two.
	findArgs = func() optSpec {
		valued := []string{"-name", "-iname", "-path", "-ipath", "-wholename", "-iwholename", "-regex", "-iregex",
			"-lname", "-ilname", "-type", "-xtype", "-user", "-group", "-uid", "-gid", "-perm", "-size", "-mtime", "-atime",
			"-ctime", "-mmin", "-amin", "-cmin", "-newer", "-anewer", "-cnewer", "-samefile", "-inum", "-links", "-maxdepth",
			"-mindepth", "-fstype", "-context", "-used", "-printf", "-regextype", "-files0-from", "-fprint", "-fprint0",
			"-fls", "-D"}
		for _, x := range "aBcmt" {
			for _, y := range "aBcmt" {
				valued = append(valued, "-newer"+string(x)+string(y))
			}
		}
		return spec("", valued...).withTwo("-fprintf").withUntil("-exec", "-execdir", "-ok", "-okdir").wholeWords()
	}()
	// fd reads its arguments as clap does; -x and -X take the words up to ";".
	fdArgs = spec("etEdjSoc", "--extension", "--type", "--exclude", "--max-depth", "--min-depth", "--exact-depth",
		"--threads", "--size", "--changed-within", "--changed-before", "--owner", "--color", "--base-directory",
		"--path-separator", "--search-path", "--max-results", "--ignore-file", "--format", "--batch-size").withUntil("-x", "--exec", "-X", "--exec-batch")
	// xargs: -e, -i and -l take a value only in the same word; the command
	// starts at the first operand.
	xargsArgs = spec("adEILnPs", "--arg-file", "--delimiter", "--max-args", "--max-procs", "--max-chars", "--process-slot-var").
			optional("eil", "--eof", "--replace", "--max-lines").withFlags("--null", "--interactive", "--no-run-if-empty",
		"--open-tty", "--show-limits", "--verbose", "--exit").firstOperand()
)

func registerFS() {
	check := func(names string, base program, args optSpec, fn func(w *walker, c *call)) {
		base.check, base.args = fn, args
		reg(names, base)
	}
	check("rm", pEdit, rmArgs, checkRm)
	check("unlink rmdir", pEdit, spec("").withFlags("--parents", "--verbose", "--ignore-fail-on-non-empty"), func(w *walker, c *call) {
		c.judgedPaths = true
		for _, f := range c.opts().ops {
			w.pathOp(opDelete, f, actor(c), false)
		}
	})
	check("shred", pEdit, shredArgs, func(w *walker, c *call) {
		c.judgedPaths = true
		for _, f := range c.opts().ops {
			if w.pathOp(opWrite, f, actor(c), false) == Allow {
				w.add(Confirm, ruleShred, fmt.Sprintf("shred destroys %s beyond recovery; approval is needed", f.show()), c.part)
			}
		}
	})
	check("cp", pEdit, cpArgs, func(w *walker, c *call) { checkCopy(w, c, false) })
	check("mv", pEdit, cpArgs, func(w *walker, c *call) { checkCopy(w, c, true) })
	check("install", pEdit, installArgs, checkInstall)
	check("ln", pEdit, lnArgs, checkLn)
	check("chmod chown chgrp chattr setfacl", pEdit, chmodArgs, checkChmod)
	check("touch mkdir mkfifo mknod", pEdit, touchArgs, func(w *walker, c *call) {
		c.judgedPaths = true
		for _, f := range c.opts().ops {
			w.pathOp(opWrite, f, actor(c), false)
		}
	})
	check("tee", pEdit, teeArgs, func(w *walker, c *call) {
		c.judgedPaths = true
		p := c.opts()
		for _, f := range p.ops {
			w.pathOp(opWrite, f, actor(c), false)
			w.wroteData(f, c.stdin, p.has("-a", "--append"))
			if w.classifyPath(f).class != pcHarmless {
				w.streamWrite(c.stdin.kind, "tee "+f.show(), c.part)
			}
		}
	})
	check("truncate", pEdit, truncateArgs, func(w *walker, c *call) {
		c.judgedPaths = true
		p := c.opts()
		for _, f := range p.ops {
			w.pathOp(opWrite, f, actor(c), false)
		}
		w.truncateSize(c, p)
	})
	check("dd", pEdit, spec(""), checkDd)
	check("fallocate", program{decision: Allow, rule: ruleWorkspaceChange, reason: "fallocate makes a file of a given size"},
		spec("lo", "--length", "--offset"), checkFallocate)
	check("sed gsed", pEdit, sedArgs, checkSed)
	check("awk gawk mawk nawk busybox-awk", pText, awkArgs, checkAwk)
	check("find gfind", pRead, findArgs, checkFind)
	check("fd fdfind", pRead, fdArgs, checkFd)
	check("xargs", pText, xargsArgs, checkXargs)
	check("tar gtar bsdtar", pEdit, tarArgs, checkTar)
	check("zip", pEdit, zipArgs, func(w *walker, c *call) {
		p := c.opts()
		for _, v := range p.values("-TT", "--unzip-command") {
			w.add(Confirm, ruleArchiveExec, "zip -TT runs a program to test the archive; drop the option", c.part)
			w.programString(v, c.part, "zip -TT")
		}
		c.judgedPaths = true
		for i, f := range p.ops {
			if i == 0 {
				w.pathOp(opWrite, f, actor(c), false)
			} else {
				w.pathOp(opCopy, f, actor(c), false)
			}
		}
	})
	check("unzip", pEdit, unzipArgs, func(w *walker, c *call) {
		c.judgedPaths = true
		for _, d := range c.opts().values("-d") {
			w.pathOp(opWrite, d, actor(c), false)
		}
	})
	check("gzip gunzip bzip2 bunzip2 xz unxz zstd unzstd lz4 compress uncompress", pEdit, gzipArgs, func(w *walker, c *call) {
		p := c.opts()
		if p.has("-c", "--stdout", "--to-stdout", "-l", "--list", "-t", "--test") {
			return
		}
		c.judgedPaths = true
		for _, f := range p.ops {
			w.pathOp(opCopy, f, actor(c), false)
			w.pathOp(opWrite, f, actor(c), false)
		}
	})
	check("sponge", pEdit, spec(""), func(w *walker, c *call) {
		// sponge FILE writes its input into FILE once it has read it all.
		c.judgedPaths = true
		p := c.opts()
		for _, f := range p.ops {
			w.pathOp(opWrite, f, actor(c), false)
			w.wroteData(f, c.stdin, p.has("-a"))
			if w.classifyPath(f).class != pcHarmless {
				w.streamWrite(c.stdin.kind, "sponge "+f.show(), c.part)
			}
		}
	})
	check("yq", pRead, spec("opIsef", "--output-format", "--input-format", "--indent", "--split-exp", "--expression",
		"--from-file", "--front-matter").optional("", "--in-place").withFlags("--inplace", "--null-input", "--exit-status"), func(w *walker, c *call) {
		// yq -i EXPR FILE... edits the files; the text it puts in is
		// checked as what it may become (a Taskfile's cmds).
		p := c.opts()
		if !p.has("-i", "--inplace", "--in-place") {
			return
		}
		c.judgedPaths = true
		exprs, files := p.values("--expression", "-e"), p.ops
		if len(exprs) == 0 && len(p.values("--from-file", "-f")) == 0 && len(files) > 0 {
			exprs, files = files[:1], files[1:]
		}
		for _, f := range files {
			w.pathOp(opWrite, f, actor(c), false)
			if f.known() && buildFileOf(w.canon(f.s)) != "" {
				for _, e := range exprs {
					w.plantedText(c, e.s)
				}
			}
		}
	})
	check("patch", pEdit, patchArgs, func(w *walker, c *call) {
		p := c.opts()
		for _, f := range p.values("-o", "--output", "-r", "--reject-file") {
			w.pathOp(opWrite, f, actor(c), false)
		}
		for _, f := range p.values("-d", "--directory") {
			w.pathOp(opWrite, f, actor(c), false)
		}
		if len(p.ops) > 0 {
			w.pathOp(opWrite, p.ops[0], actor(c), false)
		}
	})
}

// checkRm: rm of the workspace's files is allowed, a recursive rm needs
// approval, and rm of the filesystem's root, the home directory, system
// directories or credentials is denied.
func checkRm(w *walker, c *call) {
	c.judgedPaths = true
	p := c.opts()
	recursive := p.has("-r", "-R", "--recursive")
	if p.has("--no-preserve-root") {
		w.add(Deny, ruleRmNoPreserveRoot, "rm --no-preserve-root exists only to delete the whole filesystem; remove only the paths you mean, inside the workspace", c.part)
	}
	o := opDelete
	if recursive {
		o = opDeleteTree
	}
	for _, f := range p.ops {
		w.pathOp(o, f, actor(c), false)
	}
}

// checkCopy: cp and mv read their sources (mv also removes them) and write the
// destination.
func checkCopy(w *walker, c *call, move bool) {
	c.judgedPaths = true
	p := c.opts()
	ops := p.ops
	dests := p.values("-t", "--target-directory")
	if len(dests) == 0 && len(ops) > 1 {
		dests = ops[len(ops)-1:]
		ops = ops[:len(ops)-1]
	}
	for _, f := range ops {
		if move {
			w.pathOp(opDelete, f, actor(c), false)
		}
		w.pathOp(opCopy, f, actor(c), false)
	}
	for _, d := range dests {
		w.pathOp(opWrite, d, actor(c), false)
		// A copy of a device that never ends fills the disk (cp /dev/zero f).
		for _, f := range ops {
			if f.known() && endlessDevices[w.canon(f.s)] && w.classifyPath(d).class != pcHarmless {
				w.endlessWrite(c.name+" "+f.show(), c.part)
			}
		}
		// Into a directory, each source lands under its own name: cp -r
		// /tmp/x/.claude . writes ./.claude.
		if !d.known() {
			continue
		}
		if len(ops) == 1 && len(p.values("-t", "--target-directory")) == 0 && strings.LastIndexByte(path.Base(d.s), '.') > 0 {
			continue // cp a .mcp.json.bak: a name with an extension is a file
		}
		for _, f := range ops {
			if !f.known() || f.glob {
				continue
			}
			into := lit(path.Join(d.s, path.Base(f.s)))
			if w.classifyPath(into).class == pcAgentConfig {
				w.pathOp(opWrite, into, actor(c), false)
			}
		}
	}
}

func checkInstall(w *walker, c *call) {
	c.judgedPaths = true
	p := c.opts()
	for _, v := range p.values("--strip-program") {
		w.programString(v, c.part, "install --strip-program")
	}
	ops := p.ops
	if p.has("-d", "--directory") {
		for _, f := range ops {
			w.pathOp(opWrite, f, actor(c), false)
		}
		return
	}
	dests := p.values("-t", "--target-directory")
	if len(dests) == 0 && len(ops) > 1 {
		dests = ops[len(ops)-1:]
		ops = ops[:len(ops)-1]
	}
	for _, f := range ops {
		w.pathOp(opCopy, f, actor(c), false)
	}
	for _, d := range dests {
		w.pathOp(opWrite, d, actor(c), false)
	}
}

func checkLn(w *walker, c *call) {
	c.judgedPaths = true
	p := c.opts()
	ops := p.ops
	dests := p.values("-t", "--target-directory")
	if len(dests) == 0 {
		if len(ops) > 1 {
			dests = ops[len(ops)-1:]
			ops = ops[:len(ops)-1]
		} else if len(ops) == 1 {
			dests = []field{lit(path.Base(ops[0].s))}
		}
	}
	symbolic := p.has("-s", "--symbolic")
	// target is what a link to f points at: a relative symlink's target is
	// relative to the link's directory.
	target := func(f field) field {
		if symbolic && len(dests) == 1 && !strings.HasPrefix(f.s, "/") && !strings.HasPrefix(f.s, "~") {
			if dir := path.Dir(dests[0].s); dir != "." && dests[0].known() {
				f.s = dir + "/" + f.s
			}
		}
		return f
	}
	for _, f := range ops {
		w.pathOp(opLink, target(f), actor(c), false)
	}
	for _, d := range dests {
		w.pathOp(opWrite, d, actor(c), false)
	}
	// Remember the links: later paths through one reach its target.
	if symbolic && len(dests) == 1 && dests[0].known() {
		for _, f := range ops {
			t := target(f)
			if !t.known() {
				continue
			}
			link := dests[0].s
			if len(ops) > 1 || strings.HasSuffix(link, "/") || len(p.values("-t", "--target-directory")) > 0 {
				link = strings.TrimSuffix(link, "/") + "/" + path.Base(f.s)
			}
			w.link(link, t.s)
		}
	}
}

// link remembers a symbolic link made earlier in the command.
func (w *walker) link(name, target string) {
	if w.links == nil {
		w.links = map[string]string{}
	}
	if len(w.links) < 32 {
		w.links[w.canon(name)] = w.canon(target)
		w.paths = nil // classifications through the new link differ
	}
}

// throughLinks follows the links made earlier in the command: a path through
// one names a path under its target.
func (w *walker) throughLinks(c string) string {
	for l, t := range w.links {
		if c == l {
			return t
		}
		if rest, ok := strings.CutPrefix(c, l+"/"); ok {
			if t == "/" {
				return "/" + rest
			}
			return t + "/" + rest
		}
	}
	return c
}

// chmodMode matches a symbolic mode that starts with a dash; chmodFlag the
// words that are chmod's own options.
var (
	chmodMode = regexp.MustCompile(`^-[rwxXstugoa,+=-]+$`)
	chmodFlag = regexp.MustCompile(`^-[Rcfvh]+$`)
)

var setuidMode = regexp.MustCompile(`^(?:[0-7]?[2-7][0-7]{3}|.*[ugoa]*[+=][rwxXt]*s.*)$`)

// setsUID reports whether a chmod mode sets the setuid bit itself (4755, u+s,
// +s), not only setgid (2775, g+s: shared directories use it).
func setsUID(mode string) bool {
	if len(mode) == 4 && strings.Trim(mode, "01234567") == "" {
		return (mode[0]-'0')&4 != 0
	}
	if len(mode) == 5 && strings.Trim(mode, "01234567") == "" {
		return (mode[1]-'0')&4 != 0
	}
	for _, clause := range strings.Split(mode, ",") {
		i := strings.IndexAny(clause, "+=")
		if i < 0 || !strings.Contains(clause[i:], "s") {
			continue
		}
		if who := clause[:i]; who == "" || strings.ContainsAny(who, "ua") {
			return true
		}
	}
	return false
}

func checkChmod(w *walker, c *call) {
	c.judgedPaths = true
	p := c.opts()
	ops := p.ops
	// A mode may start with a dash (chmod -w f, chmod -x,u+s f): the first
	// word before the files that reads as a mode is the mode.
	if c.name == "chmod" && !p.has("--reference") {
		for _, o := range p.opts {
			a := c.args()[o.at]
			if (len(p.ops) == 0 || o.at < p.at[0]) && chmodMode.MatchString(a.s) && !chmodFlag.MatchString(a.s) {
				ops = append([]field{a}, ops...)
				break
			}
		}
	}
	if !p.has("--reference") && len(ops) > 0 && c.name != "chattr" {
		mode := ops[0]
		ops = ops[1:]
		if c.name == "chmod" && mode.known() && setuidMode.MatchString(mode.s) {
			if setsUID(mode.s) {
				w.add(Deny, ruleSetuid, fmt.Sprintf("chmod %s sets the setuid bit, which makes a program run with its owner's rights, the way privileges are escalated; leave the mode bits alone", mode.s), c.part)
			} else {
				w.add(Confirm, ruleSetuid, fmt.Sprintf("chmod %s sets the setgid bit, which lets a program run with its group's rights; approval is needed", mode.s), c.part)
			}
		}
		if c.name != "chmod" && c.name != "setfacl" {
			w.add(Confirm, ruleChown, c.name+" changes who owns files; approval is needed", c.part)
		}
	}
	if c.name == "chattr" {
		w.add(Confirm, ruleChattr, "chattr changes file attributes such as immutability; approval is needed", c.part)
		var rest []field
		for _, f := range ops {
			if !strings.HasPrefix(f.s, "+") && !strings.HasPrefix(f.s, "=") {
				rest = append(rest, f)
			}
		}
		ops = rest
	}
	o := opMeta
	if p.has("-R", "--recursive") {
		o = opMetaTree
	}
	for _, f := range ops {
		w.pathOp(o, f, actor(c), false)
	}
}

// checkDd: dd reads its operands as KEY=VALUE (if=, of=, bs=, count=).
func checkDd(w *walker, c *call) {
	c.judgedPaths = true
	w.ddSize(c)
	for _, a := range c.opts().ops {
		k, v, ok := strings.Cut(a.s, "=")
		f := a
		f.s, f.raw, f.glob, f.pat = v, "", false, ""
		switch {
		case ok && k == "of":
			w.pathOp(opWrite, f, actor(c), false)
		case ok && k == "if":
			w.pathOp(opRead, f, actor(c), false)
		}
	}
}

// sedEscapes reads the escapes GNU sed reads in the text it puts in: \t is a
// tab, \n a new line.
var sedEscapes = strings.NewReplacer(`\t`, "\t", `\n`, "\n", `\\`, `\`)

// checkSed: sed's scripts can write files (w), read them (r) and, in GNU sed,
// run commands (the e command and the e flag of s).
func checkSed(w *walker, c *call) {
	c.judgedPaths = true
	p := c.opts()
	scripts := p.values("-e", "--expression")
	ops := p.ops
	if len(scripts) == 0 && len(p.values("-f", "--file")) == 0 && len(ops) > 0 {
		scripts, ops = ops[:1], ops[1:]
	}
	// -i takes a suffix in its own word (-i.bak), and clusters (-ni).
	inPlace := p.has("-i", "--in-place")
	for _, f := range ops {
		if inPlace {
			w.pathOp(opWrite, f, actor(c), false)
		} else {
			w.pathOp(opRead, f, actor(c), false)
		}
	}
	followed := len(p.values("-f", "--file")) == 0
	var inserted []string
	for _, s := range scripts {
		if !s.known() {
			w.add(Confirm, ruleSedDynamic, "the sed script is computed at run time, and sed scripts can write files and run commands; write the script literally", c.part)
			followed = false
			continue
		}
		inserted = append(inserted, w.sedScript(c, s.s)...)
	}
	if inPlace {
		// Editing a build file in place plants what a build tool will run:
		// the text sed puts in is checked as the commands it may become.
		for _, f := range ops {
			if fam := buildFileOf(w.canon(f.s)); f.known() && fam != "" {
				for _, t := range inserted {
					if fam == "go-generate" {
						for _, cmd := range goGenerate(t) {
							w.plantedText(c, cmd)
						}
						continue
					}
					w.plantedText(c, t)
				}
				if followed {
					delete(w.tampered, w.canon(f.s))
				}
			}
		}
	}
}

func (w *walker) sedScript(c *call, script string) (inserted []string) {
	i := 0
	n := len(script)
	restOfLine := func() string {
		j := strings.IndexByte(script[i:], '\n')
		var s string
		if j < 0 {
			s, i = script[i:], n
		} else {
			s, i = script[i:i+j], i+j+1
		}
		return strings.TrimSpace(s)
	}
	delimited := func(d byte) string {
		var sb strings.Builder
		for i < n && script[i] != d {
			if script[i] == '\\' && i+1 < n {
				if script[i+1] != d {
					sb.WriteByte('\\')
				}
				i++
			}
			sb.WriteByte(script[i])
			i++
		}
		i++ // the delimiter
		return sb.String()
	}
	for i < n {
		ch := script[i]
		switch {
		case ch == ' ' || ch == '\t' || ch == '\n' || ch == ';' || ch == '!' || ch == '{' || ch == '}' || ch == ',' ||
			ch == '$' || ch == '~' || ch == '+' || ch >= '0' && ch <= '9':
			i++
		case ch == '/' || ch == '\\':
			// An address /regex/ or \cregexc.
			i++
			d := byte('/')
			if ch == '\\' && i < n {
				d = script[i]
				i++
			}
			delimited(d)
			for i < n && (script[i] == 'I' || script[i] == 'M') {
				i++
			}
		case ch == 's' || ch == 'y':
			i++
			if i >= n {
				return inserted
			}
			d := script[i]
			i++
			delimited(d)
			repl := delimited(d)
			if ch == 'y' {
				continue
			}
			inserted = append(inserted, sedEscapes.Replace(repl))
			exec := false
			for i < n && strings.IndexByte("gpeiImM0123456789w", script[i]) >= 0 {
				switch script[i] {
				case 'e':
					exec = true
				case 'w':
					i++
					w.pathOp(opWrite, lit(restOfLine()), actor(c), false)
					continue
				}
				i++
			}
			if exec {
				w.add(Confirm, ruleSedExec, "the e flag makes sed run the result of the substitution as a shell command; use sed for text only", c.part)
				cmd := strings.NewReplacer(`\n`, "\n", "&", "", `\1`, "", `\2`, "").Replace(repl)
				w.script(cmd, c.part)
			}
		case ch == 'e':
			i++
			cmd := restOfLine()
			w.add(Confirm, ruleSedExec, "the sed e command runs a shell command; use sed for text only", c.part)
			if cmd != "" {
				w.script(cmd, c.part)
			}
		case ch == 'w' || ch == 'W':
			i++
			w.pathOp(opWrite, lit(restOfLine()), actor(c), false)
		case ch == 'r' || ch == 'R':
			i++
			w.pathOp(opRead, lit(restOfLine()), actor(c), false)
		case ch == 'a' || ch == 'i' || ch == 'c':
			// a\ TEXT, a TEXT: GNU sed reads the escapes (\t is a tab).
			i++
			t := strings.TrimPrefix(restOfLine(), "\\")
			inserted = append(inserted, sedEscapes.Replace(t))
		case ch == ':' || ch == 'b' || ch == 't' || ch == 'T' || ch == '#':
			i++
			restOfLine()
		default:
			i++
		}
	}
	return inserted
}

var (
	awkExec  = regexp.MustCompile(`\bsystem\s*\(|\|\s*getline|\|&|\bprint[f]?\b[^;{}\n]*[^|]\|[^|]`)
	awkWrite = regexp.MustCompile(`\bprintf?\b(?:[^;{}\n"]|"[^"\n]*")*?>>?\s*"([^"]*)"`)
)

// checkAwk: awk programs can run commands (system, pipes to and from
// commands) and write files.
func checkAwk(w *walker, c *call) {
	p := c.opts()
	progs := p.values("-e", "--source")
	ops := p.ops
	if len(p.values("-f", "--file", "-E", "--exec", "-i", "--include")) == 0 && len(progs) == 0 && len(ops) > 0 {
		progs, ops = ops[:1], ops[1:]
	}
	if len(p.values("-l", "--load")) > 0 {
		w.add(Confirm, ruleAwkExec, "gawk -l loads a compiled extension, which runs native code; drop the option", c.part)
	}
	for _, f := range ops {
		if !strings.Contains(f.s, "=") {
			w.pathOp(opRead, f, actor(c), false)
		}
	}
	c.judgedPaths = true
	for _, prog := range progs {
		if !prog.known() {
			w.add(Confirm, ruleAwkDynamic, "the awk program is computed at run time, and awk can run commands; write the program literally", c.part)
			continue
		}
		code := stripStrings(prog.s)
		if strings.Contains(prog.s, "/inet/") {
			w.add(Deny, ruleReverseShell, c.name+" opens a network connection through /inet/ and exchanges commands over it (a reverse shell); run the commands you need directly", c.part)
		}
		if awkExec.MatchString(code) {
			w.add(Confirm, ruleAwkExec, c.name+" runs shell commands from its program (system, or a pipe to or from a command); run the commands directly", c.part)
			for _, s := range stringLiterals(prog.s) {
				w.scriptQuiet(s, c.part)
			}
		}
		for _, m := range awkWrite.FindAllStringSubmatch(prog.s, 8) {
			w.pathOp(opWrite, lit(m[1]), actor(c), false)
		}
	}
}

// stripStrings blanks out the contents of double-quoted strings in code, so
// that a "|" inside a string does not look like a pipe.
func stripStrings(code string) string {
	b := []byte(code)
	in := false
	for i := 0; i < len(b); i++ {
		switch {
		case b[i] == '\\' && in && i+1 < len(b):
			b[i], b[i+1] = ' ', ' '
			i++
		case b[i] == '"':
			in = !in
		case in:
			b[i] = ' '
		}
	}
	return string(b)
}

// stringLiterals returns the quoted strings in a piece of code.
func stringLiterals(code string) []string {
	var out []string
	for _, l := range codeLiterals(code) {
		out = append(out, l.s)
	}
	return out
}

// codeLit is a quoted string in code and where it is.
type codeLit struct {
	s          string
	start, end int // the quotes included
}

// codeLiterals finds the quoted strings in code, at most 64.
func codeLiterals(code string) []codeLit {
	var out []codeLit
	for i := 0; i < len(code) && len(out) < 64; i++ {
		q := code[i]
		if q != '"' && q != '\'' && q != '`' {
			continue
		}
		var sb strings.Builder
		j := i + 1
		for ; j < len(code) && code[j] != q; j++ {
			if code[j] == '\\' && j+1 < len(code) && q != '\'' {
				j++
				switch code[j] {
				case 'n':
					sb.WriteByte('\n')
					continue
				case 't':
					sb.WriteByte('\t')
					continue
				}
			}
			sb.WriteByte(code[j])
		}
		if s := sb.String(); strings.TrimSpace(s) != "" && len(s) <= maxValue {
			out = append(out, codeLit{s, i, min(j+1, len(code))})
		}
		i = j
	}
	return out
}

// argvGroups finds argument lists written as adjacent string literals in
// code — ["rm", "-rf", "/"], system("rm", "-rf", "/"), spawn('rm', ['-rf', '/'])
// — and returns each as one command line.
func argvGroups(code string) []string {
	lits := codeLiterals(code)
	var out []string
	for i := 0; i < len(lits); {
		j := i + 1
		for j < len(lits) {
			gap := code[lits[j-1].end:lits[j].start]
			if strings.Trim(gap, " \t\n,[]()") != "" || !strings.Contains(gap, ",") {
				break
			}
			j++
		}
		if j-i > 1 {
			fs := make([]field, 0, j-i)
			for _, l := range lits[i:j] {
				fs = append(fs, lit(l.s))
			}
			out = append(out, quoteArgs(fs))
		}
		i = j
	}
	return out
}

// checkFind: find only reads, unless an action runs a command (-exec, -ok) or
// deletes (-delete), or writes a file (-fprint). Its roots are the operands
// before the expression; the expression's words are read as find reads them,
// so that a test's argument is never taken for an action (find -name -delete
// looks for files named -delete).
func checkFind(w *walker, c *call) {
	p := c.opts()
	var roots []field
	for k, r := range p.ops {
		if len(p.opts) > 0 && p.at[k] > p.opts[0].at || r.s == "(" || r.s == "!" || r.s == "\\(" || r.s == "," {
			break
		}
		roots = append(roots, r)
	}
	if len(roots) == 0 {
		roots = []field{lit(".")}
	}
	namePat := "*"
	for _, v := range p.values("-name", "-iname") {
		if v.known() && !strings.Contains(v.s, "/") {
			namePat = v.s
		}
	}
	matching := p.values("-name", "-iname", "-path", "-ipath", "-regex", "-iregex", "-wholename", "-iwholename")
	for _, r := range roots {
		w.pathOp(opRead, r, actor(c), false)
		switch w.classifyPath(r).class {
		case pcHome, pcRoot, pcHomeDir:
			for _, v := range matching {
				if credentialName.MatchString(v.s) {
					w.add(Deny, ruleCredentialSearch, fmt.Sprintf("%s searches %s for credential files (%s); do not harvest secrets — ask the user if the task needs one", c.name, r.show(), v.show()), c.part)
				}
			}
		}
	}
	c.judgedPaths = true
	// find ... -path '*.claude*' -exec sed -i ...: the files it changes are an
	// agent's configuration.
	if p.has("-exec", "-execdir", "-ok", "-okdir", "-delete") {
		for _, o := range p.opts {
			switch o.name {
			case "-name", "-iname", "-path", "-ipath", "-wholename", "-iwholename":
				if pt := strings.Trim(o.val.s, "*"); pt != "" && agentConfig(strings.TrimPrefix(pt, "./")) != "" || agentConfig(strings.ReplaceAll(o.val.s, "*", "x/")) != "" {
					w.add(Confirm, ruleWriteAgentConfig, fmt.Sprintf("%s %s %s acts on an AI agent's or editor's configuration (%s); changing it reconfigures the agent or the user's tools, so approval is needed", c.name, o.name, o.val.show(), o.val.show()), c.part)
				}
			}
		}
	}
	for _, o := range p.opts {
		switch o.name {
		case "-delete":
			for _, r := range roots {
				if !w.findDeleteDenied(r, "find -delete") {
					w.add(Confirm, ruleFindDelete, fmt.Sprintf("find -delete deletes every match under %s; approval is needed", r.show()), c.part)
				}
			}
		case "-exec", "-execdir", "-ok", "-okdir":
			if len(o.vals) == 0 {
				continue
			}
			for _, r := range roots {
				sub := make([]field, len(o.vals))
				for k, a := range o.vals {
					sub[k] = a
					if strings.Contains(a.s, "{}") {
						sub[k] = placeholder(a, "{}", strings.TrimSuffix(r.s, "/")+"/"+namePat)
					}
				}
				w.add(Allow, ruleFindExec, fmt.Sprintf("find %s runs %s on every match; that command is checked", o.name, sub[0].show()), c.part)
				if deleters[path.Base(sub[0].s)] {
					// Whatever the filters, the matches may be anywhere under
					// the root, as with -delete.
					if !w.findDeleteDenied(r, "find "+o.name+" "+sub[0].show()) {
						w.add(Confirm, ruleFindExecDelete, fmt.Sprintf("find %s %s deletes or destroys every file find matches under %s; approval is needed", o.name, sub[0].show(), r.show()), c.part)
					}
				}
				w.command(c.sub(sub))
				if !r.known() {
					break
				}
			}
		case "-fprint", "-fprint0", "-fprintf", "-fls":
			if o.has {
				w.pathOp(opWrite, o.val, actor(c), false)
			}
		}
	}
}

// findDeleteDenied records a denial when find deletes matches under a root
// whose tree must not be deleted (/, ~, a system directory), whatever the
// filters: the matches may be anywhere under it.
func (w *walker) findDeleteDenied(root field, actor string) bool {
	if pathDecision(opDeleteTree, w.classifyPath(root).class) != Deny {
		return false
	}
	w.pathOp(opDeleteTree, root, actor, false)
	return true
}

// credentialName matches file names and patterns that look for credentials.
var credentialName = regexp.MustCompile(`(?i)id_(rsa|dsa|ecdsa|ed25519)|\.pem|\.key\b|\.p12|\.pfx|\.ppk|\.kdbx|credential|secret|token|passw|\.netrc|\.pgpass|\.env\b|wallet|\.aws|\.ssh|keychain|\.gnupg|authorized_keys|kubeconfig`)

var deleters = set("rm", "unlink", "shred", "rmdir", "truncate", "srm", "wipe")

// placeholder replaces marker in a word with the names a program will put
// there at run time (find's {}, xargs -I): a glob standing for any of them.
func placeholder(a field, marker, with string) field {
	out := a
	out.s = strings.ReplaceAll(a.s, marker, with)
	out.pat = strings.ReplaceAll(quoteGlob(a.s), marker, with)
	out.glob = true
	out.dyn = true
	return out
}

func checkFd(w *walker, c *call) {
	var inner []field
	for _, o := range c.opts().opts {
		switch o.name {
		case "-x", "--exec", "-X", "--exec-batch":
			inner = o.vals
		}
	}
	if len(inner) == 0 {
		return
	}
	sub := make([]field, len(inner))
	for k, a := range inner {
		sub[k] = a
		for _, m := range []string{"{}", "{/}", "{//}", "{.}", "{/.}"} {
			if strings.Contains(a.s, m) {
				sub[k] = placeholder(a, m, "*")
			}
		}
	}
	if deleters[path.Base(sub[0].s)] {
		w.add(Confirm, ruleFindExecDelete, "fd --exec "+sub[0].show()+" deletes every file fd matches; approval is needed", c.part)
	}
	w.command(c.sub(sub))
}

// checkXargs: xargs runs a command with arguments read from its input.
func checkXargs(w *walker, c *call) {
	p := c.opts()
	replace := ""
	for _, o := range p.opts {
		switch o.name {
		case "-I", "--replace", "-i":
			replace = "{}"
			if o.has {
				replace = o.val.s
			}
		case "-a", "--arg-file":
			if o.has {
				w.pathOp(opRead, o.val, actor(c), false)
			}
		}
	}
	c.judgedPaths = true
	inner := p.ops[:len(p.ops):len(p.ops)]
	if len(inner) == 0 {
		return // echo
	}
	c.delegated = true
	if deleters[path.Base(inner[0].s)] {
		w.add(Confirm, ruleXargsDelete, fmt.Sprintf("xargs %s deletes or destroys every file named on its input; approval is needed", inner[0].show()), c.part)
	}
	if replace != "" && c.stdin.hasText && c.stdin.kind == dLiteral {
		// The input is known: run the command once per line, as xargs -I does.
		n := 0
		for _, line := range strings.Split(c.stdin.text, "\n") {
			if line = strings.TrimSpace(line); line == "" {
				continue
			}
			if n++; n > 8 {
				break
			}
			sub := append([]field(nil), inner...)
			for k, a := range sub {
				if strings.Contains(a.s, replace) {
					sub[k].s = strings.ReplaceAll(a.s, replace, line)
					sub[k].dyn = true
				}
			}
			w.command(c.sub(sub))
		}
		return
	}
	if replace != "" {
		inner = append([]field(nil), inner...)
		for k, a := range inner {
			if strings.Contains(a.s, replace) {
				with := "*"
				if a.s == replace && c.stdin.names != "" {
					with = c.stdin.names
				}
				inner[k] = placeholder(a, replace, with)
				inner[k].data |= c.stdin.kind
			}
		}
	} else if c.stdin.hasText && c.stdin.kind == dLiteral {
		// The arguments are known: echo / | xargs rm -rf.
		for _, s := range strings.Fields(c.stdin.text) {
			f := lit(s)
			f.dyn = true
			inner = append(inner, f)
			if len(inner) > maxFields {
				break
			}
		}
	} else if len(inner) < maxArgs {
		if n := c.stdin.names; n != "" {
			// find DIR | xargs CMD: the arguments are the paths listed.
			inner = append(inner, placeholder(lit("{}"), "{}", n))
		} else {
			inner = append(inner, field{s: unknown, raw: "…", dyn: true, data: c.stdin.kind})
		}
	}
	w.command(c.sub(inner))
}

// checkTar: tar reads and writes files, and several options run programs.
func checkTar(w *walker, c *call) {
	args := c.args()
	// Old-style tar takes its options as the first word without a dash.
	if len(args) > 0 && !isOpt(args[0].s) && args[0].known() && strings.Trim(args[0].s, "cxtrudfvzjJaOpPkmhlSWgGCMTIK") == "" {
		a := args[0]
		a.s = "-" + a.s
		args = append([]field{a}, args[1:]...)
	}
	p := parseArgs(args, c.spec)
	for _, o := range p.opts {
		switch o.name {
		case "-I", "--use-compress-program", "--to-command", "-F", "--info-script", "--new-volume-script", "--rsh-command":
			w.add(Confirm, ruleArchiveExec, fmt.Sprintf("tar %s runs a program (%s); use tar's own options instead", o.name, o.val.show()), c.part)
			w.programString(o.val, c.part, "tar "+o.name)
		case "--checkpoint-action":
			if v, ok := strings.CutPrefix(o.val.s, "exec="); ok {
				w.add(Confirm, ruleArchiveExec, "tar --checkpoint-action=exec runs a program; drop the option", c.part)
				val := o.val
				val.s = v
				w.programString(val, c.part, "tar --checkpoint-action")
			}
		}
	}
	c.judgedPaths = true
	extract := p.has("-x", "--extract", "--get")
	create := p.has("-c", "--create", "-r", "--append", "-u", "--update")
	for _, f := range p.values("-f", "--file") {
		if create {
			w.pathOp(opWrite, f, actor(c), false)
		} else {
			w.pathOp(opRead, f, actor(c), false)
		}
	}
	if extract {
		dirs := p.values("-C", "--directory")
		for _, d := range dirs {
			w.pathOp(opWrite, d, "tar -x -C "+d.show(), false)
		}
		if p.has("-P", "--absolute-names") {
			w.add(Confirm, ruleArchiveAbsolute, "tar -P extracts members to absolute paths, anywhere on the filesystem; extract into the workspace", c.part)
		}
		// The members named are the files it writes (tar -xf a.tar
		// .claude/settings.json), under -C's directory.
		dir := ""
		if len(dirs) > 0 && dirs[len(dirs)-1].known() {
			dir = strings.TrimSuffix(dirs[len(dirs)-1].s, "/") + "/"
		}
		for _, f := range p.ops {
			if f.known() && !strings.HasPrefix(f.s, "/") {
				f.s = dir + f.s
			}
			w.pathOp(opWrite, f, actor(c), false)
		}
	}
	if create {
		for _, f := range p.ops {
			w.pathOp(opCopy, f, actor(c), false)
		}
	}
}
