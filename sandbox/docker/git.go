package docker

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/docker/docker/api/types/mount"
	"golang.org/x/sys/unix"

	"github.com/corralhq/corral/internal/sanitize"
	"github.com/corralhq/corral/internal/statedir"
	"github.com/corralhq/corral/sandbox"
	"github.com/corralhq/corral/sandbox/internal/envpath"
)

// Git on the host trusts the repository in the workspace: it runs the programs
// its config names (core.fsmonitor, core.hooksPath, core.pager, aliases,
// filters, include and includeIf files) and its hooks, and it reads them from
// wherever the repository's own files send it (commondir, config.worktree
// under extensions.worktreeConfig, a .git file's gitdir, a submodule's
// repository, objects/info/alternates, info/attributes). A command in the
// sandbox runs as the workspace's owner, so whatever it wrote there git would
// trust as the user's.
//
// So no command ever sees the host's repository directory. Each repository
// (the workspace's .git, its submodules' repositories in .git/modules, the
// .git directories of submodules' worktrees, and every other repository in
// the workspace a bounded walk finds at the start) is replaced inside the
// container by a shadow: a copy, in a host directory outside the workspace,
// of everything but its objects, with an object store of its own that
// borrows the host's, mounted read-only (gitstore.go). Nothing of the
// host's repository is writable in the container: what a command writes
// anywhere in the repository — config, hooks, commondir, config.worktree,
// info/, worktrees/, modules/, gitdir files, objects, refs, reflogs — stays
// in the shadow and never reaches the host as written, during a command,
// between commands or after corral is killed. (Large files of git-lfs, and
// refs kept in a reftable, are still shared.)
//
// After each command the host takes the objects and refs commands made,
// checked (gitstore.go), then a few small files that carry the state git
// commands change: HEAD, ORIG_HEAD and index. After each command (and at
// close, and in `corral gc` for a dead session) the host reads those files
// from the shadow, checks them against git's own
// formats — HEAD and ORIG_HEAD are one ref name or object id, the
// index's paths are what git's verify_path allows, its gitlinks are the
// submodules the host's index had, its extensions only the derived ones
// git checks against the entries (REUC, sdir; not the cache tree, which a
// commit trusts; a split index is refused) — and copies each one that
// changed to the host, unless the host's changed too (then the host's wins).
// Before each command, what changed on the host is copied into the shadow.
//
// Where a submodule's worktree keeps its .git (a file naming the repository,
// a directory, or nothing yet), that .git is mounted read-only (an empty
// read-only directory when there is none), and every directory from the
// workspace down to the submodule's is mounted on itself so that none can be
// moved aside and replaced by one with a .git of the command's.

// Bounds on what is shadowed.
const (
	maxGitDirs    = 64      // repositories
	maxGitWalk    = 10_000  // entries of .git/modules looked at to find them
	maxGitLinks   = 256     // submodule worktrees protected
	maxShadowCopy = 1 << 30 // bytes copied into the shadows
	maxPinDepth   = 32      // directories from the workspace down to one pinned
	maxPins       = 2048    // directories pinned (each a mount)
	maxSyncFile   = indexMaxSize
)

// gitShared are the directories of a repository bind-mounted into its
// shadow, shared with the host: its large files, and, where the refs are
// kept in a reftable, its refs (gitstore.go takes back objects, refs and
// reflogs of every other repository).
func gitShared(reftable bool) []string {
	if reftable {
		return []string{"refs", "logs", "reftable", "lfs"}
	}
	return []string{"lfs"}
}

// gitSynced are the files copied back to the host after validation (after
// the objects and refs, gitstore.go).
var gitSynced = []string{"HEAD", "ORIG_HEAD", "index"}

// shadowState is the state of a session's shadows, kept in the shadow
// directory's state.json (outside every shadow, so no command can change it).
// It lets `corral gc` copy back what a dead session left.
type shadowState struct {
	Workspace string            `json:"workspace"`
	Owner     map[string]string `json:"owner"` // OwnerLabels of the session's process
	UID       int               `json:"uid"`
	GID       int               `json:"gid"`
	Repos     []*shadowRepo     `json:"repos"`
	// Made are directories the shadowing created in the workspace (mount
	// points of an absent submodule .git); removed at the end when empty.
	Made []string `json:"made,omitempty"`
}

// shadowRepo is one repository and its shadow.
type shadowRepo struct {
	Host    string             `json:"host"`   // the repository directory, also its path in the container
	Shadow  string             `json:"shadow"` // its shadow
	HashLen int                `json:"hash_len"`
	Links   map[string]bool    `json:"links,omitempty"` // the gitlinks the host's index had
	Base    map[string]syncKey `json:"base"`            // each synced file at the last sync
	// Refs are the refs at the last sync, the same on both sides, and
	// StashSum the SHA-256 of the stash list (logs/refs/stash) then; not
	// used where Reftable (its refs are shared).
	Refs     refMap   `json:"refs"`
	StashSum [32]byte `json:"stash_sum"`
	Reftable bool     `json:"reftable,omitempty"`
	// Store is set when the shadow has an object store of its own (an
	// older corral's shared the host's), and Alternate is where the host's
	// objects are in the container, which that store borrows ("" when the
	// host's objects are not a directory of the repository's own).
	Store     bool   `json:"store,omitempty"`
	Alternate string `json:"alternate,omitempty"`

	// What was read of each side at the last sync (gitstore.go's treeKey);
	// nil: read it all.
	hostKey, shadowKey, objectsKey treeKey
	// stuck is set when git run on the repository did not end: nothing
	// more is taken from it (gitAsOwner).
	stuck bool
}

// syncKey tells whether a synced file changed since the last sync: a file
// whose stat is unchanged is not read; one whose content is the same is not
// copied.
type syncKey struct {
	Present   bool     `json:"present"`
	Host      statKey  `json:"host"`
	Shadow    statKey  `json:"shadow"`
	HostSum   [32]byte `json:"host_sum"`
	ShadowSum [32]byte `json:"shadow_sum"`
}

