package policy

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/pattern"
	"mvdan.cc/sh/v3/syntax"
)

// unknown stands in a resolved word for text the policy cannot know before the
// command runs: an unset variable, the output of a command substitution. A shell
// word cannot hold a NUL byte, so it never collides with real text.
const unknown = "\x00"

// maxFields bounds the words one shell word may expand to (brace expansion), and
// maxValue the length of a variable's value the walker remembers: enough for any
// real command, small enough that crafted input cannot make the policy slow.
const (
	maxFields = 64
	maxValue  = 4096
	maxArgs   = 4096 // arguments of one command looked at
)

// field is one word of a command's argv after the expansions bash would do, as far
// as they can be done before the command runs.
type field struct {
	s      string   // the value; unknown stretches hold the unknown marker
	raw    string   // the word as written, for messages
	pat    string   // s as a glob pattern (quoted metacharacters escaped); set when glob
	glob   bool     // has unquoted glob metacharacters: bash would expand it to file names
	dyn    bool     // has an expansion ($x, $(..), $((..)), a brace expansion)
	brace  bool     // came from a brace expansion
	subst  bool     // has a command or process substitution
	secret string   // name of a secret-looking variable expanded in it
	data   dataKind // what the substitutions and variables in it carry
	proc   *data    // what a process substitution in it produces
	quoted bool     // some part of it was quoted
	// alt is the value if the variables never set in the command are empty,
	// as they usually are (r${x}m is rm); set when it differs from s and is
	// fully known.
	alt    string
	hasAlt bool
}

func (f field) known() bool { return !strings.Contains(f.s, unknown) }

// show returns the word for a message: as written when it was, else its value.
func (f field) show() string {
	if f.raw != "" {
		return f.raw
	}
	return strings.ReplaceAll(f.s, unknown, "…")
}

// lit makes a field of literal text.
func lit(s string) field { return field{s: s, raw: s} }

// fieldBuilder accumulates the parts of one word into fields, splitting where an
// unquoted expansion's value holds blanks.
type fieldBuilder struct {
	cur        field
	sb, pb, ab strings.Builder
	started    bool
	altDiffers bool
	out        []field
}

func (b *fieldBuilder) add(s string, quoted bool) {
	b.started = true
	b.sb.WriteString(s)
	b.ab.WriteString(s)
	if quoted {
		b.pb.WriteString(quoteGlob(s))
	} else {
		b.pb.WriteString(s)
	}
}

func (b *fieldBuilder) split() {
	if !b.started {
		return
	}
	b.cur.s = b.sb.String()
	if b.cur.glob {
		b.cur.pat = b.pb.String()
	}
	if b.altDiffers {
		if alt := b.ab.String(); !strings.Contains(alt, unknown) {
			b.cur.alt, b.cur.hasAlt = alt, true
		}
	}
	b.out = append(b.out, b.cur)
	b.cur = field{}
	b.sb.Reset()
	b.pb.Reset()
	b.ab.Reset()
	b.started, b.altDiffers = false, false
}

// addAlt adds an unknown value whose alternative (all never-set variables
// empty) is known: ${x:-rm} is rm when x is not set, and a variable the
// command never set is "".
func (b *fieldBuilder) addAlt(alt string, quoted bool) {
	b.started = true
	b.sb.WriteString(unknown)
	if quoted {
		b.pb.WriteString(quoteGlob(unknown))
	} else {
		b.pb.WriteString(unknown)
	}
	b.ab.WriteString(alt)
	b.altDiffers = true
}

func quoteGlob(s string) string {
	if !strings.ContainsAny(s, "*?[\\") {
		return s
	}
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '*', '?', '[', '\\':
			sb.WriteByte('\\')
		}
		sb.WriteByte(s[i])
	}
	return sb.String()
}

// expandWords expands the words of a command into its argv.
func (w *walker) expandWords(words []*syntax.Word) []field {
	argv := make([]field, 0, min(len(words), maxArgs))
	for _, word := range words {
		argv = append(argv, w.expandWord(word)...)
		if len(argv) >= maxArgs {
			// The rest is not looked at: a command this long needs approval.
			argv = append(argv[:maxArgs], field{s: unknown, raw: "…", dyn: true})
			w.addS(Confirm, ruleTooManyArgs, fmt.Sprintf("the command has more than %d arguments, more than the policy checks one by one; split it, or ask for approval", maxArgs), "")
			break
		}
	}
	return argv
}

