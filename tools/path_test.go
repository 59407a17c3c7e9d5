package tools

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// confinementWorkspace builds a workspace with every kind of way out, next to a
// directory "outside" holding a secret.
func confinementWorkspace(t *testing.T) (s *Session, ws, outside string) {
	t.Helper()
	base := t.TempDir()
	ws = filepath.Join(base, "ws")
	outside = filepath.Join(base, "outside")
	for _, d := range []string{ws + "/src/deep", outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, outside, "secret", "top secret\n")
	writeFile(t, ws, "src/a.txt", "a\n")
	links := map[string]string{
		"out":             outside,          // absolute, outside
		"src/up":          "../../outside",  // relative, outside
		"src/deep/upup":   "../../..",       // relative, to the workspace's parent
		"abs-in":          ws + "/src",      // absolute, inside
		"rel-in":          "src/a.txt",      // relative, inside
		"loop1":           "loop2",          // a loop
		"loop2":           "loop1",          //
		"src/deep/parent": "..",             // inside, through ".."
		"dangling":        "src/new-target", // inside, to nothing yet
	}
	for name, dest := range links {
		if err := os.Symlink(dest, filepath.Join(ws, name)); err != nil {
			t.Fatal(err)
		}
	}
	s, err := NewSession(t.Context(), Options{Workspace: ws, WritePolicy: AllowOverwrite})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, ws, outside
}

func TestConfinement(t *testing.T) {
	s, ws, outside := confinementWorkspace(t)
	refused := []struct {
		path  string
		facts []string
	}{
		{"../outside/secret", []string{"../outside/secret points outside the workspace", "relative to the workspace root"}},
		{"src/../../outside/secret", []string{"points outside the workspace"}},
		{outside + "/secret", []string{"is outside the workspace", ws}},
		{"/etc/passwd", []string{"/etc/passwd is outside the workspace"}},
		{"out/secret", []string{"out is a symbolic link to " + outside + ", outside the workspace"}},
		{"src/up/secret", []string{"src/up/secret leads outside the workspace through the symbolic link src/up"}},
		{"src/deep/upup/outside/secret", []string{"leads outside the workspace", "src/deep/upup"}},
		{"loop1", []string{"too many symbolic links"}},
		{"src/a.txt/x", []string{"src/a.txt is a file, not a directory"}},
		{"", []string{"The path is empty"}},
		{"a\x00b", []string{"NUL byte"}},
	}
	for _, tt := range refused {
		t.Run("refused "+tt.path, func(t *testing.T) {
			for _, tool := range []string{"read", "edit", "write"} {
				args := m{"path": tt.path, "oldText": "x", "newText": "y"}
				switch tool {
				case "read":
					args = m{"path": tt.path}
				case "write":
					args = m{"path": tt.path, "content": "pwned\n"}
				}
				mustFail(t, s, tool, args, tt.facts...)
			}
		})
	}
	if got := readFile(t, outside, "secret"); got != "top secret\n" {
		t.Errorf("the secret outside changed: %q", got)
	}
	ents, _ := os.ReadDir(outside)
	if len(ents) != 1 {
		t.Errorf("files appeared outside: %v", ents)
	}

	allowed := []struct{ path, want string }{
		{"abs-in/a.txt", "1\ta"},
		{"rel-in", "1\ta"},
		{"src/deep/parent/a.txt", "1\ta"},
		{ws + "/src/a.txt", "1\ta"},
		{"./src//a.txt", "1\ta"},
	}
	for _, tt := range allowed {
		if r := mustOK(t, s, "read", m{"path": tt.path}); r.Content != tt.want {
			t.Errorf("read %s: %q", tt.path, r.Content)
		}
	}
	// A write through a dangling link inside the workspace creates its target.
	mustOK(t, s, "write", m{"path": "dangling", "content": "new\n"})
	if got := readFile(t, ws, "src/new-target"); got != "new\n" {
		t.Errorf("target = %q", got)
	}
}

