package tools

import (
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/corralhq/corral/internal/agentconf"
)

// Bounds of the walk that looks for protected paths commands created.
const (
	maxConfigScan  = 200_000 // entries looked at
	maxConfigFound = 1024    // matches remembered
)

// configScan finds the protected paths of "**/" entries (agent configuration
// at every depth) that appear below the workspace's root while the session
// runs. The sandbox protects what exists when it starts, and the root's
// present or absent; a command can still create one in a directory that had
// none (mkdir -p pkg/.claude). That cannot be prevented by a mount, so it is
// reported: after each command, in its result and details. nil when the
// workspace is not on this machine or nothing is protected at depth.
type configScan struct {
	dir  string   // the workspace's real path
	pats []string // the "**/" entries, lower-case; .git's left to the shadow

	mu    sync.Mutex      // guards known
	known map[string]bool // matches seen so far, workspace-relative
}

func newConfigScan(s *Session) *configScan {
	if s.ws.local == nil {
		return nil
	}
	var pats []string
	for _, e := range s.protect.entries {
		if rest, ok := strings.CutPrefix(e, "**/"); ok && rest != ".git" && !strings.HasPrefix(rest, ".git/") {
			pats = append(pats, e)
		}
	}
	if len(pats) == 0 {
		return nil
	}
	c := &configScan{dir: s.ws.real, pats: pats, known: map[string]bool{}}
	for _, p := range c.scan() {
		c.known[p] = true
	}
	return c
}

// scan lists the matches below the root, bounded; it does not enter .git,
// node_modules or a match.
func (c *configScan) scan() []string {
	var found []string
	seen := 0
	filepath.WalkDir(c.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == c.dir {
			return nil
		}
		if seen++; seen > maxConfigScan || len(found) >= maxConfigFound {
			return fs.SkipAll
		}
		name := strings.ToLower(d.Name())
		if d.IsDir() && (name == ".git" || name == "node_modules") {
			return fs.SkipDir
		}
		rel, err := filepath.Rel(c.dir, p)
		if err != nil {
			return nil
		}
		rel = filepath.ToSlash(rel)
		if !strings.Contains(rel, "/") {
			return nil // the root's: the sandbox holds them, present or absent
		}
		for _, pat := range c.pats {
			if agentconf.Match(pat, rel) {
				found = append(found, rel)
				if d.IsDir() {
					return fs.SkipDir
				}
				break
			}
		}
		return nil
	})
	return found
}

// created returns the matches that were not there at the last look.
func (c *configScan) created() []string {
	if c == nil {
		return nil
	}
	found := c.scan()
	c.mu.Lock()
	defer c.mu.Unlock()
	var fresh []string
	for _, p := range found {
		if !c.known[p] {
			c.known[p] = true
			fresh = append(fresh, p)
		}
	}
	slices.Sort(fresh)
	return fresh
}

// createdText is the result's line about what created names.
func createdText(created []string) string {
	var b strings.Builder
	b.WriteString("Agent configuration appeared below the workspace's root while the command ran (made by it, or by something still running):")
	for _, p := range created {
		b.WriteString("\n  " + p)
		if e, _, ok := agentconf.Lookup(p); ok {
			b.WriteString(" (" + e.Who + ": " + e.Why + ")")
		}
	}
	b.WriteString("\nThe user's own tools run such files without review, and the sandbox protects only what existed when the session started. Do not create agent configuration; tell the user about these files so that they can review or remove them.\n")
	return b.String()
}