type statKey struct {
	Size  int64 `json:"size"`
	MTime int64 `json:"mtime"`
	// CTime too: a command can put back the mtime of a file it rewrote in
	// place (touch), not its ctime.
	CTime int64  `json:"ctime,omitempty"`
	Ino   uint64 `json:"ino"`
	Mode  uint32 `json:"mode"`
}

// gitShadow is the shadowing of a workspace's repositories for one session.
type gitShadow struct {
	dir string // holds the shadows and state.json; outside the workspace
	log *slog.Logger

	mu sync.Mutex // guards st and the files of the shadows while syncing
	st shadowState

	mounts []mount.Mount
	pinned map[string]bool // mount targets so far, while building
	pins   int             // directories pinned so far
}

// shadowPrefix starts the name of every session's shadow directory, in
// shadowsDir.
const shadowPrefix = "corral-git-"

// shadowsDir is the directory of the shadows of the running user's
// sessions: private to the user (statedir), never a shared temporary
// directory, where any local user could plant a shadow and a state.json for
// `corral gc` (often root) to act on, or take the name of one.
func shadowsDir() (string, error) {
	return statedir.Dir("shadows")
}

// newGitShadow shadows the workspace's repositories, if it has any, for
// the session. uid and gid own what the container may write. A workspace
// whose .git is a file (a linked worktree, a submodule) gets that file
// read-only: its repository is outside, not visible in the container.
func newGitShadow(ws, session string, uid, gid int, protect []string, log *slog.Logger) (*gitShadow, error) {
	parent, err := shadowsDir()
	if err != nil {
		return nil, fmt.Errorf("sandbox: shadow of the repository: %w", err)
	}
	dir, err := os.MkdirTemp(parent, shadowPrefix+session+"-")
	if err != nil {
		return nil, fmt.Errorf("sandbox: shadow of the repository: %w", err)
	}
	if envpath.Within(ws, dir) {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("sandbox: corral's state directory %s is inside the workspace: the repository's shadow must be outside (set XDG_STATE_HOME to a directory outside it)", parent)
	}
	s := &gitShadow{dir: dir, log: log, st: shadowState{Workspace: ws, Owner: sandbox.OwnerLabels(session, ws), UID: uid, GID: gid}}
	if err := s.build(ws, protect); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := s.save(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

// build finds the repositories, makes their shadows and lists the mounts,
// then those of the protected paths.
func (s *gitShadow) build(ws string, protect []string) error {
	type repo struct{ dir, worktree string }
	var repos []repo
	s.pinned = map[string]bool{ws: true}
	defer s.protect(ws, protect)
	gitDir := filepath.Join(ws, ".git")
	fi, err := os.Lstat(gitDir)
	switch {
	case err == nil && fi.Mode().IsRegular():
		// A linked worktree or a submodule: the repository is outside, not
		// visible in the container; the file naming it is read-only.
		s.mounts = append(s.mounts, mount.Mount{Type: mount.TypeBind, Source: gitDir, Target: gitDir, ReadOnly: true})
		s.pinned[gitDir] = true
	case err == nil && fi.IsDir():
		repos = append(repos, repo{gitDir, ws})
		s.pinned[gitDir] = true
	}
	// The submodules' repositories in .git/modules (nested ones included).
	visited := 0
	filepath.WalkDir(filepath.Join(ws, ".git", "modules"), func(p string, d fs.DirEntry, err error) error {
		if len(repos) == 0 {
			return fs.SkipAll
		}
		if visited++; visited > maxGitWalk {
			return fs.SkipAll // a tree made to slow the start down
		}
		if err != nil || !d.IsDir() || len(repos) >= maxGitDirs {
			return fs.SkipDir
		}
		if fi, err := os.Lstat(filepath.Join(p, "HEAD")); err == nil && fi.Mode().IsRegular() {
			wt := ""
			if v := gitConfigValue(filepath.Join(p, "config"), "core", "worktree"); v != "" {
				if !filepath.IsAbs(v) {
					v = filepath.Join(p, v)
				}
				wt = filepath.Clean(v)
			}
			repos = append(repos, repo{p, wt})
		}
		return nil
	})
	budget := int64(maxShadowCopy)
	links := 0
	walked := false
	for i := 0; ; i++ {
		if i == len(repos) && !walked {
			// Then the other repositories anywhere in the workspace (a
			// clone in a subdirectory, a workspace of several), once those
			// above are known.
			walked = true
			for _, n := range s.nested(ws, maxGitDirs-len(repos)) {
				repos = append(repos, repo{n, filepath.Dir(n)})
			}
		}
		if i == len(repos) {
			break
		}
		r := repos[i]
		shadow := filepath.Join(s.dir, "r"+strconv.Itoa(i))
		sr := &shadowRepo{Host: r.dir, Shadow: shadow, HashLen: 20, Base: map[string]syncKey{}}
		if strings.EqualFold(gitConfigValue(filepath.Join(r.dir, "config"), "extensions", "objectformat"), "sha256") {
			sr.HashLen = 32
		}
		hd, err := openRepoDir(ws, r.dir)
		if err != nil {
			return fmt.Errorf("sandbox: shadow of %s: %w", r.dir, err)
		}
		var st unix.Stat_t
		sr.Reftable = unix.Fstatat(hd.fd, "reftable", &st, unix.AT_SYMLINK_NOFOLLOW) == nil
		shared := gitShared(sr.Reftable)
		if err := s.copyRepo(ws, r.dir, shadow, shared, &budget); err != nil {
			hd.close()
			return err
		}
		s.mounts = append(s.mounts, mount.Mount{Type: mount.TypeBind, Source: shadow, Target: r.dir})
		// The repository's own directories are made through its descriptor:
		// one left there may be a link out of the workspace (objects to
		// /var/lib/dpkg), and a directory made, or given to the user, by its
		// path would be made or given through the link.
		s.mkdirAt(hd, "objects")
		if sr.Reftable {
			s.mkdirAt(hd, "refs")
			s.mkdirAt(hd, "logs")
		}
		for _, name := range shared {
			p := filepath.Join(r.dir, name)
			if unix.Fstatat(hd.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
				continue
			}
			s.mounts = append(s.mounts, mount.Mount{Type: mount.TypeBind, Source: p, Target: p})
		}
		// The host's objects, read-only, where the shadow's own store's
		// alternate names them; none where they are not a directory of the
		// repository's own (a link out of the workspace is not followed).
		if unix.Fstatat(hd.fd, "objects", &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
			sr.Alternate = hostObjects(i)
			s.mounts = append(s.mounts, mount.Mount{Type: mount.TypeBind, Source: filepath.Join(r.dir, "objects"), Target: sr.Alternate, ReadOnly: true})
		} else {
			s.log.Warn("a repository's objects are not a directory: its shadow does not see them", "repo", r.dir)
		}
		if err := s.makeStore(r.dir, shadow, sr.Alternate); err != nil {
			hd.close()
			return fmt.Errorf("sandbox: shadow of %s: %w", r.dir, err)
		}
		sr.Store = true
		hd.close()
		hd, sd, err := s.openRepo(sr)
		if err != nil {
			return fmt.Errorf("sandbox: shadow of %s: %w", r.dir, err)
		}
		if !sr.Reftable {
			// The host's refs, all in the shadow's packed-refs: what is
			// loose in the shadow after that is what commands wrote, a few
			// files to read after each command however many the host has.
			for _, d := range []string{"refs", "refs/heads", "refs/tags"} {
				os.Mkdir(filepath.Join(shadow, d), 0o755)
				s.chown(filepath.Join(shadow, d))
			}
			s.resetRefs(sr, hd, sd)
		}
		for _, name := range gitSynced {
			k, _ := s.keyOf(hd, sd, name)
			sr.Base[name] = k
		}
		// The submodules of this repository's worktree: their .git must not
		// be the command's.
		b, _ := hd.read("index", indexMaxSize)
		hd.close()
		sd.close()
		sr.Links = map[string]bool{}
		for _, l := range indexLinks(b, sr.HashLen) {
			sr.Links[l] = true
			if r.worktree == "" || links >= maxGitLinks {
				continue
			}
			links++
			sub := filepath.Join(r.worktree, filepath.FromSlash(l))
			if !envpath.Within(ws, sub) || sub == ws {
				continue
			}
			if !s.pin(ws, sub) {
				continue
			}
			g := filepath.Join(sub, ".git")
			fi, err := os.Lstat(g)
			switch {
			case s.pinned[g]:
			case err == nil && fi.Mode().IsRegular():
				s.pinned[g] = true
				s.mounts = append(s.mounts, mount.Mount{Type: mount.TypeBind, Source: g, Target: g, ReadOnly: true})
			case err == nil && fi.IsDir() && len(repos) < maxGitDirs:
				s.pinned[g] = true
				if _, err := os.Lstat(filepath.Join(g, "HEAD")); err == nil {
					repos = append(repos, repo{g, sub}) // a repository in the worktree: shadowed
				} else {
					s.mounts = append(s.mounts, mount.Mount{Type: mount.TypeBind, Source: g, Target: g, ReadOnly: true})
				}
			case errors.Is(err, fs.ErrNotExist):
				s.placeholder(g)
			default:
				s.log.Warn("cannot protect a submodule's .git: it is neither a file nor a directory", "path", g)
			}
		}
		s.st.Repos = append(s.st.Repos, sr)
	}
	return nil
}

// maxNestedWalk bounds the entries of the workspace looked at to find the
// repositories in it.
const maxNestedWalk = 200_000

// nested finds the repositories elsewhere in the workspace than its .git
// and its submodules (a clone in a subdirectory, a workspace that is a
// folder of repositories): git on the host would run their config and hooks
// as soon as the user runs git there. It returns up to max repository
// directories to shadow, each with the directories down to it pinned; a
// .git file there (a linked worktree's) is made read-only; what it cannot
// cover it says.
func (s *gitShadow) nested(ws string, max int) []string {
	var found []string
	n := 0
	err := filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
		if n++; n > maxNestedWalk {
			return errNestedWalk
		}
		if err != nil || d.Name() != ".git" {
			return nil
		}
		if s.pinned[p] || p == filepath.Join(ws, ".git") {
			if d.IsDir() {
				return fs.SkipDir // shadowed already, or made read-only
			}
			return nil
		}
		parent := filepath.Dir(p)
		switch {
		case d.IsDir():
			if fi, err := os.Lstat(filepath.Join(p, "HEAD")); err != nil || !fi.Mode().IsRegular() {
				return fs.SkipDir // not one git would take for a repository
			}
			if len(found) >= max {
				// Not shadowed: its config and hooks at least read-only.
				s.log.Warn("too many repositories in the workspace: this one is not shadowed, only its config and hooks are read-only", "path", p)
				if s.pin(ws, parent) {
					for _, name := range []string{"config", "hooks"} {
						if fi, err := os.Lstat(filepath.Join(p, name)); err == nil && (fi.IsDir() || fi.Mode().IsRegular()) {
							s.mounts = append(s.mounts, mount.Mount{Type: mount.TypeBind, Source: filepath.Join(p, name), Target: filepath.Join(p, name), ReadOnly: true})
						}
					}
				}
				return fs.SkipDir
			}
			if !s.pin(ws, parent) {
				s.log.Warn("cannot shadow a repository of the workspace", "path", p)
				return fs.SkipDir
			}
			s.pinned[p] = true
			found = append(found, p)
			return fs.SkipDir
		case d.Type().IsRegular():
			if s.pin(ws, parent) {
				s.pinned[p] = true
				s.mounts = append(s.mounts, mount.Mount{Type: mount.TypeBind, Source: p, Target: p, ReadOnly: true})
			}
		}
		return nil
	})
	if err != nil {
		s.log.Warn("the workspace is too large to look for every repository in it: those not found are not shadowed, and git on the host would run their config and hooks", "entries", maxNestedWalk)
	}
	return found
}

