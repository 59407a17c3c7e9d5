package policy

import (
	"strings"
	"testing"
)

func fields(s string) []field {
	var out []field
	for _, w := range strings.Fields(s) {
		out = append(out, lit(w))
	}
	return out
}

// TestParseArgs: the one parser reads each form a program description can
// declare.
func TestParseArgs(t *testing.T) {
	show := func(p parsed) string {
		var sb strings.Builder
		for _, o := range p.opts {
			sb.WriteString(o.name)
			if o.has {
				sb.WriteString("=" + o.val.s)
			}
			for _, v := range o.vals[min(1, len(o.vals)):] {
				sb.WriteString("," + v.s)
			}
			sb.WriteString(" ")
		}
		sb.WriteString("|")
		for _, o := range p.ops {
			sb.WriteString(" " + o.s)
		}
		return sb.String()
	}
	for _, tt := range []struct {
		args string
		sp   optSpec
		want string
	}{
		{"-rf x y", spec(""), "-r -f | x y"},
		{"-ofile -o file2 x", spec("o"), "-o=file -o=file2 | x"},
		{"--output=a --output b c", spec("", "--output"), "--output=a --output=b | c"},
		{"x -- -r", spec(""), "| x -r"},
		// abbreviations resolve to the one option they can be, or to the
		// shortest when it prefixes all the others
		{"--sig KILL 5 rm", spec("", "--signal", "--kill-after").firstOperand(), "--signal=KILL | 5 rm"},
		{"--forc x", spec("").withFlags("--force", "--force-with-lease"), "--force | x"},
		{"--fo x", spec("", "--foo", "--fob"), "--fo | x"},
		{"--sig KILL", spec("", "--signal").noAbbrev(), "--sig | KILL"},
		// optional values: in the same word only
		{"-i.bak -n f", spec("").optional("i"), "-i=.bak -n | f"},
		{"-i f", spec("").optional("i"), "-i | f"},
		{"--in-place f --in-place=.b", spec("").optional("", "--in-place"), "--in-place --in-place=.b | f"},
		// the first operand ends the options
		{"-n 5 rm -rf ~", spec("n").firstOperand(), "-n=5 | rm -rf ~"},
		// options after which the rest is the program's
		{"-c code -x y", spec("c").endAt("-c"), "-c=code | -x y"},
		// whole words, two values, values up to ";"
		{". -name -delete -print", findArgs, "-name=-delete -print | ."},
		{". -exec rm {} ; -fprintf out %p", findArgs, "-exec=rm,{} -fprintf=out,%p | ."},
		{"-9 -1", killArgs, "-9 | -1"},
		{"-s KILL 1 2", killArgs, "-s=KILL | 1 2"},
		// + options, and a long option written with one dash
		{"+O extglob -c x", shellArgs, "+O=extglob -c | x"},
		{"-exec prog -v", spec("", "-exec"), "-exec=prog -v |"},
		// dd's operands
		{"if=a of=b count=3", spec(""), "| if=a of=b count=3"},
	} {
		if got := show(parseArgs(fields(tt.args), tt.sp)); got != tt.want {
			t.Errorf("%q: got %q, want %q", tt.args, got, tt.want)
		}
	}
	if got := parseArgs(fields("if=a of=b of=c"), spec("")).keyed("of"); len(got) != 2 || got[1].s != "c" {
		t.Errorf("keyed(of) = %v", got)
	}
}

// TestArgumentReading: options are read as each program reads them. Every
// dangerous command here was allowed when options were read without their
// values, abbreviations were not resolved, or an option's value was read as
// an option.
func TestArgumentReading(t *testing.T) {
	for _, tt := range []struct {
		cmd  string
		want Decision
	}{
		// A wrapper's -p acts on a process only among its own options.
		{"taskset 0x1 rm -rf ~ -p", Deny},
		{"chrt 5 rm -rf ~ -p", Deny},
		{"prlimit rm -rf ~ --pid", Deny},
		// Abbreviated long options are the options they abbreviate.
		{"timeout --sig KILL 5 rm -rf ~", Deny},
		{"nice --adj 5 rm -rf ~", Deny},
		{"ionice --cl 3 rm -rf ~", Deny},
		{"env --split-str='rm -rf ~'", Deny},
		{"sed --in-pl 's/a/b/' .claude/settings.json", Confirm},
		{"rm --rec --force src", Confirm},
		{"git reset --har HEAD~3", Confirm},
		{"git checkout --forc main", Confirm},
		{"git worktree remove --forc ../x", Confirm},
		{"git branch --del --forc x", Confirm},
		{"tar --to-com='rm -rf ~' -xf a.tar", Deny},
		{"sort --compress-prog='rm -rf ~' f", Deny},
		{"fuser --ki 80/tcp", Confirm},
		{"gpg --export-secret-k -a me", Deny},
		// An option that takes no value does not eat the next word; one
		// whose value is optional takes it only in its own word.
		{"cp --backup src .mcp.json", Confirm},
		{"tee --output-error .mcp.json < x", Confirm},
		{"shred -x notes.txt", Confirm},
		// A mode that starts with a dash is chmod's mode, not an option.
		{"chmod -w .claude/settings.json", Confirm},
		// go's flags have one dash: -exec names a program.
		{"go test -exec 'rm -rf ~' ./...", Deny},
		// An editor's files are the files it writes.
		{"vim -es -c '%s/a/b/' -c wq .claude/settings.json", Confirm},
	} {
		if v := Classify(tt.cmd); v.Decision < tt.want {
			t.Errorf("%q: %s by %s (%s), want at least %s", tt.cmd, v.Decision, v.Rule, v.Reason, tt.want)
		}
	}
	for _, cmd := range []string{
		"kill -0 $$",
		"git clean --dry-run -fdx",
		"taskset -p 0x1 1234",
		"find . -name -delete -print",
		"command -pv rm",
		"env -S'ls -la'",
		"go test -run TestX -count=1 ./...",
		"go build -o bin/app .",
		"sed -n '1,5p' README.md",
		"python3 -m pytest -q",
		"perl -ne 'print if /x/' f.txt",
	} {
		if v := Classify(cmd); v.Decision == Deny {
			t.Errorf("%q: %s by %s (%s), want it not denied", cmd, v.Decision, v.Rule, v.Reason)
		}
	}
}
