package sandbox

import (
	"bufio"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Git on the host trusts the repository in the workspace: it runs the programs
// its config names (core.fsmonitor, core.pager, aliases, filters) and its
// hooks, and it reads them from wherever the repository's own files point. A
// command in the sandbox runs as the workspace's owner, so whatever it writes
// there git trusts as the user's. The sandbox therefore keeps a command from
// changing these files of the repository and of its submodules:
//
//   - hooks/ and config, mounted read-only;
//   - the repository directories themselves (.git, .git/modules/NAME), each
//     mounted on itself, so that none can be moved aside and replaced;
//   - commondir, which sends git to another directory for its config and
//     hooks, and config.worktree, read as config when the repository enables
//     worktree config: mounted read-only when the repository has them, removed
//     after every command when a command made them (a repository never needs a
//     commondir; git only writes one in a linked worktree's directory);
//   - worktrees/, where the linked worktrees outside the workspace keep their
//     commondir and gitdir, read-only;
//   - the .git file of each submodule's worktree, which names its repository,
//     read-only; so is the workspace's own .git when it is such a file (the
//     workspace is a linked worktree or a submodule).
//
// What stays open: a command may make a new repository in the workspace with
// its own config and hooks, and git on the host runs them when someone runs git
// in it — or in the outer repository, when the command also staged or
// committed the new one as a submodule (git status looks into submodules).

// maxGitDirs bounds the submodule repositories that are protected, and
// maxGitWalk the entries of .git/modules looked at to find them.
const (
	maxGitDirs = 64
	maxGitWalk = 10_000
)

// gitRedirects are the files of a repository directory that send git elsewhere
// for its config and hooks.
var gitRedirects = []string{"commondir", "config.worktree"}

// gitGuard is what the sandbox protects of the workspace's repository.
type gitGuard struct {
	ws string
	// self are repository directories mounted on themselves: the
	// workspace's .git and its submodules' repositories.
	self []string
	// readOnly are paths mounted read-only.
	readOnly []string
	// planted are workspace-relative paths that did not exist when the
	// sandbox started and must not exist after a command.
	planted []string
}

// guardGit finds the workspace's repository (.git, a directory) and its
// submodules' repositories (.git/modules/...), and lists what the sandbox must
// protect of them. A missing hooks directory is created, as git init would,
// so that it can be protected too; a commondir there is removed. Symbolic
// links are resolved; paths outside the workspace are not visible inside
// anyway.
func guardGit(ws string, log *slog.Logger) gitGuard {
	g := gitGuard{ws: ws}
	gitDir := filepath.Join(ws, ".git")
	fi, err := os.Lstat(gitDir)
	switch {
	case err == nil && fi.Mode().IsRegular():
		// The workspace is a linked worktree or a submodule: its .git file
		// names the repository, outside.
		g.readOnly = append(g.readOnly, gitDir)
		return g
	case err != nil || !fi.IsDir():
		return g
	}
	dirs := []string{gitDir}
	visited := 0
	filepath.WalkDir(filepath.Join(gitDir, "modules"), func(p string, d fs.DirEntry, err error) error {
		if visited++; visited > maxGitWalk {
			return fs.SkipAll // a tree a command made to slow the start down
		}
		if err != nil || !d.IsDir() || len(dirs) >= maxGitDirs {
			return fs.SkipDir
		}
		if fi, err := os.Stat(filepath.Join(p, "HEAD")); err == nil && fi.Mode().IsRegular() {
			dirs = append(dirs, p)
		}
		return nil
	})
	g.self = dirs
	protect := func(p string) {
		if real, err := filepath.EvalSymlinks(p); err == nil && within(ws, real) {
			g.readOnly = append(g.readOnly, real)
		}
	}
	for i, dir := range dirs {
		hooks := filepath.Join(dir, "hooks")
		if _, err := os.Lstat(hooks); errors.Is(err, fs.ErrNotExist) {
			os.Mkdir(hooks, 0o755)
		}
		protect(hooks)
		protect(filepath.Join(dir, "config"))
		for _, name := range gitRedirects {
			p := filepath.Join(dir, name)
			_, err := os.Lstat(p)
			switch {
			case errors.Is(err, fs.ErrNotExist):
				if rel, err := filepath.Rel(ws, p); err == nil {
					g.planted = append(g.planted, filepath.ToSlash(rel))
				}
			case err != nil:
			case name == "commondir":
				// Left by an earlier session that could not remove it.
				log.Warn("removing a commondir from the workspace's repository: it would send git on the host elsewhere for its config and hooks", "path", p)
				if err := os.Remove(p); err == nil || errors.Is(err, fs.ErrNotExist) {
					if rel, err := filepath.Rel(ws, p); err == nil {
						g.planted = append(g.planted, filepath.ToSlash(rel))
					}
				}
			default:
				protect(p)
			}
		}
		if i == 0 {
			if _, err := os.Lstat(filepath.Join(dir, "worktrees")); err == nil {
				protect(filepath.Join(dir, "worktrees"))
			}
			continue
		}
		// A submodule's worktree names its repository in a .git file.
		if wt := gitConfigValue(filepath.Join(dir, "config"), "core", "worktree"); wt != "" {
			if !filepath.IsAbs(wt) {
				wt = filepath.Join(dir, wt)
			}
			gitFile := filepath.Join(wt, ".git")
			if fi, err := os.Lstat(gitFile); err == nil && fi.Mode().IsRegular() {
				protect(gitFile)
			}
		}
	}
	return g
}

// sweep removes what a command planted that would send git elsewhere, and
// returns the workspace-relative paths it removed. It goes through the
// workspace as a root, so a symbolic link a command put on the way cannot
// make it remove anything outside.
func (g gitGuard) sweep(log *slog.Logger) (removed []string) {
	if len(g.planted) == 0 {
		return nil
	}
	root, err := os.OpenRoot(g.ws)
	if err != nil {
		return nil
	}
	defer root.Close()
	for _, p := range g.planted {
		if _, err := root.Lstat(p); err != nil {
			continue
		}
		if err := root.RemoveAll(p); err != nil {
			log.Warn("cannot remove a file a command planted in the repository", "path", p, "err", err)
			continue
		}
		log.Warn("removed a file a command planted in the repository: git on the host would have taken its config and hooks from it", "path", p)
		removed = append(removed, p)
	}
	return removed
}

// gitConfigValue returns the value of section.key in the git config file, ""
// when it is not there. It reads what git itself writes: no includes, and
// only whole-value quotes.
func gitConfigValue(file, section, key string) string {
	// A command may have made it a named pipe: opening one must not block,
	// and reading one is not what a config is for.
	f, err := os.OpenFile(file, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return ""
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() || fi.Size() > 1<<20 {
		return ""
	}
	cur := ""
	value := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "[") {
			name, _, _ := strings.Cut(strings.Trim(line, "[]"), " ")
			cur = strings.ToLower(strings.TrimSpace(name))
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || cur != section || !strings.EqualFold(strings.TrimSpace(k), key) {
			continue
		}
		value = strings.Trim(strings.TrimSpace(v), `"`)
	}
	return value
}