// expandWord expands one word as bash would: brace expansion, tilde, parameters
// the walker knows, quote removal and field splitting. It never runs anything;
// what cannot be known is marked unknown.
func (w *walker) expandWord(word *syntax.Word) []field {
	raw := w.text(word)
	// Brace expansion works on a copy: the tree stays as parsed, for the
	// walks that do not know brace nodes.
	copied := *word
	word = &copied
	if !syntax.SplitBraces(word) && !hasBraceExp(word) {
		fs := w.resolveParts(word.Parts)
		if len(fs) == 1 {
			fs[0].raw = raw
		}
		return fs
	}
	if braceGroups(word.Parts, 0) > 8 {
		// Too many to expand: what it expands to is not known.
		return []field{{s: unknown, raw: raw, dyn: true, brace: true}}
	}
	var out []field
	n := 0
	for bw, err := range expand.BracesSeq(nil, word) {
		if err != nil || n >= maxFields {
			out = append(out, field{s: unknown, raw: raw, dyn: true, brace: true})
			break
		}
		n++
		for _, f := range w.resolveParts(bw.Parts) {
			f.brace, f.dyn = true, true
			out = append(out, f)
		}
	}
	return out
}

// braceGroups counts the brace expansions in parts, nested ones too, stopping
// past a handful.
func braceGroups(parts []syntax.WordPart, n int) int {
	for _, p := range parts {
		if b, ok := p.(*syntax.BraceExp); ok {
			n++
			if n > 8 {
				return n
			}
			for _, e := range b.Elems {
				if n = braceGroups(e.Parts, n); n > 8 {
					return n
				}
			}
		}
	}
	return n
}

func hasBraceExp(word *syntax.Word) bool {
	for _, p := range word.Parts {
		if _, ok := p.(*syntax.BraceExp); ok {
			return true
		}
	}
	return false
}

func (w *walker) resolveParts(parts []syntax.WordPart) []field {
	var b fieldBuilder
	for i, p := range parts {
		w.resolvePart(&b, p, false, i == 0)
	}
	if !b.started && len(b.out) == 0 {
		// A word that expands to nothing: "" is one empty field, $empty none.
		if b.cur.quoted {
			b.started = true
		} else {
			return nil
		}
	}
	b.split()
	for _, f := range b.out {
		w.noteCode(f.s, f.data)
	}
	return b.out
}

func (w *walker) resolvePart(b *fieldBuilder, p syntax.WordPart, quoted, first bool) {
	switch p := p.(type) {
	case *syntax.Lit:
		if quoted {
			b.add(unescapeDouble(p.Value), true)
			return
		}
		w.resolveLit(b, p.Value)
	case *syntax.SglQuoted:
		b.cur.quoted = true
		b.started = true
		v := p.Value
		if p.Dollar {
			v = ansiC(v)
		}
		b.add(v, true)
	case *syntax.DblQuoted:
		b.cur.quoted = true
		b.started = true
		for _, q := range p.Parts {
			w.resolvePart(b, q, true, false)
		}
	case *syntax.ParamExp:
		b.cur.dyn = true
		name := paramName(p)
		if name != "" && secretVarName(name) && !w.e.placeholders[name] {
			b.cur.secret = name
			b.cur.data |= dSecret
		}
		if v, ok := w.sh.vars[name]; ok {
			b.cur.data |= v.data
		}
		if quoted && (name == "@" || p.Index != nil) && !p.Excl && p.Exp == nil && p.Slice == nil {
			// "$@" and "${a[@]}" are one word per element.
			if idx, _ := p.Index.(*syntax.Word); p.Index == nil || idx != nil && idx.Lit() == "@" {
				if elems, ok := w.elems(p); ok {
					for i, e := range elems {
						if i > 0 {
							b.split()
							b.cur.dyn = true
							b.started = true
						}
						b.add(e, true)
					}
					return
				}
			}
		}
		v, ok := w.param(p)
		if !ok {
			vs, assigned := w.sh.vars[name]
			plain := name != "" && p.Slice == nil && !p.Excl && !p.Length && p.Index == nil && p.Repl == nil && !w.positional(name)
			switch {
			case plain && !assigned && p.Exp == nil:
				b.addAlt("", quoted)
			case plain && assigned && p.Exp == nil && vs.hasAlt:
				b.addAlt(vs.alt, quoted)
			case plain && !assigned && p.Exp != nil:
				if alt, ok := w.unsetValue(p); ok {
					b.addAlt(alt, quoted)
				} else {
					b.add(unknown, quoted)
				}
			default:
				b.add(unknown, quoted)
			}
			if identityVar(name) {
				b.cur.data |= dEnv
			}
			return
		}
		w.addValue(b, v, quoted)
	case *syntax.CmdSubst:
		b.cur.dyn, b.cur.subst = true, true
		if isPwd(p.Stmts) {
			b.add(w.pwd(), quoted)
			return
		}
		d := w.produce(p.Stmts, data{})
		b.cur.data |= d.kind
		if d.hasText && d.kind&^(dLiteral|dDecoded) == 0 {
			// $(echo rm) is rm: the output is known.
			w.addValue(b, strings.TrimRight(d.text, "\n"), quoted)
			return
		}
		if d.names != "" {
			// $(ls -d /*), $(find ~): the paths listed, as a pattern.
			b.started = true
			b.sb.WriteString(d.names)
			b.pb.WriteString(d.names)
			b.ab.WriteString(d.names)
			b.cur.glob = true
			return
		}
		b.add(unknown, quoted)
	case *syntax.ArithmExp:
		b.cur.dyn = true
		b.add(unknown, quoted)
	case *syntax.ProcSubst:
		b.cur.dyn, b.cur.subst = true, true
		d := w.produce(p.Stmts, data{})
		b.cur.data |= d.kind | dProc
		b.cur.proc = &d
		b.add("/dev/fd/63", true)
	case *syntax.ExtGlob:
		b.cur.glob = true
		b.started = true
		b.sb.WriteString(p.Op.String() + p.Pattern.Value + ")")
		b.pb.WriteString("*")
	case *syntax.BraceExp:
		// Only reached when a brace expansion sits where it cannot be
		// expanded (a nested word); treat its text as unknown.
		b.cur.dyn, b.cur.brace = true, true
		b.add(unknown, quoted)
	}
}

