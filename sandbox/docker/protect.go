package docker

import (
	"io/fs"
	"log/slog"
	"path"
	"path/filepath"
	"strings"

	"github.com/corralhq/corral/internal/agentconf"
)

// Bounds of the walk that finds what the patterns of sandbox.Config.Protect match.
const (
	maxProtectWalk  = 200_000 // entries looked at
	maxProtectFound = 256     // paths found (each a read-only mount)
)

// protectSkipped are directories the walk does not enter: repositories (their
// shadow protects them) and vendored dependencies, where no one starts an
// agent and which can hold more entries than the walk's bound.
var protectSkipped = map[string]bool{".git": true, "node_modules": true}

// expandProtect turns the patterns of a Protect list into the paths they
// match in the workspace dir (the host directory commands see at workspace),
// for the mounts, which only take paths: "**/NAME" gives NAME at the root,
// present or absent, and every NAME below that exists now. Entries without
// patterns are kept as they are. The walk is bounded; past its bound what it
// did not reach is left unprotected in the sandbox, and said in the log.
func expandProtect(dir, workspace string, list []string, log *slog.Logger) []string {
	var out []string
	var pats []string
	for _, raw := range list {
		if !strings.ContainsAny(raw, `*?[\`) {
			out = append(out, raw)
			continue
		}
		e := raw
		for _, base := range []string{workspace, dir} {
			if rel, err := filepath.Rel(base, raw); err == nil && filepath.IsAbs(raw) && !upward(rel) {
				e = rel
				break
			}
		}
		e = strings.Trim(path.Clean(filepath.ToSlash(e)), "/")
		if filepath.IsAbs(e) || e == "." || e == ".." || strings.HasPrefix(e, "../") {
			continue
		}
		if rest, ok := strings.CutPrefix(e, "**/"); ok && !strings.ContainsAny(rest, `*?[\`) {
			out = append(out, rest) // the root's, present or absent
		}
		pats = append(pats, e)
	}
	if len(pats) == 0 {
		return out
	}
	seen, found := 0, 0
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return nil
		}
		if seen++; seen > maxProtectWalk {
			log.Warn("the workspace has too many files to find every protected path in it; those past the first ones are not protected in the sandbox", "looked_at", maxProtectWalk)
			return fs.SkipAll
		}
		if d.IsDir() && protectSkipped[strings.ToLower(d.Name())] {
			return fs.SkipDir
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return nil
		}
		rel = filepath.ToSlash(rel)
		for _, pat := range pats {
			if !agentconf.Match(pat, rel) {
				continue
			}
			if found++; found > maxProtectFound {
				log.Warn("the workspace has too many protected paths to mount them all read-only; those past the first ones are not protected in the sandbox", "mounted", maxProtectFound)
				return fs.SkipAll
			}
			out = append(out, rel)
			if d.IsDir() {
				return fs.SkipDir // protected whole
			}
			break
		}
		return nil
	})
	return out
}

// upward reports whether rel, a path relative to a directory (filepath.Rel),
// leads out of it: "..", or a path under it. A name that only starts with
// two dots ("..cache") is inside.
func upward(rel string) bool {
	return rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator))
}
