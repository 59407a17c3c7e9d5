package policy

import (
	"slices"
	"strings"
)

// The one argument parser. Every program description says how its program
// reads its arguments with an optSpec, and every check reads them through
// parseArgs: which options take a value (in the same word or the next), which
// take one only in the same word, which take two, or every word up to a ";"
// (find -exec); whether long options may be abbreviated, options are whole
// words (find -name, kill -9) or may start with + (bash +O), and whether the
// first operand ends the options (a wrapper's command, git's subcommand).
// Reading an option's value as an option, or an option as an operand, is how
// commands get misjudged: find . -name -delete deletes nothing, command -pv rm
// runs nothing, env --split-s 'rm -rf ~' runs rm.

// optSpec says how a program reads its arguments. The zero value reads them as
// getopt does with no option taking a value: short options cluster (-rf), long
// ones start with --, options and operands mix, and -- ends the options.
type optSpec struct {
	short    string          // short options that take a value: -o FILE, -oFILE
	long     map[string]bool // long options that take a value: --output FILE, --output=FILE
	optShort string          // short options whose value, if any, is in the same word: -i.bak
	optLong  map[string]bool // long options whose value, if any, follows "=": --exec-path=DIR
	flags    map[string]bool // long options that take no value, named so that abbreviations resolve
	two      map[string]bool // options that take two values: bwrap --bind SRC DST
	until    map[string]bool // options whose values are the words up to ";" or "+": find -exec CMD {} ;
	first    bool            // the first operand ends the options
	plus     bool            // options may start with + as well as -: bash +O extglob
	words    bool            // options are whole words, never clusters: find -name, kill -9
	maxOpts  int             // the options end after this many (kill -9 -1: -1 is a pid); 0 for no limit
	exact    bool            // long options are never abbreviated (git's own options)
	// longs are all the long options named, sorted, made the first time
	// resolve needs them.
	longs []string
	// ends are options after which the options end: python -c CODE and
	// -m MODULE take the rest as the program's arguments.
	ends map[string]bool
	// splits are options whose value is itself split into arguments that
	// take the option's place (env -S); split does it.
	splits map[string]bool
	split  func(opt string, v field) []field
}

// spec makes an optSpec from the short options that take a value and the
// long ones that do (a long option may be written with one dash: go's -exec).
func spec(short string, long ...string) optSpec {
	sp := optSpec{short: short}
	if len(long) > 0 {
		sp.long = set(long...)
	}
	return sp
}

// ready returns sp with its long options listed for resolve, for a spec made
// once and read many times.
func (sp optSpec) ready() optSpec {
	sp.index()
	return sp
}

// index lists sp's long options, sorted, for resolve.
func (sp *optSpec) index() {
	sp.longs = []string{}
	for _, m := range []map[string]bool{sp.long, sp.optLong, sp.two, sp.until, sp.flags} {
		for k := range m {
			if strings.HasPrefix(k, "--") {
				sp.longs = append(sp.longs, k)
			}
		}
	}
	slices.Sort(sp.longs)
}

// firstOperand returns sp with options ending at the first operand, as for
// programs that run a command given after their own options (ssh HOST CMD -x).
func (sp optSpec) firstOperand() optSpec {
	sp.first = true
	return sp
}

// optional returns sp with options whose value is optional: short letters
// take one attached (-i.bak), long options one after "=" (--exec-path=DIR).
func (sp optSpec) optional(short string, long ...string) optSpec {
	sp.optShort += short
	sp.optLong = merge(sp.optLong, long)
	return sp
}

// withFlags returns sp knowing long options that take no value, so that an
// abbreviation of one is not taken for another (--rec is --recursive).
func (sp optSpec) withFlags(long ...string) optSpec {
	sp.flags = merge(sp.flags, long)
	return sp
}

// withTwo returns sp with options that take two values.
func (sp optSpec) withTwo(long ...string) optSpec {
	sp.two = merge(sp.two, long)
	return sp
}

// withUntil returns sp with options whose values run to a word ";" or "+".
func (sp optSpec) withUntil(long ...string) optSpec {
	sp.until = merge(sp.until, long)
	return sp
}