var errNestedWalk = errors.New("too many entries")

// pin makes every directory from the workspace (exclusive) down to dir
// (inclusive) a mount point of its own, so that none can be renamed and
// replaced by one of a command's; missing ones are made. It reports whether
// dir is a directory now (not a symbolic link or a file: a mount would
// follow or hide it).
func (s *gitShadow) pin(ws, dir string) bool {
	rel, err := filepath.Rel(ws, dir)
	if err != nil || rel == "." || upward(rel) {
		return false
	}
	parts := strings.Split(rel, string(filepath.Separator))
	if len(parts) > maxPinDepth {
		// A command can make a repository, or list a submodule in its
		// index, thousands of directories deep: a mount each, without
		// bound, for every later session on the workspace to start with.
		s.log.Warn("too deep in the workspace to be protected in the sandbox", "path", dir, "max_depth", maxPinDepth)
		return false
	}
	cur := ws
	for _, part := range parts {
		cur = filepath.Join(cur, part)
		fi, err := os.Lstat(cur)
		if errors.Is(err, fs.ErrNotExist) && s.makeDir(ws, cur) {
			s.st.Made = append(s.st.Made, cur)
			fi, err = os.Lstat(cur)
		}
		if err != nil || !fi.IsDir() {
			return false
		}
		if !s.pinned[cur] {
			if s.pins >= maxPins {
				s.log.Warn("too many directories to pin in the workspace: the rest is not protected in the sandbox", "path", dir, "max", maxPins)
				return false
			}
			s.pins++
			s.pinned[cur] = true
			s.mounts = append(s.mounts, mount.Mount{Type: mount.TypeBind, Source: cur, Target: cur})
		}
	}
	return true
}

