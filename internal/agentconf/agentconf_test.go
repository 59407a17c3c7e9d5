package agentconf

import (
	"bufio"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestDocsTable: the two tables of agent configuration in docs/tools.md are
// the list, entry for entry, in its order: the protected one, then the one
// the policy alone asks about.
func TestDocsTable(t *testing.T) {
	const doc = "../../docs/tools.md"
	f, err := os.Open(doc)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var tables [][]string
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "| path (at any depth) | read by | why |":
			tables, in = append(tables, nil), true
		case in && strings.HasPrefix(line, "| `"):
			tables[len(tables)-1] = append(tables[len(tables)-1], line)
		case in && !strings.HasPrefix(line, "|"):
			in = false
		}
	}
	if len(tables) != 2 {
		t.Fatalf("%s has %d tables of agent configuration, want 2", doc, len(tables))
	}
	var want [2][]string
	for _, e := range Entries {
		i := 0
		if !e.Protected {
			i = 1
		}
		want[i] = append(want[i], "| `"+e.Path+"` | "+e.Who+" | "+e.Why+" |")
	}
	for i, rows := range tables {
		if !slices.Equal(rows, want[i]) {
			t.Errorf("%s, table %d:\n%s\nwant (from Entries):\n%s", doc, i+1, strings.Join(rows, "\n"), strings.Join(want[i], "\n"))
		}
	}
}

func TestLookup(t *testing.T) {
	for _, tt := range []struct {
		rel   string
		entry string // "" for none
		holds bool
	}{
		{".claude/settings.json", ".claude", false},
		{"pkg/.claude/settings.json", ".claude", false},
		{"a/b/.Claude", ".claude", false},
		{"sub/.vscode/mcp.json", ".vscode/mcp.json", false},
		{"sub/.vscode", ".vscode/tasks.json", true},
		{".vscode/extensions.json", "", false},
		{"pkg/.envrc", ".envrc", false},
		{"pkg/CLAUDE.md", "", false},
		{"AGENTS.md", "", false},
		{"x.claude", "", false},
		{".claudex/settings.json", "", false},
		{"sub/.idea/workspace.xml", ".idea/workspace.xml", false},
	} {
		e, holds, ok := Lookup(tt.rel)
		if ok != (tt.entry != "") || e.Path != tt.entry || holds != tt.holds {
			t.Errorf("Lookup(%q) = %q, holds %v, %v; want %q, holds %v", tt.rel, e.Path, holds, ok, tt.entry, tt.holds)
		}
	}
}

func TestMatch(t *testing.T) {
	for _, tt := range []struct {
		pattern, rel string
		want         bool
	}{
		{"**/.claude", ".claude", true},
		{"**/.claude", "pkg/.claude/settings.json", true},
		{"**/.claude", "pkg/.CLAUDE", true},
		{"**/.claude", "pkg/claude", false},
		{"**/.vscode/mcp.json", "a/b/.vscode/mcp.json", true},
		{"**/.vscode/mcp.json", "a/b/.vscode/tasks.json", false},
		{"src/*.pem", "src/k.pem", true},
		{"src/*.pem", "src/a/k.pem", false},
		{"secret", "secret/x", true},
	} {
		if got := Match(tt.pattern, tt.rel); got != tt.want {
			t.Errorf("Match(%q, %q) = %v, want %v", tt.pattern, tt.rel, got, tt.want)
		}
	}
}

// Every protected entry is a plain relative path, so that "**/"+Path is a
// pattern whose only wildcard is the leading "**".
func TestEntries(t *testing.T) {
	seen := map[string]bool{}
	for _, e := range Entries {
		if e.Path == "" || strings.ContainsAny(e.Path, `*?[\`) || strings.HasPrefix(e.Path, "/") || seen[strings.ToLower(e.Path)] || e.Who == "" || e.Why == "" {
			t.Errorf("bad entry %+v", e)
		}
		seen[strings.ToLower(e.Path)] = true
	}
}