// endAt returns sp ending the options after any of names.
func (sp optSpec) endAt(names ...string) optSpec {
	sp.ends = merge(sp.ends, names)
	return sp
}

// noAbbrev returns sp reading long options only as written in full.
func (sp optSpec) noAbbrev() optSpec {
	sp.exact = true
	return sp
}

// plusToo returns sp reading options that start with + as well.
func (sp optSpec) plusToo() optSpec {
	sp.plus = true
	return sp
}

// wholeWords returns sp reading every option as a whole word.
func (sp optSpec) wholeWords() optSpec {
	sp.words = true
	return sp
}

// atMost returns sp ending the options after n of them.
func (sp optSpec) atMost(n int) optSpec {
	sp.maxOpts = n
	return sp
}

func merge(m map[string]bool, names []string) map[string]bool {
	out := make(map[string]bool, len(m)+len(names))
	for k := range m {
		out[k] = true
	}
	for _, n := range names {
		out[n] = true
	}
	return out
}

// parsed is a program's arguments split into options and operands.
type parsed struct {
	opts []opt
	ops  []field
	at   []int // at[i] is the index in the arguments of ops[i]
}

type opt struct {
	name string  // "-o", "--output" (an abbreviation resolved); a short cluster gives one opt per letter
	val  field   // the value, for options that take one
	vals []field // the values of an option that takes several (two, until)
	has  bool    // a value was given
	at   int     // the index in the arguments of the word the option is in
}

// isOpt reports whether an argument is an option rather than an operand (for
// programs read the getopt way).
func isOpt(s string) bool { return len(s) > 1 && s[0] == '-' }

// valueKind says how many words an option takes.
type valueKind int

const (
	noValue valueKind = iota
	oneValue
	optValue
	twoValues
	untilValues
)

func (sp *optSpec) kindOf(name string) valueKind {
	switch {
	case sp.long[name]:
		return oneValue
	case sp.optLong[name]:
		return optValue
	case sp.two[name]:
		return twoValues
	case sp.until[name]:
		return untilValues
	}
	return noValue
}

// known reports whether a long option is one the spec names.
func (sp *optSpec) known(name string) bool {
	return sp.long[name] || sp.optLong[name] || sp.two[name] || sp.until[name] || sp.flags[name]
}

// resolve returns the long option name abbreviates (getopt_long, argparse and
// git's parse-options accept any unambiguous prefix): the one option the spec
// names that starts with it, or, when several do, the one that is a prefix of
// all the others (a spec may gather the options of several subcommands: git
// checkout --forc is --force, though push also has --force-with-lease);
// otherwise name.
func (sp *optSpec) resolve(name string) string {
	if sp.exact || !strings.HasPrefix(name, "--") || len(name) < 3 || sp.known(name) {
		return name
	}
	if sp.longs == nil {
		sp.index()
	}
	i, _ := slices.BinarySearch(sp.longs, name)
	j := i
	for j < len(sp.longs) && strings.HasPrefix(sp.longs[j], name) {
		j++
	}
	found := sp.longs[i:j]
	if len(found) == 0 {
		return name
	}
	short := found[0]
	for _, k := range found[1:] {
		if len(k) < len(short) {
			short = k
		}
	}
	for _, k := range found {
		if !strings.HasPrefix(k, short) {
			return name // ambiguous: the program refuses it
		}
	}
	return short
}

// isOptWord reports whether an argument is an option under sp.
func (sp *optSpec) isOptWord(s string) bool {
	return len(s) > 1 && (s[0] == '-' || sp.plus && s[0] == '+')
}