// makeDir makes the directory p in the workspace ws, through a descriptor
// of its parent opened beneath ws without following a link (a directory on
// the way may have been replaced by one meanwhile), and gives it to the
// user. It reports whether it made it.
func (s *gitShadow) makeDir(ws, p string) bool {
	d, err := openRepoDir(ws, filepath.Dir(p))
	if err != nil {
		return false
	}
	defer d.close()
	return s.mkdirAt(d, filepath.Base(p))
}

// mkdirAt makes the directory name in d and, when it made it, gives it to
// the user on a descriptor opened without following a link, if it is still
// the process's own (not one put in its place meanwhile). It reports
// whether it made it.
func (s *gitShadow) mkdirAt(d *repoDir, name string) bool {
	if unix.Mkdirat(d.fd, name, 0o755) != nil {
		return false
	}
	uid, gid := s.owner()
	if uid < 0 {
		return true
	}
	fd, err := unix.Openat(d.fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return true
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) == nil && int(st.Uid) == os.Geteuid() {
		unix.Fchown(fd, uid, gid)
	}
	return true
}

// placeholder puts an empty read-only directory at the missing path p, so
// that no command can create a file there; it goes at the end when still
// empty.
func (s *gitShadow) placeholder(p string) {
	if !s.makeDir(s.st.Workspace, p) {
		return
	}
	s.st.Made = append(s.st.Made, p)
	s.pinned[p] = true
	s.mounts = append(s.mounts, mount.Mount{Type: mount.TypeBind, Source: p, Target: p, ReadOnly: true})
}

// protect makes the workspace-relative paths read-only to commands, present
// or absent. A file or directory there is mounted read-only; a missing one
// gets an empty read-only directory as a placeholder (git shows no empty
// directory, so it never appears as a change), at its topmost missing
// directory when there is one (.vscode/ for .vscode/tasks.json).
// The directories leading to each are pinned. The paths are literal —
// expandProtect has turned the patterns into what they match, names like
// app/[slug] included — and paths into a repository are left to the file
// tools and the shadow.
func (s *gitShadow) protect(ws string, paths []string) {
	paths = slices.Clone(paths)
	slices.SortFunc(paths, func(a, b string) int { return strings.Count(a, "/") - strings.Count(b, "/") })
	var covered []string
	for _, raw := range paths {
		rel := filepath.Clean(filepath.FromSlash(raw))
		if filepath.IsAbs(rel) {
			r, err := filepath.Rel(ws, rel)
			if err != nil {
				continue
			}
			rel = r
		}
		p := filepath.Join(ws, rel)
		if rel == "." || upward(rel) ||
			slices.Contains(strings.Split(rel, string(filepath.Separator)), ".git") ||
			slices.ContainsFunc(covered, func(c string) bool { return envpath.Within(c, p) }) || s.pinned[p] {
			continue
		}
		top := p
		for d := filepath.Dir(top); d != ws; d = filepath.Dir(d) {
			if _, err := os.Lstat(d); !errors.Is(err, fs.ErrNotExist) {
				break
			}
			top = d
		}
		if d := filepath.Dir(top); d != ws && !s.pin(ws, d) {
			s.log.Warn("cannot protect a path: a directory on its way is not one", "path", p)
			continue
		}
		fi, err := os.Lstat(top)
		switch {
		case top != p || errors.Is(err, fs.ErrNotExist):
			s.placeholder(top)
		case err != nil:
			continue
		case fi.Mode()&fs.ModeSymlink != 0:
			s.log.Warn("cannot protect a symbolic link in the sandbox: a command could replace it", "path", p)
			continue
		default:
			s.pinned[p] = true
			s.mounts = append(s.mounts, mount.Mount{Type: mount.TypeBind, Source: p, Target: p, ReadOnly: true})
		}
		covered = append(covered, top)
	}
}