// addValue adds the value of an expansion; unquoted, bash splits it into
// fields on the characters of IFS.
func (w *walker) addValue(b *fieldBuilder, v string, quoted bool) {
	if quoted {
		b.add(v, true)
		return
	}
	for i, piece := range w.split(v) {
		if i > 0 {
			b.split()
			b.cur.dyn = true
		}
		b.add(piece, false)
		if strings.ContainsAny(piece, "*?[") {
			b.cur.glob = true
		}
	}
}

// resolveLit resolves an unquoted literal: backslash escapes are removed, and
// unescaped glob metacharacters mark the field as a pattern.
func (w *walker) resolveLit(b *fieldBuilder, s string) {
	if !strings.ContainsAny(s, "\\*?[") {
		b.add(s, false)
		return
	}
	b.started = true
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '\\':
			if i+1 < len(s) {
				i++
				b.sb.WriteByte(s[i])
				b.pb.WriteString(quoteGlob(s[i : i+1]))
			}
		case '*', '?', '[':
			if c != '[' || strings.IndexByte(s[i:], ']') > 0 {
				b.cur.glob = true
			}
			b.sb.WriteByte(c)
			b.pb.WriteByte(c)
		default:
			b.sb.WriteByte(c)
			b.pb.WriteByte(c)
		}
	}
}

// unescapeDouble removes the backslashes that are special inside double quotes.
func unescapeDouble(s string) string {
	if !strings.Contains(s, "\\") {
		return s
	}
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			switch s[i+1] {
			case '$', '`', '"', '\\':
				i++
			case '\n':
				i++
				continue
			}
		}
		sb.WriteByte(s[i])
	}
	return sb.String()
}

