package tools

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/corralhq/corral/internal/agentconf"
)

// Bounds of the walk that looks for protected paths commands created, and of
// its report. The matches it remembers are bounded by the entries it looks
// at, not by a count of their own: a bound on them would let a command wear
// the report out with decoys (a thousand .envrc files, then a .claude past
// them).
const (
	maxConfigScan  = 200_000 // entries looked at
	maxConfigFound = 1024    // new matches in one result's details
	maxConfigNamed = 40      // new matches named in one result's text
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

	limit int // entries looked at, maxConfigScan

	mu    sync.Mutex      // guards known, repos and whole
	known map[string]bool // matches seen so far, workspace-relative
	// repos are the repositories (.git, a directory or a file) seen so far:
	// those there at the start are shadowed; one a command makes is not.
	repos map[string]bool
	// whole: the last walk looked at every entry, or none was made yet.
	whole bool
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
	c := &configScan{dir: s.ws.real, pats: pats, limit: maxConfigScan, known: map[string]bool{}, repos: map[string]bool{}, whole: true}
	found, repos, _ := c.scan()
	for _, p := range found {
		c.known[p] = true
	}
	for _, p := range repos {
		c.repos[p] = true
	}
	return c
}

// scan lists the matches below the root and the repositories (.git) in the
// workspace, bounded; it does not enter .git, node_modules or a match. whole
// is false when it stopped at its bound.
func (c *configScan) scan() (found, repos []string, whole bool) {
	seen := 0
	whole = true
	filepath.WalkDir(c.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == c.dir {
			return nil
		}
		if seen++; seen > c.limit {
			whole = false
			return fs.SkipAll
		}
		name := strings.ToLower(d.Name())
		rel, err := filepath.Rel(c.dir, p)
		if err != nil {
			return nil
		}
		rel = filepath.ToSlash(rel)
		if name == ".git" && (d.IsDir() || d.Type().IsRegular()) {
			repos = append(repos, rel)
		}
		if d.IsDir() && (name == ".git" || name == "node_modules") {
			return fs.SkipDir
		}
		if !strings.Contains(rel, "/") {
			return nil // the root's: the sandbox holds them, present or absent
		}
		for _, pat := range c.pats {
			if agentconf.Match(pat, rel) {
				found = append(found, rel)
				if d.IsDir() {
					return fs.SkipDir
				}
				return nil
			}
		}
		if d.Type()&fs.ModeSymlink != 0 && c.linkHolds(rel) {
			// x/.vscode -> ../y: an editor reads x/.vscode/tasks.json
			// from y, which the walk, not following links, never names.
			found = append(found, rel)
		}
		return nil
	})
	return found, repos, whole
}

// linkHolds reports whether a symbolic link at rel stands where a directory
// holding a protected entry's file would (.vscode for .vscode/tasks.json).
func (c *configScan) linkHolds(rel string) bool {
	e, holds, ok := agentconf.Lookup(rel)
	return ok && holds && slices.ContainsFunc(c.pats, func(p string) bool { return strings.EqualFold(p, "**/"+e.Path) })
}

// scanReport is what one look after a command found.
type scanReport struct {
	fresh []string // the new matches, in byEntry's order
	repos []string // the new repositories' .git, sorted
	// cut: this walk stopped at its bound and the last one did not (or it
	// is the first): what is past the bound goes unreported from now on.
	cut bool
}

// created returns the matches that were not there at the last look.
func (c *configScan) created() scanReport {
	if c == nil {
		return scanReport{}
	}
	found, repos, whole := c.scan()
	c.mu.Lock()
	defer c.mu.Unlock()
	var r scanReport
	for _, p := range found {
		if !c.known[p] {
			c.known[p] = true
			r.fresh = append(r.fresh, p)
		}
	}
	if c.repos == nil {
		c.repos = map[string]bool{}
	}
	for _, p := range repos {
		if !c.repos[p] {
			c.repos[p] = true
			r.repos = append(r.repos, p)
		}
	}
	slices.Sort(r.repos)
	r.fresh = byEntry(r.fresh)
	r.cut = !whole && c.whole
	c.whole = whole
	return r
}

// byEntry orders new matches for the report: the first of each entry's
// (one .envrc, one .claude, ...), then the rest, each part sorted, so that
// many of one kind, made as decoys, cannot push another kind out of what the
// report names.
func byEntry(fresh []string) []string {
	slices.Sort(fresh)
	var first, rest []string
	seen := map[string]bool{}
	for _, p := range fresh {
		e, _, _ := agentconf.Lookup(p)
		if seen[e.Path] {
			rest = append(rest, p)
			continue
		}
		seen[e.Path] = true
		first = append(first, p)
	}
	return append(first, rest...)
}

// createdText is the result's lines about what a look found; "" when there
// is nothing to say.
func createdText(r scanReport) string {
	var b strings.Builder
	if len(r.fresh) > 0 {
		b.WriteString("Agent configuration appeared below the workspace's root while the command ran (made by it, or by something still running):")
		for i, p := range r.fresh {
			if i == maxConfigNamed {
				fmt.Fprintf(&b, "\n  ... and %d more (all of them in the details' agent_config_created, up to %d)", len(r.fresh)-i, maxConfigFound)
				break
			}
			b.WriteString("\n  " + p)
			if e, _, ok := agentconf.Lookup(p); ok {
				b.WriteString(" (" + e.Who + ": " + e.Why + ")")
			}
		}
		b.WriteString("\nThe user's own tools run such files without review, and the sandbox protects only what existed when the session started. Do not create agent configuration; tell the user about these files so that they can review or remove them.\n")
	}
	if len(r.repos) > 0 {
		b.WriteString("A repository appeared in the workspace while the command ran (made by it, or by something still running):")
		for i, p := range r.repos {
			if i == maxConfigNamed {
				fmt.Fprintf(&b, "\n  ... and %d more (all of them in the details' repositories_created)", len(r.repos)-i)
				break
			}
			b.WriteString("\n  " + p)
		}
		b.WriteString("\nIts config and hooks were written in the sandbox, and git on the host runs what they name (core.fsmonitor, hooks, filters) as soon as the user runs git there. Tell the user, so that they review its .git/config and .git/hooks (or remove it and clone it again themselves) before using git in it.\n")
	}
	if r.cut {
		fmt.Fprintf(&b, "The workspace now has more than %d entries outside .git and node_modules: the look for agent configuration after each command stops there, and what a command creates past them is not reported. Tell the user, so that they review the workspace's agent configuration (git status) before starting an agent in it.\n", maxConfigScan)
	}
	return b.String()
}