// copyRepo copies a repository directory into its shadow, but for what is
// shared and the submodules' repositories (shadows of their own). The
// repository may be one a command made, in a directory a command of another
// session running on the workspace can change meanwhile: it is read by
// descriptor (see repoDir), so that a directory in it replaced by a link
// while it is copied leads nowhere (read by path, the link would be
// followed, and a file of the host copied where commands read it).
func (s *gitShadow) copyRepo(ws, src, dst string, shared []string, budget *int64) error {
	if err := os.Mkdir(dst, 0o755); err != nil {
		return fmt.Errorf("sandbox: shadow of %s: %w", src, err)
	}
	s.chown(dst)
	d, err := openRepoDir(ws, src)
	if err != nil {
		return fmt.Errorf("sandbox: shadow of %s: %w", src, err)
	}
	defer d.close()
	names, err := d.names(-1)
	if err != nil {
		return fmt.Errorf("sandbox: shadow of %s: %w", src, err)
	}
	for _, name := range names {
		if name == "objects" || name == "refs" && !slices.Contains(shared, "refs") {
			continue // the shadow's own store (makeStore), its refs (resetRefs)
		}
		if slices.Contains(shared, name) || name == "modules" {
			var st unix.Stat_t
			if unix.Fstatat(d.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
				continue
			}
			// A mount point, or the parent of the submodules' shadows.
			if name == "modules" {
				sub, err := openBeneathFD(d, name)
				if err != nil {
					continue
				}
				n := 0
				err = s.mkdirsAt(sub, filepath.Join(dst, name), &n)
				sub.close()
				if err != nil {
					return err
				}
			} else if err := os.Mkdir(filepath.Join(dst, name), 0o755); err != nil {
				return err
			} else {
				s.chown(filepath.Join(dst, name))
			}
			continue
		}
		if err := s.copyEntryAt(d, name, filepath.Join(dst, name), budget, maxCopyDepth); err != nil {
			return err
		}
	}
	return nil
}

// maxCopyDepth bounds the directories copied into a shadow, one in another
// (git's own are a few deep).
const maxCopyDepth = 32

// mkdirsAt recreates the directories of d (the modules tree) in dst,
// empty: the mount points of the submodules' shadows. n counts the
// entries looked at, up to maxGitWalk.
func (s *gitShadow) mkdirsAt(d *repoDir, dst string, n *int) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	s.chown(dst)
	var st unix.Stat_t
	if unix.Fstatat(d.fd, "HEAD", &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG {
		return nil // a repository: shadowed on its own
	}
	names, err := d.names(maxGitWalk)
	if err != nil {
		return nil
	}
	for _, name := range names {
		if *n++; *n > maxGitWalk {
			return nil
		}
		sub, err := openBeneathFD(d, name) // a directory, not through a link
		if err != nil {
			continue
		}
		err = s.mkdirsAt(sub, filepath.Join(dst, name), n)
		sub.close()
		if err != nil {
			return err
		}
	}
	return nil
}

// names lists up to max names of d (all when max <= 0).
func (d *repoDir) names(max int) ([]string, error) {
	fd, err := unix.Dup(d.fd)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), d.path)
	defer f.Close()
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	names, err := f.Readdirnames(max)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return names, nil
}

func (s *gitShadow) copyDirAt(d *repoDir, dst string, budget *int64, depth int) error {
	names, err := d.names(maxGitWalk)
	if err != nil {
		return nil
	}
	for _, name := range names {
		if err := s.copyEntryAt(d, name, filepath.Join(dst, name), budget, depth); err != nil {
			return err
		}
	}
	return nil
}

// copyEntryAt copies name in d to t: a regular file, a symbolic link (as
// one, never followed) or a directory, depth levels deep at most, opened
// without following a link; other files (a daemon's socket, a pipe) are
// left out. A file over the budget is an error.
func (s *gitShadow) copyEntryAt(d *repoDir, name, t string, budget *int64, depth int) error {
	var st unix.Stat_t
	if unix.Fstatat(d.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
		return nil // gone meanwhile
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		if err := copyFileAt(d, name, t, fs.FileMode(st.Mode&0o777), budget); err != nil {
			return err
		}
	case unix.S_IFLNK:
		buf := make([]byte, 4096)
		n, err := unix.Readlinkat(d.fd, name, buf)
		if err != nil || n == len(buf) {
			return nil
		}
		if err := os.Symlink(string(buf[:n]), t); err != nil {
			return err
		}
	case unix.S_IFDIR:
		if depth <= 1 {
			return nil
		}
		sub, err := openBeneathFD(d, name)
		if err != nil {
			return nil
		}
		defer sub.close()
		if err := os.Mkdir(t, fs.FileMode(st.Mode&0o777)|0o700); err != nil {
			return err
		}
		s.chown(t)
		return s.copyDirAt(sub, t, budget, depth-1)
	default:
		return nil
	}
	s.chown(t)
	return nil
}

// copyFileAt copies the regular file name in d to t, opened without
// following a link or blocking, checked on its descriptor, and charged to
// budget.
func copyFileAt(d *repoDir, name, t string, perm fs.FileMode, budget *int64) error {
	fd, err := unix.Openat(d.fd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil // gone meanwhile
	}
	in := os.NewFile(uintptr(fd), filepath.Join(d.path, name))
	defer in.Close()
	fi, err := in.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return nil // replaced meanwhile
	}
	if *budget -= fi.Size(); *budget < 0 {
		return fmt.Errorf("sandbox: the repository's %s holds more than %d MiB besides the objects: too much to shadow", d.path, maxShadowCopy>>20)
	}
	out, err := os.OpenFile(t, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, io.LimitReader(in, fi.Size()))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