// parseArgs splits args into options and operands as sp says the program
// reads them.
func parseArgs(args []field, sp optSpec) parsed {
	var p parsed
	operand := func(i int) {
		p.ops = append(p.ops, args[i])
		p.at = append(p.at, i)
	}
	rest := func(from int) {
		for i := from; i < len(args); i++ {
			operand(i)
		}
	}
	// value takes the next word as an option's value.
	i := 0
	next := func(o *opt) {
		if i+1 < len(args) {
			i++
			o.val, o.has = args[i], true
		}
	}
	ended := false // an option that ends the options was read
	// splice puts the words an option's value splits into in its place.
	splice := func(o opt) {
		if sp.split == nil || !sp.splits[o.name] || !o.has {
			return
		}
		words := sp.split(o.name, o.val)
		args = append(append(append([]field(nil), args[:i+1]...), words...), args[i+1:]...)
	}
	long := func(a field, s string) {
		name, val, hasVal := strings.Cut(s, "=")
		name = sp.resolve(name)
		o := opt{name: name, at: i}
		switch sp.kindOf(name) {
		case oneValue, optValue:
			if hasVal {
				o.val, o.has = a, true
				o.val.s, o.val.raw = val, ""
			} else if sp.kindOf(name) == oneValue {
				next(&o)
			}
		case twoValues:
			for k := 0; k < 2 && i+1 < len(args); k++ {
				i++
				o.vals = append(o.vals, args[i])
			}
			o.has = len(o.vals) > 0
			if o.has {
				o.val = o.vals[0]
			}
		case untilValues:
			for i+1 < len(args) && args[i+1].s != ";" && args[i+1].s != "+" {
				i++
				o.vals = append(o.vals, args[i])
			}
			if i+1 < len(args) {
				i++ // the terminator
			}
			o.has = len(o.vals) > 0
			if o.has {
				o.val = o.vals[0]
			}
		default:
			if hasVal {
				// --flag=x: a value the option does not take; keep it
				// for checks that look (--recursive=...).
				o.val, o.has = a, true
				o.val.s, o.val.raw = val, ""
			}
		}
		p.opts = append(p.opts, o)
		splice(o)
		if sp.ends[o.name] {
			ended = true
		}
	}
	for ; i < len(args); i++ {
		a := args[i]
		s := a.s
		switch {
		case ended || sp.maxOpts > 0 && len(p.opts) >= sp.maxOpts:
			rest(i)
			return p
		case s == "--":
			rest(i + 1)
			return p
		case !sp.isOptWord(s):
			if sp.first {
				rest(i)
				return p
			}
			operand(i)
		case sp.words || strings.HasPrefix(s, "--"):
			long(a, s)
		default:
			// A long option written with one dash (go -exec, java -jar).
			if name, _, _ := strings.Cut(s, "="); sp.known(name) {
				long(a, s)
				continue
			}
			for j := 1; j < len(s); j++ {
				ch := s[j]
				o := opt{name: string(s[0]) + string(ch), at: i}
				switch {
				case strings.IndexByte(sp.short, ch) >= 0:
					if j+1 < len(s) {
						o.val, o.has = a, true
						o.val.s, o.val.raw = s[j+1:], ""
					} else {
						next(&o)
					}
					j = len(s)
				case strings.IndexByte(sp.optShort, ch) >= 0:
					if j+1 < len(s) {
						o.val, o.has = a, true
						o.val.s, o.val.raw = s[j+1:], ""
					}
					j = len(s)
				}
				p.opts = append(p.opts, o)
				splice(o)
				if sp.ends[o.name] {
					ended = true
				}
			}
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

// keyed returns the values of the operands KEY=VALUE with the given key, the
// way dd reads its arguments (of=FILE).
func (p parsed) keyed(key string) []field {
	var out []field
	for _, o := range p.ops {
		if v, ok := strings.CutPrefix(o.s, key+"="); ok {
			f := o
			f.s, f.raw, f.glob, f.pat = v, "", false, ""
			out = append(out, f)
		}
	}
	return out
}

// gitSub returns the arguments of git's subcommand, read once.
func (c *call) gitSub() parsed {
	if !c.subOK {
		ops := c.opts().ops
		c.gitArgs, c.subOK = parseArgs(ops[min(1, len(ops)):], gitSubArgs), true
	}
	return c.gitArgs
}

// opts parses the call's arguments as its program reads them.
func (c *call) opts() parsed {
	if !c.parsedOK {
		c.parsed, c.parsedOK, c.subOK = parseArgs(c.args(), c.spec), true, false
	}
	return c.parsed
}