// ansiC decodes the escapes of bash's $'...' quoting.
func ansiC(s string) string {
	if !strings.Contains(s, "\\") {
		return s
	}
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 >= len(s) {
			sb.WriteByte(c)
			continue
		}
		i++
		switch c = s[i]; c {
		case 'a':
			sb.WriteByte('\a')
		case 'b':
			sb.WriteByte('\b')
		case 'e', 'E':
			sb.WriteByte(0x1b)
		case 'f':
			sb.WriteByte('\f')
		case 'n':
			sb.WriteByte('\n')
		case 'r':
			sb.WriteByte('\r')
		case 't':
			sb.WriteByte('\t')
		case 'v':
			sb.WriteByte('\v')
		case '\\', '\'', '"', '?':
			sb.WriteByte(c)
		case 'c':
			if i+1 < len(s) {
				i++
				sb.WriteByte(s[i] & 0x1f)
			}
		case 'x', 'u', 'U':
			digits := 2 // \xHH
			switch c {
			case 'u':
				digits = 4 // \uHHHH
			case 'U':
				digits = 8 // \UHHHHHHHH
			}
			j := i + 1
			for j < len(s) && j-i-1 < digits && isHex(s[j]) {
				j++
			}
			if j == i+1 {
				sb.WriteByte('\\')
				sb.WriteByte(c)
				continue
			}
			n, _ := strconv.ParseUint(s[i+1:j], 16, 32)
			if c == 'x' {
				sb.WriteByte(byte(n))
			} else if utf8.ValidRune(rune(n)) {
				sb.WriteRune(rune(n))
			}
			i = j - 1
		case '0', '1', '2', '3', '4', '5', '6', '7':
			j := i
			for j < len(s) && j-i < 3 && s[j] >= '0' && s[j] <= '7' {
				j++
			}
			n, _ := strconv.ParseUint(s[i:j], 8, 16)
			sb.WriteByte(byte(n))
			i = j - 1
		default:
			sb.WriteByte('\\')
			sb.WriteByte(c)
		}
	}
	v := sb.String()
	// bash ends the string at a NUL byte.
	v, _, _ = strings.Cut(v, "\x00")
	return v
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// split splits an unquoted expansion's value into fields on IFS.
func (w *walker) split(s string) []string {
	ifs := " \t\n"
	if v, ok := w.sh.vars["IFS"]; ok && v.known {
		ifs = v.s
	}
	if ifs == "" {
		return []string{s}
	}
	f := strings.FieldsFunc(s, func(r rune) bool { return strings.ContainsRune(ifs, r) })
	if len(f) == 0 {
		return []string{""}
	}
	return f
}

func paramName(p *syntax.ParamExp) string {
	if p.Param == nil {
		return ""
	}
	return p.Param.Value
}

// param resolves a parameter expansion when its value is known: a variable set
// earlier in the same command to a literal, or one whose meaning is fixed
// ($HOME is the home directory, whatever its path).
func (w *walker) param(p *syntax.ParamExp) (string, bool) {
	if p.Param == nil || p.Length || p.Width || p.IsSet ||
		p.NestedParam != nil || p.Names != 0 || p.Repl != nil || len(p.Modifiers) > 0 {
		return "", false
	}
	if p.Excl {
		// ${!ref}: the variable named by ref.
		if p.Index != nil || p.Slice != nil || p.Exp != nil {
			return "", false
		}
		ref, ok := w.varValue(p.Param.Value)
		if !ok || ref == "" {
			return "", false
		}
		return w.varValue(ref)
	}
	if p.Index != nil {
		if p.Slice != nil || p.Exp != nil {
			return "", false
		}
		elems, ok := w.elems(p)
		if !ok {
			return "", false
		}
		return strings.Join(elems, " "), true
	}
	if p.Slice != nil {
		// ${x:n:0} is empty whatever x holds.
		if l, ok := p.Slice.Length.(*syntax.Word); ok && l.Lit() == "0" {
			return "", true
		}
		v, ok := w.varValue(p.Param.Value)
		if !ok {
			return "", false
		}
		if p.Param.Value == "HOME" {
			v = homeValue
		}
		off, ok1 := arithLit(p.Slice.Offset)
		n, ok2 := len(v), true
		if p.Slice.Length != nil {
			n, ok2 = arithLit(p.Slice.Length)
		}
		if !ok1 || !ok2 {
			return "", false
		}
		if off < 0 {
			off += len(v)
		}
		off = max(0, min(off, len(v)))
		if n < 0 {
			n = len(v) + n - off
		}
		n = max(0, min(n, len(v)-off))
		return v[off : off+n], true
	}
	if p.Param.Value == "0" && p.Exp == nil && w.sh.arg0Known {
		return w.sh.arg0, true
	}
	if n, err := strconv.Atoi(p.Param.Value); err == nil && n > 0 && p.Exp == nil {
		if !w.sh.posKnown {
			return "", false
		}
		if n > len(w.sh.pos) {
			return "", true
		}
		return w.sh.pos[n-1], true
	}
	if name := p.Param.Value; (name == "@" || name == "*") && p.Exp == nil {
		if !w.sh.posKnown {
			return "", false
		}
		return strings.Join(w.sh.pos, " "), true
	}
	v, ok := w.varValue(p.Param.Value)
	if p.Exp != nil {
		switch p.Exp.Op {
		case syntax.DefaultUnset, syntax.DefaultUnsetOrNull, syntax.AssignUnset, syntax.AssignUnsetOrNull:
			if ok && v != "" {
				return v, true
			}
			if ok || w.unsetInScript(p.Param.Value) {
				if p.Exp.Word == nil {
					return "", true
				}
				fs := w.resolveParts(p.Exp.Word.Parts)
				if len(fs) == 1 && fs[0].known() {
					return fs[0].s, true
				}
			}
			return "", false
		case syntax.ErrorUnset, syntax.ErrorUnsetOrNull:
			// ${x:?}: bash stops if x is empty; otherwise it is x.
			return v, ok && (v != "" || p.Exp.Op == syntax.ErrorUnset)
		case syntax.RemSmallSuffix, syntax.RemLargeSuffix, syntax.RemSmallPrefix, syntax.RemLargePrefix:
			if !ok {
				return "", false
			}
			if v == "~" || strings.HasPrefix(v, "~/") {
				v = homeValue + v[1:]
			}
			if p.Param.Value == "PWD" && !strings.HasPrefix(v, "/") {
				return "", false // the workspace's own path is not known
			}
			return w.trimPattern(v, p.Exp.Op, p.Exp.Word)
		case syntax.UpperFirst, syntax.UpperAll, syntax.LowerFirst, syntax.LowerAll:
			if !ok || p.Exp.Word != nil && p.Exp.Word.Lit() != "" && p.Exp.Word.Lit() != "?" {
				return "", false
			}
			switch p.Exp.Op {
			case syntax.UpperAll:
				return strings.ToUpper(v), true
			case syntax.LowerAll:
				return strings.ToLower(v), true
			}
			if v == "" {
				return v, true
			}
			r, size := utf8.DecodeRuneInString(v)
			if p.Exp.Op == syntax.UpperFirst {
				return strings.ToUpper(string(r)) + v[size:], true
			}
			return strings.ToLower(string(r)) + v[size:], true
		default:
			return "", false
		}
	}
	return v, ok
}

