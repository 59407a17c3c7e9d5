// Package agentconf lists the files and directories in which AI agents and
// editors keep configuration that the user's own tools read without review,
// at any depth of a workspace: an agent started in a package of a monorepo
// reads pkg/.claude/settings.json as an agent started at the root reads
// .claude/settings.json. It is the one list the sandbox (read-only mounts),
// the file tools (edit and write refuse) and the policy (writes need
// approval) share; the tables of docs/tools.md (Agent configuration) are
// made from it.
package agentconf

import (
	"path"
	"slices"
	"strings"
)

// Kind says what an entry's files do.
type Kind int

const (
	// Agent is an AI agent's configuration: hooks it runs, MCP servers it
	// starts, permissions it grants itself.
	Agent Kind = iota
	// Editor is an editor's configuration: tasks and servers it runs.
	Editor
	// Direnv is direnv's .envrc, which the user's shell runs on cd.
	Direnv
)

// Entry is one name of agent configuration.
type Entry struct {
	// Path is relative to the directory an agent or editor is started in,
	// slash-separated: a file (".mcp.json"), a directory holding nothing but
	// configuration (".claude"), or one file of a directory shared with other
	// content (".vscode/tasks.json"). It matches at every depth, and
	// everything below it.
	Path string
	// Protected entries run code or grant permissions without the user's
	// review: edit and write refuse them, commands in the sandbox cannot
	// change them, and the policy asks before a command writes them. The
	// others steer an agent or wait for the user's own action: the policy
	// asks before a command writes them; the file tools allow them.
	Protected bool
	Kind      Kind
	// Who reads it, and Why it matters: the tables of docs/tools.md.
	Who, Why string
}

// Entries is the list. Instruction files an agent reads as text (CLAUDE.md,
// AGENTS.md, GEMINI.md) are not in it: they run nothing, and editing them is
// ordinary work.
var Entries = []Entry{
	{".claude", true, Agent, "Claude Code", "settings.json and settings.local.json: hooks run shell commands, permissions let tools run unasked; its commands, agents and skills can run shell commands too"},
	{".mcp.json", true, Agent, "Claude Code and other MCP clients", "each MCP server entry names a program the client starts"},
	{".gemini", true, Agent, "Gemini CLI", "settings.json names MCP servers and the commands it runs to discover and call tools"},
	{".qwen", true, Agent, "Qwen Code", "settings.json, as Gemini CLI's"},
	{".codex", true, Agent, "Codex CLI", "config.toml names MCP servers and sets its sandbox and approval policy"},
	{".cursor", true, Agent, "Cursor", "mcp.json names MCP servers; hooks.json runs commands on the agent's steps"},
	{".kiro", true, Agent, "Kiro", "hooks run commands on file events; settings/mcp.json names MCP servers"},
	{".roo", true, Agent, "Roo Code", "mcp.json names MCP servers"},
	{".amazonq", true, Agent, "Amazon Q Developer", "mcp.json names MCP servers"},
	{".continue", true, Agent, "Continue", "its configuration and mcpServers/ name MCP servers"},
	{".opencode", true, Agent, "opencode", "plugins it loads and runs; commands and agents"},
	{"opencode.json", true, Agent, "opencode", "names MCP servers and the formatters and language servers it starts"},
	{".crush.json", true, Agent, "Crush", "names the MCP and language servers it starts"},
	{".aider.conf.yml", true, Agent, "aider", "lint-cmd and test-cmd are commands it runs"},
	{".zed", true, Editor, "Zed", "settings.json names language and context servers; tasks.json tasks"},
	{".vscode/tasks.json", true, Editor, "VS Code", "tasks can run on folder open"},
	{".vscode/settings.json", true, Editor, "VS Code", "settings name programs extensions start (formatters, interpreters, terminal profiles)"},
	{".vscode/mcp.json", true, Editor, "VS Code", "each MCP server entry names a program it starts"},
	{".vscode/launch.json", true, Editor, "VS Code", "the programs the debugger starts, and the task it runs first"},
	{".devcontainer", true, Editor, "dev containers", "devcontainer.json's initializeCommand runs on the host, its other lifecycle commands in the container it builds"},
	{".devcontainer.json", true, Editor, "dev containers", "as .devcontainer/devcontainer.json"},
	{".envrc", true, Direnv, "direnv", "the user's shell runs it on cd into the directory"},

	{".windsurf", false, Agent, "Windsurf", "rules and workflows that steer its agent"},
	{".goose", false, Agent, "Goose", "its project configuration"},
	{".aider", false, Agent, "aider", "its project files"},
	{".crush", false, Agent, "Crush", "its sessions and logs"},
	{".claude.json", false, Agent, "Claude Code", "its user state and MCP servers (in the home directory)"},
	{".cursorrules", false, Agent, "Cursor", "rules that steer its agent"},
	{".windsurfrules", false, Agent, "Windsurf", "rules that steer its agent"},
	{".clinerules", false, Agent, "Cline", "rules that steer its agent"},
	{".roomodes", false, Agent, "Roo Code", "modes: instructions and the tools each may use"},
	{".idea/workspace.xml", false, Editor, "JetBrains IDEs", "run configurations, started by the user's own click"},
}

// entryParts are the components of each entry's Path, lower-case.
var entryParts = func() [][]string {
	l := make([][]string, len(Entries))
	for i, e := range Entries {
		l[i] = strings.Split(strings.ToLower(e.Path), "/")
	}
	return l
}()

// Protected returns the protected entries as patterns of every depth
// ("**/.claude"), in the list's order: the paths the sandbox and the file
// tools protect by default.
func Protected() []string {
	var l []string
	for _, e := range Entries {
		if e.Protected {
			l = append(l, "**/"+e.Path)
		}
	}
	return l
}

// Lookup returns the entry that rel, a slash-separated relative path, is in
// or is: some run of its components is the entry's path, the last of them
// rel's last or a directory above it. It also reports a directory that holds
// an entry's file (".vscode" for ".vscode/tasks.json": moving or removing it
// changes the file), with holds true. Names are compared without case: on a
// case-insensitive file system .Claude is .claude.
func Lookup(rel string) (e Entry, holds, ok bool) {
	parts := strings.Split(strings.ToLower(path.Clean(rel)), "/")
	for k, e := range Entries {
		ep := entryParts[k]
		for i := range parts {
			n := min(len(ep), len(parts)-i)
			if !slices.Equal(parts[i:i+n], ep[:n]) {
				continue
			}
			if n == len(ep) || i+n == len(parts) {
				return e, n < len(ep), true
			}
		}
	}
	return Entry{}, false, false
}

// Match reports whether rel, a slash-separated relative path, or a
// directory above it matches pattern, an entry of a protected-path list:
// "*" and the like within one component (path.Match), "**" for any number
// of components. Case is ignored.
func Match(pattern, rel string) bool {
	return matchPrefix(strings.Split(strings.ToLower(pattern), "/"), strings.Split(strings.ToLower(rel), "/"))
}

func matchPrefix(pattern, name []string) bool {
	if len(pattern) == 0 {
		return true
	}
	if pattern[0] == "**" {
		for i := 0; i <= len(name); i++ {
			if matchPrefix(pattern[1:], name[i:]) {
				return true
			}
		}
		return false
	}
	if len(name) == 0 {
		return false
	}
	if ok, _ := path.Match(pattern[0], name[0]); !ok {
		return false
	}
	return matchPrefix(pattern[1:], name[1:])
}
