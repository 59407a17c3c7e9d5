package policy

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// FuzzClassify: Classify never panics, and always answers with a decision, a
// reason and a rule, whatever it is given.
func FuzzClassify(f *testing.F) {
	for _, name := range []string{"corpus-public.jsonl", "cases.jsonl", "redteam.jsonl"} {
		for _, c := range readCorpus(f, name) {
			f.Add(c.Cmd)
		}
	}
	for _, s := range largeInputs(rand.New(rand.NewPCG(1, 2)), 2<<10) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, cmd string) {
		checkVerdict(t, cmd, Classify(cmd))
	})
}

func checkVerdict(t *testing.T, cmd string, v Verdict) {
	t.Helper()
	if v.Decision != Allow && v.Decision != Confirm && v.Decision != Deny {
		t.Fatalf("%q: decision %d", cmd, v.Decision)
	}
	if v.Reason == "" || v.Rule == "" {
		t.Fatalf("%q: verdict without reason or rule: %+v", cmd, v)
	}
	if len(v.Part) > 1000 {
		t.Fatalf("%q: part of %d bytes", cmd, len(v.Part))
	}
}

// largeInputs builds inputs of about size bytes shaped to be hard: deep
// nesting, long lists, long words, brace and variable blow-ups, many here-docs,
// strings parsed again (sh -c, eval), and random bytes.
func largeInputs(r *rand.Rand, size int) []string {
	rep := func(s string) string { return strings.Repeat(s, size/len(s)+1)[:size] }
	nest := func(open, close string) string {
		n := size / (len(open) + len(close))
		return strings.Repeat(open, n) + "ls" + strings.Repeat(close, n)
	}
	random := make([]byte, size)
	for i := range random {
		random[i] = byte(r.IntN(256))
	}
	shellish := make([]byte, size)
	const alphabet = "ab $(){}[]<>|&;'\"\\`!*?~-=\n\t#rm/.,:%@^+"
	for i := range shellish {
		shellish[i] = alphabet[r.IntN(len(alphabet))]
	}
	doubling := "x=ab; " + strings.Repeat("x=$x$x; ", size/9) + "$x"
	return []string{
		rep("ls -la; "),
		rep("a | "),
		rep("x && "),
		rep("rm -rf ./b "),
		"echo " + rep("a"),
		nest("$(", ")"),
		nest("`", "`"),
		nest("(", ")"),
		nest("{ ", "; }"),
		nest("<(", ")"),
		nest("$((", "))"),
		nest("\"$(echo ", ")\""),
		nest("sh -c '", "'"),
		nest("eval \"", "\""),
		nest("bash -c \"bash -c '", "'\""),
		rep("{a,b}"),
		"echo " + rep("{a,b}"),
		rep("{1..1000000}"),
		doubling,
		rep("cat <<EOF\nx\nEOF\n"),
		rep("f() { f | f & }; "),
		rep("alias a=b; alias b=a; a; "),
		rep("for i in 1 2; do echo $i; done; "),
		rep("x=rm; $x "),
		rep("[[ -v 'a[$(ls)]' ]]; "),
		rep("echo ${a:-${b:-${c:-"),
		rep("git -c alias.x='!git -c alias.y=\"!ls\" y' x; "),
		rep("find . -exec find . -exec ls {} \\; \\; "),
		rep("xargs xargs xargs "),
		rep("sudo env timeout 1 nice "),
		rep("/???/r? "),
		rep("python -c 'import os; os.system(\"ls\")'; "),
		rep("awk 'BEGIN{system(\"ls\")}'; "),
		rep("sed 's/a/b/e;'"),
		string(random),
		string(shellish),
	}
}

// TestLargeInputs is the property of the fuzz target on inputs of 64 KB: every
// shape gets a verdict without a panic. (The time it takes is measured by
// BenchmarkLargeInputs, not asserted here.)
func TestLargeInputs(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i, in := range largeInputs(r, 64<<10) {
		v := Classify(in)
		checkVerdict(t, in[:min(len(in), 40)], v)
		if testing.Verbose() {
			t.Logf("input %d (%.20q...): %s by %s", i, in, v.Decision, v.Rule)
		}
	}
}

func TestTooLong(t *testing.T) {
	v := Classify(strings.Repeat("a", maxInput+1))
	if v.Decision != Deny || v.Rule != "default:too-long" {
		t.Errorf("got %+v", v)
	}
}
