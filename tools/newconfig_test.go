package tools

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestConfigScanCut: a command that grows the workspace past the walk's
// bound, so that what it creates after that goes unseen, is reported once,
// when the walk first stops short; the matches before the bound still are.
func TestConfigScanCut(t *testing.T) {
	dir := t.TempDir()
	mk := func(p string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c := &configScan{dir: dir, pats: []string{"**/.claude", "**/.envrc"}, limit: 10, known: map[string]bool{}, whole: true}
	mk("a/.envrc")
	r := c.created()
	if !slices.Equal(r.fresh, []string{"a/.envrc"}) || r.cut || strings.Contains(createdText(r), "more than") {
		t.Fatalf("a small workspace: %+v\n%s", r, createdText(r))
	}
	for i := range 12 {
		mk(filepath.Join("b", "f"+strings.Repeat("x", i)))
	}
	mk("z/.claude/settings.json")
	r = c.created()
	if !r.cut || !strings.Contains(createdText(r), "the look for agent configuration after each command stops there") {
		t.Fatalf("the walk stopped at its bound and the result does not say so: %+v\n%s", r, createdText(r))
	}
	if r = c.created(); r.cut || createdText(r) != "" {
		t.Errorf("the cut is said again: %+v", r)
	}
}

// TestConfigScanRepos: a repository a command makes in the workspace (git
// init, git clone, a linked worktree's .git file), at any depth or at the
// root, is reported once; one there at the start is not (it is shadowed).
func TestConfigScanRepos(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "old", ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	c := &configScan{dir: dir, limit: 1000, known: map[string]bool{}, repos: map[string]bool{"old/.git": true}, whole: true}
	for _, p := range []string{".git", "vendor/lib/.git", "node_modules/x/.git"} {
		if err := os.MkdirAll(filepath.Join(dir, p), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.MkdirAll(filepath.Join(dir, "wt"), 0o755)
	os.WriteFile(filepath.Join(dir, "wt", ".git"), []byte("gitdir: ../.git/worktrees/wt\n"), 0o644)
	r := c.created()
	if want := []string{".git", "vendor/lib/.git", "wt/.git"}; !slices.Equal(r.repos, want) {
		t.Fatalf("new repositories %v, want %v", r.repos, want)
	}
	if txt := createdText(r); !strings.Contains(txt, "\n  vendor/lib/.git") || !strings.Contains(txt, "core.fsmonitor") {
		t.Errorf("the result's text:\n%s", txt)
	}
	if r = c.created(); len(r.repos) != 0 {
		t.Errorf("reported again: %v", r.repos)
	}
}