func TestResolveCanon(t *testing.T) {
	_, ws, _ := confinementWorkspace(t)
	w, err := openWorkspace(ws, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	defer w.root.Close()
	for in, want := range map[string]string{
		"src/a.txt":             "src/a.txt",
		"./src//a.txt":          "src/a.txt",
		"rel-in":                "src/a.txt",
		"abs-in/a.txt":          "src/a.txt",
		"src/deep/parent/a.txt": "src/a.txt",
		"src/new/dir/f":         "src/new/dir/f",
		".":                     ".",
		ws:                      ".",
	} {
		tg, err := w.resolve(in)
		if err != nil {
			t.Errorf("%s: %v", in, err)
			continue
		}
		if tg.canon != want {
			t.Errorf("%s: canon %q, want %q", in, tg.canon, want)
		}
	}
}

func TestProtected(t *testing.T) {
	files := map[string]string{
		".git/config":             "[core]\n",
		".git/hooks/pre-commit":   "#!/bin/sh\n",
		".git/HEAD":               "ref: refs/heads/main\n",
		"src/a.txt":               "a\n",
		".git/modules/lib/config": "[core]\n",
	}
	s, ws := newTestSession(t, files)
	os.Symlink(".git/config", filepath.Join(ws, "cfg"))
	os.Symlink(".git", filepath.Join(ws, "g"))
	os.Link(filepath.Join(ws, ".git/config"), filepath.Join(ws, "hardlink"))
	for _, p := range []string{
		".git/config", "./.git//config", ".GIT/config", ".git/hooks/pre-commit", ".git/hooks/new-hook",
		".git/hooks/sub/x", "cfg", "g/config", "g/hooks/post-checkout", ws + "/.git/config",
		".git/modules/lib/config", ".git/modules/lib/hooks/post-checkout", ".git/HEAD", ".git/commondir",
	} {
		t.Run(p, func(t *testing.T) {
			call(t, s, "read", m{"path": p}) // reading is fine
			mustFail(t, s, "write", m{"path": p, "content": "[core]\n\tfsmonitor = evil\n"}, "protected", "Cannot write")
			mustFail(t, s, "edit", m{"path": p, "oldText": "[core]", "newText": "[x]"}, "protected")
		})
	}
	for name, content := range files {
		if got := readFile(t, ws, name); got != content {
			t.Errorf("%s changed: %q", name, got)
		}
	}
	if _, err := os.Stat(filepath.Join(ws, ".git/hooks/new-hook")); err == nil {
		t.Error("a hook was created")
	}
	// A hard link to a protected file may be replaced: the write renames a new
	// file over the link, and the protected file stays as it is.
	mustOK(t, s, "read", m{"path": "hardlink"})
	mustOK(t, s, "write", m{"path": "hardlink", "content": "[core]\n\tfsmonitor = evil\n"})
	if got := readFile(t, ws, ".git/config"); got != files[".git/config"] {
		t.Errorf(".git/config changed through a hard link: %q", got)
	}
	// Not protected: what only looks like git's, and everything with an empty
	// list.
	mustOK(t, s, "write", m{"path": ".github/x", "content": "x\n"})
	mustOK(t, s, "write", m{"path": ".gitignore", "content": "x\n"})
	// An absolute entry inside the workspace protects too.
	s3, err := NewSession(t.Context(), Options{Workspace: ws, Protected: []string{filepath.Join(ws, "src") + "/"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s3.Close()
	mustFail(t, s3, "write", m{"path": "src/b.txt", "content": "x"}, "protected")
	s2, err := NewSession(t.Context(), Options{Workspace: ws, Protected: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	mustOK(t, s2, "read", m{"path": ".git/config"})
	mustOK(t, s2, "edit", m{"path": ".git/config", "oldText": "[core]", "newText": "[core] "})
}

// The identity check catches a parent directory that turned into a protected
// one, or one inside it, after the path was resolved: by the directory's real
// path where the kernel tells it, else by comparing it with the protected
// directory itself.
func TestProtectedIdentity(t *testing.T) {
	s, _ := newTestSession(t, map[string]string{".git/hooks/x": "", "d/x": ""})
	hooks, _ := s.ws.root.Stat(".git/hooks")
	if _, ok := s.protect.identity(s.ws.root, hooks, ".git/hooks", "pre-commit", nil); !ok {
		t.Error(".git/hooks opened by another name is not protected")
	}
	gitDir, _ := s.ws.root.Stat(".git")
	if _, ok := s.protect.identity(s.ws.root, gitDir, "", "CONFIG", nil); !ok {
		t.Error(".git + CONFIG is not protected without its real path")
	}
	d, _ := s.ws.root.Stat("d")
	if _, ok := s.protect.identity(s.ws.root, d, "d", "x", nil); ok {
		t.Error("d/x is protected")
	}
	// openParent finds the real path of the directory it opened.
	dir, err := s.openParent(target{display: "d/x", canon: "d/x"}, "write")
	if err != nil {
		t.Fatal(err)
	}
	defer dir.root.Close()
	if runtime.GOOS == "linux" && dir.path != "d" {
		t.Errorf("opened d, real path %q", dir.path)
	}
}

// Through edit and write alone, an agent cannot send git on the host to a
// directory of its own for the config and hooks: not by a commondir, a
// config.worktree, a linked worktree's files, a submodule's .git file, nor a
// repository of its own below the root.
func TestProtectedGitRedirections(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	s, ws := newTestSession(t, nil)
	marks, other := t.TempDir(), t.TempDir()
	git := func(dir string, args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "protocol.file.allow=always", "-c", "user.name=u", "-c", "user.email=u@x"}, args...)...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git(other, "init", "-q", "lib")
	git(filepath.Join(other, "lib"), "commit", "-q", "--allow-empty", "-m", "lib")
	git(ws, "init", "-q")
	git(ws, "commit", "-q", "--allow-empty", "-m", "init")
	git(ws, "submodule", "add", "-q", filepath.Join(other, "lib"), "lib")
	git(ws, "commit", "-q", "-m", "submodule")
	git(ws, "worktree", "add", "-q", filepath.Join(other, "wt"))

	// A repository directory of the agent's own, whose config runs a program.
	for _, dir := range []string{"evil", "lib/evil"} {
		mustOK(t, s, "write", m{"path": dir + "/HEAD", "content": "ref: refs/heads/x\n"})
		mustOK(t, s, "write", m{"path": dir + "/objects/.keep", "content": ""})
		mustOK(t, s, "write", m{"path": dir + "/refs/.keep", "content": ""})
		mustOK(t, s, "write", m{"path": dir + "/config", "content": "[core]\n\trepositoryformatversion = 0\n\tfsmonitor = \"touch " + marks + "/$$; false\"\n"})
	}
	mustOK(t, s, "read", m{"path": "lib/.git"})
	for _, p := range []string{
		".git/commondir", ".git/config.worktree", ".git/worktrees/wt/commondir", ".git/worktrees/wt/gitdir",
		".git/modules/lib/commondir", "lib/.git", "LIB/.GIT", "nested/.git/config", "a/b/.git/hooks/pre-commit",
	} {
		mustFail(t, s, "write", m{"path": p, "content": "../evil\n"}, "protected")
	}
	mustFail(t, s, "edit", m{"path": "lib/.git", "oldText": "gitdir: ", "newText": "gitdir: evil #"}, "protected")
	// What is not git's stays writable, names that merely contain .git too.
	mustOK(t, s, "write", m{"path": ".github/workflows/ci.yml", "content": "on: push\n"})
	mustOK(t, s, "write", m{"path": "docs/.gitignore", "content": "x\n"})

	for _, dir := range []string{ws, filepath.Join(ws, "lib"), filepath.Join(other, "wt")} {
		git(dir, "status")
	}
	if ents, _ := os.ReadDir(marks); len(ents) > 0 {
		t.Errorf("git on the host ran a planted program (%d times)", len(ents))
	}
}

// Agent configuration is protected at every depth (an agent started in pkg
// reads pkg/.claude/settings.json), each refusal naming the entry and why;
// instruction files and the rest of .vscode are not.
func TestProtectedAgentConfigAtDepth(t *testing.T) {
	s, ws := newTestSession(t, map[string]string{"pkg/.claude/x.md": "x\n", "sub/.vscode/extensions.json": "{}\n"})
	for _, tt := range []struct{ path, entry, who string }{
		{"sub/.vscode/mcp.json", "**/.vscode/mcp.json", "VS Code reads it without review: each MCP server entry names a program"},
		{"pkg/.claude/settings.json", "**/.claude", "Claude Code reads it without review: settings.json"},
		{"pkg/.Claude/settings.local.json", "**/.claude", "Claude Code"},
		{".gemini/settings.json", "**/.gemini", "Gemini CLI"},
		{"a/b/.codex/config.toml", "**/.codex", "Codex CLI"},
		{"a/.cursor/hooks.json", "**/.cursor", "Cursor"},
		{"svc/.mcp.json", "**/.mcp.json", "MCP server"},
		{"svc/.envrc", "**/.envrc", "direnv"},
		{"svc/.devcontainer/devcontainer.json", "**/.devcontainer", "dev containers"},
	} {
		t.Run(tt.path, func(t *testing.T) {
			mustFail(t, s, "write", m{"path": tt.path, "content": `{"hooks": {}}`}, "Cannot write "+tt.path, "it is a protected path ("+tt.entry+")", tt.who, "Ask the user")
			if _, err := os.Lstat(filepath.Join(ws, tt.path)); err == nil {
				t.Errorf("%s was written", tt.path)
			}
		})
	}
	mustOK(t, s, "read", m{"path": "pkg/.claude/x.md"})
	mustFail(t, s, "edit", m{"path": "pkg/.claude/x.md", "oldText": "x", "newText": "y"}, "Cannot edit pkg/.claude/x.md", "(**/.claude)")
	// Instructions, and the rest of an editor's directory, are ordinary work.
	mustOK(t, s, "write", m{"path": "pkg/CLAUDE.md", "content": "x\n"})
	mustOK(t, s, "write", m{"path": "pkg/AGENTS.md", "content": "x\n"})
	mustOK(t, s, "read", m{"path": "sub/.vscode/extensions.json"})
	mustOK(t, s, "write", m{"path": "sub/.vscode/extensions.json", "content": "{\"recommendations\": []}\n"})
}