// openBeneathFD opens the directory name in d, not following a link.
func openBeneathFD(d *repoDir, name string) (*repoDir, error) {
	fd, err := unix.Openat(d.fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return &repoDir{fd: fd, path: filepath.Join(d.path, name)}, nil
}

// chown gives what the container may write to the workspace's owner, when
// corral runs as another user (root).
func (s *gitShadow) chown(p string) {
	if os.Getuid() == 0 && s.st.UID != 0 {
		os.Lchown(p, s.st.UID, s.st.GID)
	}
}

// save writes state.json atomically.
func (s *gitShadow) save() error {
	b, err := json.Marshal(&s.st)
	if err != nil {
		return err
	}
	tmp := filepath.Join(s.dir, "state.json.tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("sandbox: shadow state: %w", err)
	}
	return os.Rename(tmp, filepath.Join(s.dir, "state.json"))
}

// readSmall reads a regular file without following a symbolic link or
// blocking on a named pipe, up to max bytes.
func readSmall(p string, max int64) ([]byte, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readRegular(f, max)
}

// keyOf is the sync key of a file present (or absent) alike on both sides.
func (s *gitShadow) keyOf(hd, sd *repoDir, name string) (syncKey, error) {
	var k syncKey
	hk, ok := hd.stat(name)
	if !ok {
		return syncKey{}, nil
	}
	b, err := hd.read(name, maxSyncFile)
	if err != nil {
		return syncKey{}, err
	}
	k.Present, k.Host, k.HostSum, k.ShadowSum = true, hk, sha256.Sum256(b), sha256.Sum256(b)
	k.Shadow, _ = sd.stat(name)
	return k, nil
}

// openRepo opens a repository's directory on the host (beneath the
// workspace) and its shadow (beneath the shadows' directory).
func (s *gitShadow) openRepo(r *shadowRepo) (hd, sd *repoDir, err error) {
	if hd, err = openRepoDir(s.st.Workspace, r.Host); err != nil {
		return nil, nil, err
	}
	if sd, err = openRepoDir(s.dir, r.Shadow); err != nil {
		hd.close()
		return nil, nil, err
	}
	return hd, sd, nil
}

// owner is the uid and gid to give what a command may write (-1: the
// running user's).
func (s *gitShadow) owner() (int, int) {
	if os.Geteuid() == 0 && s.st.UID != 0 {
		return s.st.UID, s.st.GID
	}
	return -1, -1
}

// syncIn copies into the shadows what changed on the host since the last
// sync (the user committed between two commands).
func (s *gitShadow) syncIn() {
	if s == nil || s.dir == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	changed := false
	for _, r := range s.st.Repos {
		hd, sd, err := s.openRepo(r)
		if err != nil {
			s.log.Warn("cannot open a repository or its shadow", "path", r.Host, "err", err)
			continue
		}
		if r.Refs != nil && s.pullRefs(r, hd, sd) {
			changed = true
		}
		for _, name := range gitSynced {
			if s.pull(r, hd, sd, name) {
				changed = true
			}
		}
		hd.close()
		sd.close()
	}
	if changed {
		s.save()
	}
}

// pull copies one file from the host into the shadow if the host's changed.
func (s *gitShadow) pull(r *shadowRepo, hd, sd *repoDir, name string) bool {
	base := r.Base[name]
	hk, present := hd.stat(name)
	if present == base.Present && hk == base.Host {
		return false
	}
	if !present {
		sd.removeAll(name)
		r.Base[name] = syncKey{}
		return true
	}
	b, err := hd.read(name, maxSyncFile)
	if err != nil {
		return false
	}
	sum := sha256.Sum256(b)
	if base.Present && sum == base.HostSum {
		base.Host = hk
		r.Base[name] = base
		return true
	}
	if err := s.writeShadow(sd, name, b); err != nil {
		s.log.Warn("cannot copy a file of the repository into its shadow", "path", filepath.Join(r.Host, name), "err", err)
		return false
	}
	sk, _ := sd.stat(name)
	r.Base[name] = syncKey{Present: true, Host: hk, Shadow: sk, HostSum: sum, ShadowSum: sum}
	return true
}

// writeShadow replaces a file of a shadow (a command may have made it a
// directory or a link: it goes).
func (s *gitShadow) writeShadow(sd *repoDir, name string, b []byte) error {
	uid, gid := s.owner()
	return sd.write(name, b, 0o644, uid, gid, true)
}

// syncOut copies back to the host, after validation, what commands changed
// of the synced files, and returns what it refused, each as
// "PATH (WHY)" with PATH relative to the workspace.
func (s *gitShadow) syncOut() (refused []string) {
	if s == nil || s.dir == "" {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	changed := false
	refuse := func(r *shadowRepo, name, why string) {
		rel, err := filepath.Rel(s.st.Workspace, filepath.Join(r.Host, name))
		if err != nil {
			rel = filepath.Join(r.Host, name)
		}
		refused = append(refused, sanitize.Text(fmt.Sprintf("%s (%s)", filepath.ToSlash(rel), why)))
	}
	for _, r := range s.st.Repos {
		hd, sd, err := s.openRepo(r)
		if err != nil {
			s.log.Warn("cannot open a repository or its shadow", "path", r.Host, "err", err)
			refuse(r, "", "cannot open it: "+err.Error())
			continue
		}
		// The objects first, then the refs that name them, then HEAD and
		// the index. (Refs is nil in the state of an older corral, whose
		// shadows shared the refs.)
		if r.Store {
			if why := s.importObjects(r, hd, sd); why != "" {
				refuse(r, "objects", why)
			}
		}
		if r.Refs != nil {
			ch, why := s.pushRefs(r, hd, sd)
			changed = changed || ch
			if why != "" {
				refuse(r, "refs", why)
			}
		}
		for _, name := range gitSynced {
			ch, why := s.push(r, hd, sd, name)
			changed = changed || ch
			if why != "" {
				refuse(r, name, why)
			}
		}
		hd.close()
		sd.close()
	}
	if changed {
		s.save()
	}
	return refused
}

// push copies one file from the shadow to the host when a command changed it
// and it is valid; why says why not, when a change was refused. A refused
// file is put back in the shadow from the host.
func (s *gitShadow) push(r *shadowRepo, hd, sd *repoDir, name string) (changed bool, why string) {
	base := r.Base[name]
	host := filepath.Join(r.Host, name)
	sk, present := sd.stat(name)
	if present == base.Present && (!present || sk == base.Shadow) {
		return false, ""
	}
	var b []byte
	var sum [32]byte
	if present {
		var err error
		if b, err = sd.read(name, maxSyncFile); err != nil {
			why = err.Error()
		}
		sum = sha256.Sum256(b)
		if why == "" && base.Present && sum == base.ShadowSum {
			base.Shadow = sk
			r.Base[name] = base
			return true, ""
		}
	}
	hk, hostPresent := hd.stat(name)
	if hostPresent != base.Present || hostPresent && hk != base.Host {
		if hb, err := hd.read(name, maxSyncFile); err != nil || !base.Present || sha256.Sum256(hb) != base.HostSum {
			why = "changed on the host too; the host's is kept"
		}
	}
	out := b
	if why == "" {
		switch {
		case !present && name == "HEAD":
			why = "removed"
		case !present:
		case name == "HEAD" || name == "ORIG_HEAD":
			if err := checkHead(b, r.HashLen, name == "HEAD"); err != nil {
				why = err.Error()
			}
		case name == "packed-refs":
			if err := checkPackedRefs(b, r.HashLen); err != nil {
				why = err.Error()
			}
		case name == "index":
			// The host's index tells which flags the user set.
			hostIndex, _ := hd.read(name, maxSyncFile)
			var err error
			if out, err = checkIndex(b, r.HashLen, r.Links, hostIndex); err != nil {
				why = err.Error()
			}
		}
	}
	if why == "" {
		var err error
		if present {
			err = s.writeHost(hd, name, out)
		} else {
			err = hd.remove(name)
		}
		if err != nil {
			why = "cannot write it: " + err.Error()
		} else {
			hk, _ := hd.stat(name)
			r.Base[name] = syncKey{Present: present, Host: hk, Shadow: sk, HostSum: sha256.Sum256(out), ShadowSum: sum}
			return true, ""
		}
	}
	s.log.Warn("not copied to the host's repository", "path", host, "why", why)
	s.reset(r, hd, sd, name)
	return true, why
}

// reset puts a file of the shadow back to what the host has.
func (s *gitShadow) reset(r *shadowRepo, hd, sd *repoDir, name string) {
	b, err := hd.read(name, maxSyncFile)
	if err != nil {
		sd.removeAll(name)
		r.Base[name] = syncKey{}
		return
	}
	if err := s.writeShadow(sd, name, b); err != nil {
		s.log.Warn("cannot copy a file of the repository into its shadow", "path", filepath.Join(r.Host, name), "err", err)
	}
	hk, _ := hd.stat(name)
	sk, _ := sd.stat(name)
	sum := sha256.Sum256(b)
	r.Base[name] = syncKey{Present: true, Host: hk, Shadow: sk, HostSum: sum, ShadowSum: sum}
}

// writeHost replaces a file of the host's repository atomically, keeping its
// mode and owner.
func (s *gitShadow) writeHost(hd *repoDir, name string, b []byte) error {
	mode, uid, gid := fs.FileMode(0o644), -1, -1
	var st unix.Stat_t
	if err := unix.Fstatat(hd.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil {
		mode = fs.FileMode(st.Mode & 0o777)
		uid, gid = int(st.Uid), int(st.Gid)
	} else {
		uid, gid = s.owner()
	}
	return hd.write(name, b, mode, uid, gid, false)
}

// close copies back what is left to copy and removes the shadows and the
// directories made in the workspace; no process of the session is left to
// write to them.
func (s *gitShadow) close() []string {
	if s == nil || s.dir == "" {
		return nil
	}
	refused := s.syncOut()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range slices.Backward(s.st.Made) {
		// Only when still empty: the user may have used it meanwhile. By a
		// descriptor of its parent, opened beneath the workspace without
		// following a link: a directory on the way may have been replaced.
		if d, err := openRepoDir(s.st.Workspace, filepath.Dir(p)); err == nil {
			unix.Unlinkat(d.fd, filepath.Base(p), unix.AT_REMOVEDIR)
			d.close()
		}
	}
	if err := os.RemoveAll(s.dir); err != nil {
		s.log.Warn("cannot remove the repository's shadow", "dir", s.dir, "err", err)
	}
	s.dir = ""
	return refused
}

// repairShadows finishes the shadows of dead sessions: what they changed is
// copied back (validated as after every command), then they are removed. It
// returns the workspaces repaired.
func repairShadows(log *slog.Logger) (repaired []string, err error) {
	parent, err := shadowsDir()
	if err != nil {
		return nil, err
	}
	dirs, _ := filepath.Glob(filepath.Join(parent, shadowPrefix+"*"))
	var errs []error
	for _, dir := range dirs {
		b, err := readSmall(filepath.Join(dir, "state.json"), 64<<20)
		if err != nil {
			continue // another user's, or one being made
		}
		s := &gitShadow{dir: dir, log: log}
		if err := json.Unmarshal(b, &s.st); err != nil {
			continue
		}
		if local, alive := sandbox.OwnerState(s.st.Owner); !local || alive {
			continue
		}
		for _, r := range s.st.Repos {
			if !envpath.Within(dir, r.Shadow) {
				s.st.Repos = nil // not a state this code wrote
			}
		}
		if refused := s.close(); len(refused) > 0 {
			log.Warn("a dead session's changes to the repository were not copied back", "workspace", s.st.Workspace, "files", refused)
		}
		if _, err := os.Lstat(dir); err == nil {
			errs = append(errs, fmt.Errorf("sandbox: cannot remove %s", dir))
		}
		repaired = append(repaired, s.st.Workspace)
	}
	return repaired, errors.Join(errs...)
}

// gitConfigValue returns the value of section.key in the git config file, ""
// when it is not there. It reads what git itself writes: no includes, and
// only whole-value quotes. It reads only the host's own files.
func gitConfigValue(file, section, key string) string {
	b, err := readSmall(file, 1<<20)
	if err != nil {
		return ""
	}
	cur := ""
	value := ""
	sc := bufio.NewScanner(bytes.NewReader(b))
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

// Every file of a repository the host reads or writes around a command is
// in a directory a command can write: the shadow (the repository as the
// container sees it) and the workspace. Between a check and a use a command
// running in the background can put a symbolic link there (to any file of
// the host, which corral, often root, would then read or overwrite), a named
// pipe (which would block corral) or a directory. So these files are never
// reached by path: each repository directory is opened as a descriptor,
// component by component from a directory corral trusts (the shadows' own
// directory, the workspace), refusing links and "..", and each file is then
// looked at, opened (without following a link, without blocking) and
// checked on its descriptor, and replaced by a new file made beside it and
// renamed over it, all relative to that descriptor.

// repoDir is an open directory of a repository or of its shadow.
type repoDir struct {
	fd   int
	path string // for messages, and the removal of a directory in a shadow
}

// openBeneath opens root (a directory corral made or was given) and then
// rel, one component at a time, each a directory and none a link.
func openBeneath(root, rel string) (*repoDir, error) {
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: root, Err: err}
	}
	if rel != "." {
		for _, part := range strings.Split(filepath.ToSlash(rel), "/") {
			if part == "" || part == "." || part == ".." {
				unix.Close(fd)
				return nil, fmt.Errorf("%s: not a path beneath %s", rel, root)
			}
			next, err := unix.Openat(fd, part, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			unix.Close(fd)
			if err != nil {
				return nil, &fs.PathError{Op: "open", Path: filepath.Join(root, rel), Err: err}
			}
			fd = next
		}
	}
	return &repoDir{fd: fd, path: filepath.Join(root, rel)}, nil
}

// openRepoDir opens dir, which must be within root.
func openRepoDir(root, dir string) (*repoDir, error) {
	rel, err := filepath.Rel(root, dir)
	if err != nil || !envpath.Within(root, dir) {
		return nil, fmt.Errorf("%s is not within %s", dir, root)
	}
	return openBeneath(root, rel)
}

func (d *repoDir) close() {
	if d != nil && d.fd >= 0 {
		unix.Close(d.fd)
		d.fd = -1
	}
}

// stat is the stat key of name, not following a link; ok is false when it
// is absent.
func (d *repoDir) stat(name string) (k statKey, ok bool) {
	var st unix.Stat_t
	if err := unix.Fstatat(d.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return statKey{}, false
	}
	return keyOfStat(&st), true
}

func keyOfStat(st *unix.Stat_t) statKey {
	return statKey{Size: st.Size, MTime: st.Mtim.Nano(), CTime: st.Ctim.Nano(), Ino: st.Ino, Mode: uint32(fileMode(uint32(st.Mode)))}
}

// fileMode turns a stat mode into an fs.FileMode as os.Lstat does (the type
// bits that matter here).
func fileMode(m uint32) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	switch m & unix.S_IFMT {
	case unix.S_IFDIR:
		mode |= fs.ModeDir
	case unix.S_IFLNK:
		mode |= fs.ModeSymlink
	case unix.S_IFIFO:
		mode |= fs.ModeNamedPipe
	case unix.S_IFSOCK:
		mode |= fs.ModeSocket
	case unix.S_IFCHR:
		mode |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		mode |= fs.ModeDevice
	}
	return mode
}

// read reads the regular file name, up to max bytes: a link is not
// followed, a named pipe or a device not opened (or, if one is put there
// meanwhile, opened without blocking and refused).
func (d *repoDir) read(name string, max int64) ([]byte, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(d.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, errors.New("not a regular file")
	}
	fd, err := unix.Openat(d.fd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), filepath.Join(d.path, name))
	defer f.Close()
	return readRegular(f, max)
}

var errTooLarge = errors.New("too large")

// readRegular reads f, checked on its descriptor to be a regular file of
// at most max bytes.
func readRegular(f *os.File, max int64) ([]byte, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	if fi.Size() > max {
		return nil, errTooLarge
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if int64(len(b)) > max {
		return nil, errTooLarge
	}
	return b, err
}

// write replaces name atomically with b: a new file, made beside it under
// a name no one else can have made, written, given mode and owner (uid -1:
// unchanged), then renamed over name. A directory at name is removed first
// when removeDir is set (in a shadow, where a command may have made it);
// elsewhere it is an error.
func (d *repoDir) write(name string, b []byte, mode fs.FileMode, uid, gid int, removeDir bool) error {
	var rnd [8]byte
	rand.Read(rnd[:])
	tmp := "." + name + ".corral-" + hex.EncodeToString(rnd[:])
	fd, err := unix.Openat(d.fd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), filepath.Join(d.path, tmp))
	_, err = f.Write(b)
	if err == nil {
		err = f.Chmod(mode)
	}
	if err == nil && uid >= 0 && os.Geteuid() == 0 {
		err = f.Chown(uid, gid)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Renameat(d.fd, tmp, d.fd, name)
		if err != nil && removeDir && (errors.Is(err, unix.EISDIR) || errors.Is(err, unix.ENOTEMPTY) || errors.Is(err, unix.EEXIST)) {
			if err = d.removeAll(name); err == nil {
				err = unix.Renameat(d.fd, tmp, d.fd, name)
			}
		}
	}
	if err != nil {
		unix.Unlinkat(d.fd, tmp, 0)
	}
	return err
}

// remove removes name, a file or a link (never followed); absent is no
// error.
func (d *repoDir) remove(name string) error {
	err := unix.Unlinkat(d.fd, name, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	return err
}

// removeAll removes name, whatever it is, in a shadow. os.Root removes a
// tree by descriptors, following no link. It is opened by d's path, which
// a command may have made a link elsewhere since d was opened (d may be a
// directory in the shadow, refs/heads): it is used only when it is d's
// directory itself.
func (d *repoDir) removeAll(name string) error {
	if err := unix.Unlinkat(d.fd, name, 0); err == nil || errors.Is(err, unix.ENOENT) {
		return nil
	}
	r, err := os.OpenRoot(d.path)
	if err != nil {
		return err
	}
	defer r.Close()
	var want unix.Stat_t
	fi, err := r.Stat(".")
	if err != nil {
		return err
	}
	got, ok := fi.Sys().(*syscall.Stat_t)
	if unix.Fstat(d.fd, &want) != nil || !ok || uint64(got.Dev) != uint64(want.Dev) || uint64(got.Ino) != uint64(want.Ino) {
		return fmt.Errorf("%s was replaced", d.path)
	}
	return r.RemoveAll(name)
}
