package policy

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Filling the disk: the sandbox has no quota on the workspace or its writable
// layer, so a command that makes a file larger than the engine's limit
// (Options.MaxFileSize; max_file_size in a rules file), or writes an endless
// stream into one, needs approval.

// DefaultMaxFileSize is the size of a file a command may make without approval
// when Options.MaxFileSize is 0: 1 GiB.
const DefaultMaxFileSize = 1 << 30

// endlessDevices produce bytes for ever.
var endlessDevices = set("/dev/zero", "/dev/urandom", "/dev/random", "/dev/full")

// parseSize reads a size as fallocate, truncate, head -c and dd write it: a
// number with an optional suffix, K M G T P E Z Y (powers of 1024; KiB too),
// KB MB GB ... (powers of 1000), and for dd c w b (1, 2, 512). It reports
// false for what it cannot read.
func parseSize(s string, dd bool) (float64, bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, false
	}
	if dd && strings.Contains(s, "x") {
		// dd's bs=2x512: a product.
		total := 1.0
		for _, p := range strings.Split(s, "x") {
			n, ok := parseSize(p, true)
			if !ok {
				return 0, false
			}
			total *= n
		}
		return total, true
	}
	i := 0
	for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
		i++
	}
	if i == 0 {
		return 0, false
	}
	n, err := strconv.ParseFloat(s[:i], 64)
	if err != nil {
		return 0, false
	}
	suf := strings.ToUpper(s[i:])
	if suf == "" {
		return n, true
	}
	if dd {
		switch s[i:] {
		case "c":
			return n, true
		case "w":
			return n * 2, true
		case "b":
			return n * 512, true
		}
	}
	const units = "KMGTPEZY"
	k := strings.IndexByte(units, suf[0])
	if k < 0 {
		if suf == "B" {
			return n, true
		}
		return 0, false
	}
	base := 1024.0
	switch suf[1:] {
	case "", "IB":
	case "B":
		base = 1000
	default:
		return 0, false
	}
	return n * math.Pow(base, float64(k+1)), true
}

func (e *Engine) maxFileSize() float64 {
	if e.maxFile > 0 {
		return float64(e.maxFile)
	}
	return DefaultMaxFileSize
}

// showSize writes a size for a message.
func showSize(n float64) string {
	for _, u := range []string{"bytes", "KiB", "MiB", "GiB", "TiB", "PiB"} {
		if n < 1024 || u == "PiB" {
			if u == "bytes" {
				return fmt.Sprintf("%.0f bytes", n)
			}
			return fmt.Sprintf("%.4g %s", n, u)
		}
		n /= 1024
	}
	return ""
}

// bigFile records a program that would make a file of size bytes (or of a
// size the policy cannot read, when known is false).
func (w *walker) bigFile(c *call, what string, size float64, known bool) {
	limit := w.e.maxFileSize()
	if known && size <= limit {
		return
	}
	reason := fmt.Sprintf("%s would make a file of %s, more than the %s a command may write without approval (max_file_size in the rules file); the sandbox has no disk quota — make it smaller, or ask for approval", what, showSize(size), showSize(limit))
	if !known {
		reason = fmt.Sprintf("%s would make a file of a size the policy cannot read; the sandbox has no disk quota — write the size as a number with K, M or G, or ask for approval", what)
	}
	w.add(Confirm, ruleDiskFill, reason, c.part)
}

// endlessWrite records a command writing an endless stream into a file.
func (w *walker) endlessWrite(what, part string) {
	w.add(Confirm, ruleDiskFill, what+" writes an endless stream into a file, which fills the disk (the sandbox has no quota); bound it (head -c 10M, dd count=), or ask for approval", part)
}

func checkFallocate(w *walker, c *call) {
	c.judgedPaths = true
	p := parseArgs(c.args(), spec("lo", "--length", "--offset"))
	if p.has("-d", "--dig-holes", "-p", "--punch-hole", "-c", "--collapse-range") {
		return // makes files smaller
	}
	size, known := 0.0, false
	for _, v := range p.values("-l", "--length") {
		size, known = parseSize(v.s, false)
	}
	if off := p.values("-o", "--offset"); known && len(off) > 0 {
		o, ok := parseSize(off[len(off)-1].s, false)
		size, known = size+o, ok
	}
	for _, f := range p.ops {
		w.pathOp(opWrite, f, actor(c), false)
	}
	if len(p.ops) > 0 {
		w.bigFile(c, "fallocate", size, known)
	}
}

// truncateSize checks truncate -s: a size, or +SIZE that extends a file.
func (w *walker) truncateSize(c *call, p parsed) {
	for _, v := range p.values("-s", "--size") {
		s := v.s
		switch {
		case s == "" || strings.ContainsAny(s[:1], "-<"):
			continue // shrinks
		case strings.ContainsAny(s[:1], "+>%/"):
			s = s[1:]
		}
		size, known := parseSize(s, false)
		w.bigFile(c, "truncate -s "+v.s, size, known)
	}
}