// unsetValue is what an expansion with an operator gives when its variable is
// not set: the default word of ${x:-word}, nothing for ${x:+word} or ${x%pat}.
func (w *walker) unsetValue(p *syntax.ParamExp) (string, bool) {
	switch p.Exp.Op {
	case syntax.DefaultUnset, syntax.DefaultUnsetOrNull, syntax.AssignUnset, syntax.AssignUnsetOrNull:
		if p.Exp.Word == nil {
			return "", true
		}
		fs := w.resolveParts(p.Exp.Word.Parts)
		switch {
		case len(fs) == 0:
			return "", true
		case len(fs) == 1 && fs[0].known():
			return fs[0].s, true
		case len(fs) == 1 && fs[0].hasAlt:
			return fs[0].alt, true
		}
	case syntax.AlternateUnset, syntax.AlternateUnsetOrNull, syntax.RemSmallSuffix, syntax.RemLargeSuffix,
		syntax.RemSmallPrefix, syntax.RemLargePrefix, syntax.UpperFirst, syntax.UpperAll, syntax.LowerFirst, syntax.LowerAll:
		return "", true
	}
	return "", false
}

// trimPattern removes the shortest or longest prefix or suffix of v that
// matches the shell pattern in word, as ${v%pat} and its kin do.
func (w *walker) trimPattern(v string, op syntax.ParExpOperator, word *syntax.Word) (string, bool) {
	if len(v) > 256 {
		return "", false
	}
	pat := ""
	if word != nil {
		fs := w.resolveParts(word.Parts)
		if len(fs) > 1 || len(fs) == 1 && !fs[0].known() {
			return "", false
		}
		if len(fs) == 1 {
			pat = fs[0].pat
			if !fs[0].glob {
				pat = pattern.QuoteMeta(fs[0].s, 0)
			}
		}
	}
	expr, err := pattern.Regexp(pat, pattern.EntireString)
	if err != nil {
		return "", false
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return "", false
	}
	n := len(v)
	switch op {
	case syntax.RemSmallSuffix:
		for i := n; i >= 0; i-- {
			if re.MatchString(v[i:]) {
				return v[:i], true
			}
		}
	case syntax.RemLargeSuffix:
		for i := 0; i <= n; i++ {
			if re.MatchString(v[i:]) {
				return v[:i], true
			}
		}
	case syntax.RemSmallPrefix:
		for i := 0; i <= n; i++ {
			if re.MatchString(v[:i]) {
				return v[i:], true
			}
		}
	case syntax.RemLargePrefix:
		for i := n; i >= 0; i-- {
			if re.MatchString(v[:i]) {
				return v[i:], true
			}
		}
	}
	return v, true
}

