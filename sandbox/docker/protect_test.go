package docker

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestExpandProtect: patterns become the paths they match now, the root's
// instance of "**/NAME" present or absent; .git and node_modules are not
// entered, a matched directory is protected whole, plain entries stay.
func TestExpandProtect(t *testing.T) {
	ws := t.TempDir()
	for _, p := range []string{"pkg/.claude/commands/x.md", "a/b/.vscode/tasks.json", "a/b/.vscode/extensions.json", "node_modules/m/.claude/settings.json", ".git/x/.claude/settings.json", "keys/k.pem", "keys/sub/k.pem"} {
		f := filepath.Join(ws, p)
		os.MkdirAll(filepath.Dir(f), 0o755)
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got := expandProtect(ws, ws, []string{"**/.claude", "**/.vscode/tasks.json", "notes.txt", filepath.Join(ws, "keys/*.pem")}, slog.New(slog.DiscardHandler))
	slices.Sort(got)
	want := []string{".claude", ".vscode/tasks.json", "a/b/.vscode/tasks.json", "keys/k.pem", "notes.txt", "pkg/.claude"}
	if !slices.Equal(got, want) {
		t.Errorf("expandProtect = %q, want %q", got, want)
	}
}