// ddAmount reads how much dd writes: count blocks of bs (or ibs) bytes, after
// seek blocks of bs (or obs) bytes it skips in its output file — the file is as
// large as both (iflag=count_bytes and oflag=seek_bytes count in bytes). It
// never ends when it reads an endless device, or an endless input, with no
// count.
func (w *walker) ddAmount(p parsed, stdin data) (size float64, known, endless, bounded bool) {
	ibs, obs, count, seek := 512.0, 512.0, -1.0, 0.0
	known = true
	in, iflag, oflag := "", "", ""
	for _, a := range p.ops {
		k, v, ok := strings.Cut(a.s, "=")
		if !ok {
			continue
		}
		n, isSize := parseSize(v, true)
		switch k {
		case "if":
			in = v
		case "iflag":
			iflag = v
		case "oflag":
			oflag = v
		case "bs":
			ibs, obs, known = n, n, known && isSize
		case "ibs":
			ibs, known = n, known && isSize
		case "obs":
			obs, known = n, known && isSize
		case "count":
			count, known, bounded = n, known && isSize, true
		case "seek", "oseek":
			seek, known, bounded = n, known && isSize, true
		}
	}
	if count < 0 {
		endless = endlessDevices[in] || in == "" && stdin.kind&dEndless != 0
		count = 0 // and as much as its input holds
	}
	if !strings.Contains(iflag, "count_bytes") {
		count *= ibs
	}
	if !strings.Contains(oflag, "seek_bytes") {
		seek *= obs
	}
	return count + seek, known, endless, bounded
}

// ddStream is what dd writes to its output, for what flows on: an endless
// stream, or one larger than a file may be without approval.
func (w *walker) ddStream(p parsed, stdin data) dataKind {
	size, known, endless, _ := w.ddAmount(p, stdin)
	switch {
	case endless:
		return dEndless
	case known && size > w.e.maxFileSize():
		return dHuge
	}
	return 0
}

// ddSize checks the size dd writes to of= (a file): bs (or obs) times count,
// or an endless stream from a device that never ends and no count.
func (w *walker) ddSize(c *call) {
	p := c.opts()
	outs := p.keyed("of")
	if len(outs) == 0 {
		return
	}
	of := outs[len(outs)-1].s
	if harmlessDevices[of] && !endlessDevices[of] || of == "/dev/null" || strings.HasPrefix(of, "/dev/") {
		return // devices are judged by the path rules
	}
	size, known, endless, bounded := w.ddAmount(p, c.stdin)
	if endless {
		in := ""
		if ins := p.keyed("if"); len(ins) > 0 {
			in = ins[0].s
		}
		w.endlessWrite("dd without count= from "+cmp(in, "its input"), c.part)
		return
	}
	if !bounded {
		return // it copies a file, or its input: as large as that is
	}
	w.bigFile(c, "dd", size, known)
}

func cmp(s, alt string) string {
	if s == "" {
		return alt
	}
	return s
}

// headBound reports whether head -c N or -n N bounds its output below the
// limit: head passes an endless stream on only when N is larger (N lines are
// N bytes at least).
func (w *walker) headBound(args []field) bool {
	p := argsOf("head", args)
	for _, v := range p.values("-c", "--bytes", "-n", "--lines") {
		n, ok := parseSize(strings.TrimPrefix(v.s, "-"), false)
		if !ok || n > w.e.maxFileSize() {
			return false
		}
	}
	return true
}

// hugeWrite records a command writing more into a file than a file may hold
// without approval.
func (w *walker) hugeWrite(what, part string) {
	w.add(Confirm, ruleDiskFill, fmt.Sprintf("%s writes more than %s into a file (max_file_size in the rules file); the sandbox has no disk quota — write less, or ask for approval", what, showSize(w.e.maxFileSize())), part)
}

// streamWrite records writing a stream that never ends, or ends too late,
// into a file.
func (w *walker) streamWrite(k dataKind, what, part string) {
	switch {
	case k&dEndless != 0:
		w.endlessWrite(what, part)
	case k&dHuge != 0:
		w.hugeWrite(what, part)
	}
}

// registerDisk describes the programs that make a file of a given size.
func registerDisk() {
	reg("mkfile xfs_mkfile", program{decision: Allow, rule: ruleWorkspaceChange, reason: "%s makes a file of a given size", check: func(w *walker, c *call) {
		// mkfile [-nv] SIZE[bkmg] FILE...
		c.judgedPaths = true
		p := parseArgs(c.args(), spec(""))
		if len(p.ops) == 0 {
			return
		}
		size, known := parseSize(strings.TrimSuffix(strings.ToLower(p.ops[0].s), "b"), false)
		for _, f := range p.ops[1:] {
			w.pathOp(opWrite, f, actor(c), false)
		}
		w.bigFile(c, c.name, size, known)
	}})
	readsArgs("head", spec("cn", "--bytes", "--lines"))
	readsArgs("tail", spec("cns", "--bytes", "--lines", "--sleep-interval", "--pid", "--max-unchanged-stats"))
	readsArgs("tac", spec("s", "--separator"))
	readsArgs("nl", spec("bdfhilnsvw", "--body-numbering", "--section-delimiter", "--footer-numbering", "--header-numbering",
		"--line-increment", "--join-blank-lines", "--number-format", "--number-separator", "--starting-line-number", "--number-width"))
	readsArgs("less", spec("bhjkoOpPtTxyz", "--buffers", "--max-back-scroll", "--jump-target", "--lesskey-file", "--log-file",
		"--LOG-FILE", "--pattern", "--prompt", "--tag", "--tag-file", "--tabs", "--max-forw-scroll", "--window"))
	readsArgs("more", spec("n", "--lines"))
}