// homeValue stands for the home directory where its text matters (a slice of
// $HOME); canon maps it back to "~".
const homeValue = "/home/user"

// arithLit returns the value of an arithmetic expression that is a literal
// number.
func arithLit(x syntax.ArithmExpr) (int, bool) {
	switch x := x.(type) {
	case *syntax.Word:
		n, err := strconv.Atoi(x.Lit())
		return n, err == nil
	case *syntax.UnaryArithm:
		if x.Op == syntax.Minus {
			n, ok := arithLit(x.X)
			return -n, ok
		}
	case *syntax.ParenArithm:
		return arithLit(x.X)
	}
	return 0, false
}

// elems returns the values of an array expansion (${a[@]}, ${a[1]}, $@) when
// they are known.
func (w *walker) elems(p *syntax.ParamExp) ([]string, bool) {
	name := paramName(p)
	var all []string
	switch {
	case name == "@" || name == "*":
		if !w.sh.posKnown {
			return nil, false
		}
		all = w.sh.pos
	default:
		a, ok := w.sh.arrays[name]
		if !ok {
			return nil, false
		}
		all = a
	}
	if p.Index == nil {
		return all, true
	}
	idx, ok := p.Index.(*syntax.Word)
	if !ok {
		return nil, false
	}
	switch l := idx.Lit(); l {
	case "@", "*":
		return all, true
	default:
		n, err := strconv.Atoi(l)
		if err != nil || n < 0 {
			return nil, false
		}
		if n >= len(all) {
			return []string{""}, true
		}
		return all[n : n+1], true
	}
}

// positional reports whether a parameter is a positional or special one
// ($1, $@, $?), which an empty-by-default reading does not fit.
func (w *walker) positional(name string) bool {
	if name == "" {
		return true
	}
	c := name[0]
	return c >= '0' && c <= '9' || strings.ContainsRune("@*#?$!-_", rune(c))
}

// varValue returns the value of a variable when the walker knows it.
func (w *walker) varValue(name string) (string, bool) {
	if v, ok := w.sh.vars[name]; ok {
		return v.s, v.known
	}
	switch name {
	case "HOME":
		return "~", true
	case "PATH":
		return "/usr/local/bin:/usr/bin:/bin", true
	case "PWD":
		return w.pwd(), true
	case "TMPDIR":
		return "/tmp", true
	case "SHELL", "BASH":
		return "/bin/sh", true
	}
	return "", false
}

func (w *walker) unsetInScript(name string) bool {
	v, ok := w.sh.vars[name]
	return ok && v.unset
}

func (w *walker) pwd() string {
	if w.sh.cwd == "" {
		return "."
	}
	return w.sh.cwd
}

// isPwd reports whether a command substitution is $(pwd): its value is the
// current directory.
func isPwd(stmts []*syntax.Stmt) bool {
	if len(stmts) != 1 || len(stmts[0].Redirs) > 0 {
		return false
	}
	ce, ok := stmts[0].Cmd.(*syntax.CallExpr)
	return ok && len(ce.Args) == 1 && len(ce.Assigns) == 0 && ce.Args[0].Lit() == "pwd"
}

// secretVarName reports whether a variable's name says it holds a credential.
func secretVarName(name string) bool {
	u := strings.ToUpper(name)
	if strings.Contains(u, "SOCK") || strings.HasSuffix(u, "_FILE") || strings.HasSuffix(u, "_PATH") {
		return false
	}
	for _, s := range []string{"TOKEN", "SECRET", "PASSWORD", "PASSWD", "API_KEY", "APIKEY", "ACCESS_KEY",
		"PRIVATE_KEY", "CREDENTIAL", "_PAT", "SESSION_KEY"} {
		if strings.Contains(u, s) {
			return true
		}
	}
	for _, tok := range strings.Split(u, "_") {
		if tok == "AUTH" || tok == "PASS" || tok == "PWD" && u != "PWD" && u != "OLDPWD" {
			return true
		}
	}
	return false
}

// identityVar reports whether a variable names the machine or its user.
func identityVar(name string) bool {
	switch name {
	case "USER", "LOGNAME", "HOSTNAME", "UID", "EUID":
		return true
	}
	return false
}
