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

// ddSize checks the size dd writes to of= (a file): bs (or obs) times count,
// or an endless stream from a device that never ends and no count.
func (w *walker) ddSize(c *call) {
	var of, in string
	hasOf := false
	bs, count := 512.0, -1.0
	known := true
	for _, a := range c.opts().ops {
		k, v, ok := strings.Cut(a.s, "=")
		if !ok {
			continue
		}
		switch k {
		case "of":
			of, hasOf = v, true
		case "if":
			in = v
		case "bs", "obs", "ibs":
			if k == "ibs" && bs != 512 {
				continue
			}
			n, ok := parseSize(v, true)
			bs, known = n, known && ok
		case "count":
			n, ok := parseSize(v, true)
			count, known = n, known && ok
		}
	}
	if !hasOf || harmlessDevices[of] && !endlessDevices[of] || of == "/dev/null" {
		return
	}
	if strings.HasPrefix(of, "/dev/") {
		return // devices are judged by the path rules
	}
	if count < 0 {
		if endlessDevices[in] || in == "" && c.stdin.kind&dEndless != 0 {
			w.endlessWrite("dd without count= from "+cmp(in, "its input"), c.part)
		}
		return
	}
	w.bigFile(c, "dd", bs*count, known)
}

func cmp(s, alt string) string {
	if s == "" {
		return alt
	}
	return s
}

// headBound reports whether head -c N or -n N bounds its output below the
// limit: head passes an endless stream on only when N is larger.
func (w *walker) headBound(args []field) bool {
	p := parseArgs(args, spec("cn", "--bytes", "--lines"))
	for _, v := range p.values("-c", "--bytes") {
		n, ok := parseSize(strings.TrimPrefix(v.s, "-"), false)
		return ok && n <= w.e.maxFileSize()
	}
	return true
}
