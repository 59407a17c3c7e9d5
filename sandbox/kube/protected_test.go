package kube

import (
	"testing"

	"github.com/corralhq/corral/sandbox"
)

// TestDownloadLeavesOut: what Download leaves out is the protected paths at
// every depth ("**/" entries included) and a repository's hooks and config,
// but not the rest of a repository.
func TestDownloadLeavesOut(t *testing.T) {
	p := &Pod{cfg: sandbox.Config{Workspace: "/ws", Protect: append([]string{"**/.git", "notes/"}, sandbox.DefaultProtect...)}}
	skip := p.protected()
	for rel, want := range map[string]bool{
		".claude/settings.json":       true,
		"pkg/.claude/settings.json":   true,
		"a/b/.vscode/mcp.json":        true,
		"svc/.envrc":                  true,
		"notes/x":                     true,
		".git/config":                 true,
		".git/hooks/pre-commit":       true,
		".git/HEAD":                   false,
		"sub/.git/objects/ab/cd":      false,
		"a/b/.vscode/extensions.json": false,
		"pkg/CLAUDE.md":               false,
		"main.go":                     false,
	} {
		if got := skip(rel, false); got != want {
			t.Errorf("left out %s: %v, want %v", rel, got, want)
		}
	}
}
