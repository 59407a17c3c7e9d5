package policy

import (
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var updateDocs = flag.Bool("update-docs", false, "rewrite the list of rule ids in docs/policy.md from the table")

// TestRuleTable: every rule has an id and a line, ids are unique, and every
// plain rule is named by some check (a rule nothing decides is not listed).
func TestRuleTable(t *testing.T) {
	seen := map[string]bool{}
	for r := ruleNone + 1; r < ruleCount; r++ {
		id, covers := ruleTable[r].id, ruleTable[r].covers
		if id == "" || covers == "" {
			t.Errorf("rule %d has id %q and covers %q: fill in both", r, id, covers)
		}
		if seen[id] {
			t.Errorf("rule id %q declared twice", id)
		}
		seen[id] = true
	}
	for v := range verbCount {
		for n := range nounCount {
			id := pathRuleID(v, n).id()
			if seen[id] {
				t.Errorf("path rule %q has the id of another rule", id)
			}
			seen[id] = true
			if info, ok := DescribeRule("default:" + id); !ok || info.Covers != pathRuleID(v, n).covers() {
				t.Errorf("DescribeRule(default:%s) = %+v, %v", id, info, ok)
			}
		}
	}
	if _, ok := DescribeRule("default:no-such-rule"); ok {
		t.Error("DescribeRule knows a rule that is not in the table")
	}
	// The constants the checks name.
	used := map[string]bool{}
	files, _ := filepath.Glob("*.go")
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") || f == "ruleids.go" {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(af, func(n ast.Node) bool {
			if id, ok := n.(*ast.Ident); ok && strings.HasPrefix(id.Name, "rule") {
				used[id.Name] = true
			}
			return true
		})
	}
	for r := ruleNone + 1; r < ruleCount; r++ {
		name := "rule"
		for _, w := range strings.Split(ruleTable[r].id, "-") {
			name += strings.ToUpper(w[:1]) + w[1:]
		}
		if !used[name] {
			t.Errorf("no check decides by %s (%s): drop it from the table, or name it where it decides", ruleTable[r].id, name)
		}
	}
}

// rulesMarkdown is docs/policy.md's list of the rule ids, made from the table.
func rulesMarkdown() string {
	var sb strings.Builder
	sb.WriteString("| rule | what it covers |\n|---|---|\n")
	for r := ruleNone + 1; r < ruleCount; r++ {
		sb.WriteString("| `default:" + ruleTable[r].id + "` | " + ruleTable[r].covers + " |\n")
	}
	sb.WriteString("\nA rule about what a command does to a path is named `default:ACTION-KIND`\n")
	sb.WriteString("(`default:write-agent-config`, `default:delete-tree-home`), with ACTION one of\n\n")
	sb.WriteString("| action | what it covers |\n|---|---|\n")
	for v := range verbCount {
		sb.WriteString("| `" + pathVerbs[v].id + "` | " + pathVerbs[v].covers + " |\n")
	}
	sb.WriteString("\nand KIND one of\n\n| kind | what it covers |\n|---|---|\n")
	for n := range nounCount {
		sb.WriteString("| `" + pathNouns[n].id + "` | " + strings.ReplaceAll(pathNouns[n].covers, "|", `\|`) + " |\n")
	}
	return sb.String()
}

const (
	docsRulesStart = "<!-- rule ids: from policy/ruleids.go; TestRuleTableInDocs keeps them the same -->\n"
	docsRulesEnd   = "<!-- end of rule ids -->\n"
)

// TestRuleTableInDocs: docs/policy.md lists every rule id the table declares,
// and nothing else. go test ./policy -run TestRuleTableInDocs -update-docs
// rewrites the list.
func TestRuleTableInDocs(t *testing.T) {
	const doc = "../docs/policy.md"
	b, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i, j := strings.Index(s, docsRulesStart), strings.Index(s, docsRulesEnd)
	if i < 0 || j < i {
		t.Fatalf("%s has no list of rule ids between %q and %q", doc, strings.TrimSpace(docsRulesStart), strings.TrimSpace(docsRulesEnd))
	}
	got, want := s[i+len(docsRulesStart):j], rulesMarkdown()
	if got == want {
		return
	}
	if *updateDocs {
		if err := os.WriteFile(doc, []byte(s[:i+len(docsRulesStart)]+want+s[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	gl, wl := strings.Split(got, "\n"), strings.Split(want, "\n")
	for k := 0; k < len(gl) || k < len(wl); k++ {
		var g, w string
		if k < len(gl) {
			g = gl[k]
		}
		if k < len(wl) {
			w = wl[k]
		}
		if g != w {
			t.Fatalf("%s's list of rule ids differs from policy/ruleids.go at its line %d:\n\tdocs:  %s\n\ttable: %s\nrun go test ./policy -run TestRuleTableInDocs -update-docs", doc, k+1, g, w)
		}
	}
}
