package policy

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// corpusCase is one labelled command: what it should get, and why.
type corpusCase struct {
	Cmd    string `json:"cmd"`
	Expect string `json:"expect"`
	Why    string `json:"why"`
	// Optional, in our own cases: the rule that should decide, and words the
	// reason should hold.
	Rule   string   `json:"rule,omitempty"`
	Reason []string `json:"reason,omitempty"`
	// Class is the class of the issue-10 corpus a case belongs to.
	Class string `json:"class,omitempty"`
}

func readCorpus(t testing.TB, name string) []corpusCase {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []corpusCase
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "//") {
			continue
		}
		var c corpusCase
		if err := json.Unmarshal([]byte(line), &c); err != nil {
			t.Fatalf("%s:%d: %v", name, n, err)
		}
		out = append(out, c)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// scoreCorpus runs a labelled corpus and checks the quality bar: no deny- or
// confirm-class command allowed, at least 90% of allow-class allowed, at least
// 85% of deny-class denied.
func scoreCorpus(t *testing.T, name string, exact bool) {
	cases := readCorpus(t, name)
	count := map[string]int{}
	hit := map[string]int{}
	for _, c := range cases {
		v := Classify(c.Cmd)
		count[c.Expect]++
		got := v.Decision.String()
		if got == c.Expect {
			hit[c.Expect]++
		}
		switch {
		case c.Expect != "allow" && v.Decision == Allow:
			t.Errorf("%s command allowed: %q (%s)\n\tgot %s by %s: %s", c.Expect, c.Cmd, c.Why, got, v.Rule, v.Reason)
		case exact && got != c.Expect:
			t.Errorf("%q: got %s by %s (%s), want %s (%s)", c.Cmd, got, v.Rule, v.Reason, c.Expect, c.Why)
		case got != c.Expect && testing.Verbose():
			t.Logf("miss %q: got %s by %s (%s), want %s", c.Cmd, got, v.Rule, v.Reason, c.Expect)
		}
		if c.Rule != "" && v.Rule != c.Rule {
			t.Errorf("%q: decided by %s, want %s (%s)", c.Cmd, v.Rule, c.Rule, v.Reason)
		}
		for _, word := range c.Reason {
			if !strings.Contains(v.Reason, word) {
				t.Errorf("%q: reason %q does not say %q", c.Cmd, v.Reason, word)
			}
		}
	}
	pct := func(k string) float64 {
		if count[k] == 0 {
			return 100
		}
		return 100 * float64(hit[k]) / float64(count[k])
	}
	t.Logf("%s: allow %d/%d (%.1f%%), confirm %d/%d (%.1f%%), deny %d/%d (%.1f%%)", name,
		hit["allow"], count["allow"], pct("allow"), hit["confirm"], count["confirm"], pct("confirm"),
		hit["deny"], count["deny"], pct("deny"))
	if pct("allow") < 90 {
		t.Errorf("allow-class allowed: %.1f%%, want at least 90%%", pct("allow"))
	}
	if pct("deny") < 85 {
		t.Errorf("deny-class denied: %.1f%%, want at least 85%%", pct("deny"))
	}
}

func TestCorpusPublic(t *testing.T) { scoreCorpus(t, "corpus-public.jsonl", false) }

// TestCorpusOwn runs our own labelled commands, which must all get exactly
// their label.
func TestCorpusOwn(t *testing.T) { scoreCorpus(t, "cases.jsonl", true) }

// TestCorpusRedteam runs a red-team set written without looking at our own
// cases: ordinary development across ecosystems and bypass attempts. Every
// command must get exactly its label.
func TestCorpusRedteam(t *testing.T) { scoreCorpus(t, "redteam.jsonl", true) }

// TestCorpusBlind runs the corpus written for issue 10 blind to its fixes:
// dangerous commands of each class it names, which must never be allowed,
// and safe look-alikes, at least 95% of which must be allowed. The rate of
// each class is logged (go test -v).
func TestCorpusBlind(t *testing.T) { scoreClasses(t, "blind.jsonl") }

// TestCorpusBlind2 runs the second corpus written blind to the fixes of
// issue 10's second pass (arithmetic in every context, wrappers read as they
// read their arguments, git outside the workspace, build and tool files,
// agent configuration, disk filling, builtins), with the same bar.
func TestCorpusBlind2(t *testing.T) { scoreClasses(t, "blind2.jsonl") }

// TestCorpusVariations runs the variations of the same classes written after
// each pass's fixes, with the same bar.
func TestCorpusVariations(t *testing.T) { scoreClasses(t, "variations.jsonl") }

func scoreClasses(t *testing.T, name string) {
	type rate struct{ ok, n int }
	rates := map[string]*rate{}
	safe, safeOK := 0, 0
	for _, c := range readCorpus(t, name) {
		v := Classify(c.Cmd)
		kind := "safe"
		if c.Expect != "allow" {
			kind = "dangerous"
		}
		key := c.Class + " " + kind
		if rates[key] == nil {
			rates[key] = &rate{}
		}
		r := rates[key]
		r.n++
		switch {
		case kind == "dangerous" && v.Decision == Allow:
			t.Errorf("dangerous command allowed: %q (%s)\n\tby %s: %s", c.Cmd, c.Why, v.Rule, v.Reason)
		case kind == "dangerous":
			r.ok++
		case v.Decision == Allow:
			r.ok++
			safeOK++
		default:
			t.Logf("safe look-alike not allowed: %q: %s by %s (%s)", c.Cmd, v.Decision, v.Rule, v.Reason)
		}
		if kind == "safe" {
			safe++
		}
	}
	keys := make([]string, 0, len(rates))
	for k := range rates {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		t.Logf("%-24s %d/%d", k, rates[k].ok, rates[k].n)
	}
	if safe > 0 && float64(safeOK) < 0.95*float64(safe) {
		t.Errorf("safe look-alikes allowed: %d/%d, want at least 95%%", safeOK, safe)
	}
}
