package tools

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"

	"github.com/corralhq/corral/fsys"
	"github.com/corralhq/corral/internal/agentconf"
	"github.com/corralhq/corral/internal/sanitize"
)

// A userError is a mistake the model can correct: the tools turn it into an
// IsError result carrying its message.
type userError struct {
	msg string
	err error // what it is about, for errors.Is; may be nil
}

func (e *userError) Error() string { return e.msg }
func (e *userError) Unwrap() error { return e.err }

func userErrorf(format string, args ...any) error {
	return &userError{msg: fmt.Sprintf(format, args...)}
}

// resultOf turns err into a tool result: a userError becomes an IsError result,
// anything else stays a Go error.
func resultOf(err error) (Result, error) {
	var ue *userError
	if errors.As(err, &ue) {
		return errorResult("%s", ue.msg), nil
	}
	return Result{}, err
}

// maxSymlinks bounds the symbolic links followed while resolving one path, as the
// kernel's ELOOP limit does.
const maxSymlinks = 40

// A target is a workspace path resolved for one call.
type target struct {
	// display is the path as the model should see it: workspace-relative,
	// cleaned, slash-separated ("." for the root), control characters made
	// visible (sanitize.Text).
	display string
	// canon is the real path relative to the workspace: every symbolic link
	// resolved, no "." or ".." ("." for the root). Components past the first
	// one that does not exist are taken literally.
	canon string
	// key identifies the file for the read-state and the write queue: canon,
	// case-folded when the workspace's filesystem ignores case.
	key string
	// exists reports whether canon existed when it was resolved.
	exists bool
}

// dir and name split canon into the parent directory ("." at the top) and the
// last component.
func (t target) dir() string  { return path.Dir(t.canon) }
func (t target) name() string { return path.Base(t.canon) }

// workspace is the confined view of the workspace directory.
type workspace struct {
	root fsys.Root
	// local is root when it is this machine's directory, which the watcher
	// can watch; nil for another filesystem.
	local *fsys.Local
	// own says root is the session's, to close with it.
	own bool
	// abs is the absolute workspace path as given; real is the same with every
	// symbolic link resolved. Absolute paths are accepted under either, and
	// under seen.
	abs, real string
	// seen is the path commands see the workspace at: real, or the path an
	// isolated copy is mounted at. The model is told this one.
	seen string
	// foldCase is set when the filesystem ignores case, so that a.txt and A.TXT
	// are one key.
	foldCase bool
}

// openWorkspace opens the workspace: the directory dir of this machine, or,
// when root is not nil, that filesystem, whose path dir is (root's Name when
// dir is empty). seen, when not empty, is the path commands see it at (an
// isolated copy's mount point).
func openWorkspace(dir string, root fsys.Root, seen string) (*workspace, error) {
	if seen != "" && !filepath.IsAbs(seen) {
		return nil, fmt.Errorf("tools: the sandbox path %q of the workspace is not absolute", seen)
	}
	var ws *workspace
	if root != nil {
		real := root.Name()
		abs := real
		ws = &workspace{root: root, real: real}
		ws.local, _ = root.(*fsys.Local)
		switch {
		case filepath.IsAbs(dir):
			abs = filepath.Clean(dir)
		case dir != "" && ws.local != nil:
			if a, err := filepath.Abs(dir); err == nil {
				abs = a
			}
		}
		ws.abs = abs
	} else {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return nil, fmt.Errorf("tools: workspace: %w", err)
		}
		real, err := filepath.EvalSymlinks(abs)
		if err != nil {
			return nil, fmt.Errorf("tools: workspace: %w", err)
		}
		fi, err := os.Stat(real)
		if err != nil {
			return nil, fmt.Errorf("tools: workspace: %w", err)
		}
		if !fi.IsDir() {
			return nil, fmt.Errorf("tools: workspace %s is not a directory", dir)
		}
		local, err := fsys.OpenLocal(real)
		if err != nil {
			return nil, fmt.Errorf("tools: workspace: %w", err)
		}
		ws = &workspace{root: local, local: local, own: true, abs: filepath.Clean(abs), real: real}
	}
	ws.seen = ws.real
	if seen != "" {
		ws.seen = filepath.Clean(seen)
		ws.abs = ws.seen
	}
	ws.foldCase = probeFoldCase(ws.root)
	return ws, nil
}

// close closes the root when it is the session's own.
func (ws *workspace) close() error {
	if !ws.own {
		return nil
	}
	return ws.root.Close()
}

// probeFoldCase reports whether the workspace's filesystem ignores case. It looks
// for an entry of the workspace root whose name changes with case and checks
// whether the other spelling names the same file; with no such entry it assumes
// the platform's default (macOS and Windows ignore case). It creates nothing.
func probeFoldCase(root fsys.Root) bool {
	d, err := root.OpenFile(".", os.O_RDONLY, 0)
	if err == nil {
		defer d.Close()
		names, _ := d.Readdirnames(64)
		for _, n := range names {
			swapped := swapCase(n)
			if swapped == n {
				continue
			}
			a, err := root.Lstat(n)
			if err != nil {
				continue
			}
			b, err := root.Lstat(swapped)
			return err == nil && fsys.SameFile(a, b)
		}
	}
	return runtime.GOOS == "darwin" || runtime.GOOS == "windows"
}

func swapCase(s string) string {
	return strings.Map(func(r rune) rune {
		if u := strings.ToUpper(string(r)); u != string(r) {
			return []rune(u)[0]
		}
		if l := strings.ToLower(string(r)); l != string(r) {
			return []rune(l)[0]
		}
		return r
	}, s)
}

func (ws *workspace) keyOf(canon string) string {
	if ws.foldCase {
		return strings.ToLower(canon)
	}
	return canon
}

// relative turns an absolute path into a workspace-relative one, if it lies in
// the workspace.
func (ws *workspace) relative(p string) (string, bool) {
	return within(p, ws.seen, ws.real, ws.abs)
}

// within returns the absolute path p relative to the first of bases that
// holds it.
func within(p string, bases ...string) (string, bool) {
	p = filepath.Clean(p)
	for _, base := range bases {
		rel, err := filepath.Rel(base, p)
		if err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return rel, true
		}
	}
	return "", false
}

// resolve checks that p names something inside the workspace and resolves its
// symbolic links. Errors are userErrors whose message says what to do instead.
func (ws *workspace) resolve(p string) (target, error) {
	if strings.TrimSpace(p) == "" {
		return target{}, userErrorf("The path is empty. Give a file path relative to the workspace root, e.g. src/main.go.")
	}
	if strings.IndexByte(p, 0) >= 0 {
		return target{}, userErrorf("The path %q contains a NUL byte. Give a file path relative to the workspace root.", p)
	}
	rel := p
	if filepath.IsAbs(p) {
		r, ok := ws.relative(p)
		if !ok {
			return target{}, userErrorf("%s is outside the workspace (%s). Only files inside the workspace can be used: give a path relative to the workspace root.", p, ws.abs)
		}
		rel = r
	}
	rel = filepath.ToSlash(filepath.Clean(rel))
	if rel == ".." || strings.HasPrefix(rel, "../") {
		return target{}, userErrorf("%s points outside the workspace. Only files inside the workspace can be used: give a path relative to the workspace root, without leading \"..\".", p)
	}
	if err := ws.checkExpansion(p, rel); err != nil {
		return target{}, err
	}
	canon, exists, err := ws.realpath(rel)
	if err != nil {
		return target{}, err
	}
	return target{display: sanitize.Text(rel), canon: canon, key: ws.keyOf(canon), exists: exists}, nil
}

// checkExpansion refuses a path whose first component a shell would have
// expanded — "~/x", "~user/x", "$HOME/x", "$lib/x" — when the workspace has no
// such entry: the model meant the home directory or a variable, not a new
// directory named "~" or "$HOME" in the workspace.
func (ws *workspace) checkExpansion(p, rel string) error {
	first, _, _ := strings.Cut(rel, "/")
	if !strings.HasPrefix(first, "~") && !strings.HasPrefix(first, "$") {
		return nil
	}
	if _, err := ws.root.Lstat(first); !errors.Is(err, fs.ErrNotExist) {
		return nil // it exists: a name like any other
	}
	if first[0] == '~' {
		return userErrorf("%s starts with %s, but paths are not expanded as a shell would: ~ is not the home directory here, and the home directory is outside the workspace. Give a path relative to the workspace root (%s).", p, first, ws.abs)
	}
	return userErrorf("%s starts with %s, but paths are not expanded as a shell would: variables and aliases are not replaced. Give the path relative to the workspace root (%s), as it is on disk.", p, first, ws.abs)
}

// checkNewName refuses to create a file whose path no one would type on
// purpose: one with a control character (a line break or a tab copied into
// the path) or with spaces around it. Existing files keep whatever names they
// have.
func checkNewName(p string) error {
	if i := strings.IndexFunc(p, func(r rune) bool { return r < 0x20 || r == 0x7f }); i >= 0 {
		return userErrorf("The path %q contains a control character (%q), so the file would get a name no one can type. Give the path without it.", p, p[i])
	}
	if strings.TrimSpace(p) != p {
		return userErrorf("The path %q starts or ends with whitespace, so the file would get a name that looks like another. Give the path without it.", p)
	}
	return nil
}

// realpath resolves the symbolic links of rel, a clean relative path, one
// component at a time through the root, never leaving the workspace. It reports
// whether the whole path exists.
func (ws *workspace) realpath(rel string) (canon string, exists bool, err error) {
	pending := splitPath(rel)
	var done []string
	links := 0
	lastLink := ""
	missing := false // a component did not exist: take the rest literally
	for len(pending) > 0 {
		c := pending[0]
		pending = pending[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(done) == 0 {
				return "", false, escapeError(rel, lastLink)
			}
			done = done[:len(done)-1]
			continue
		}
		cur := path.Join(append(done, c)...)
		if missing {
			done = append(done, c)
			continue
		}
		fi, err := ws.root.Lstat(cur)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			missing = true
			done = append(done, c)
			continue
		case errors.Is(err, syscall.ENOTDIR):
			return "", false, userErrorf("%s cannot exist: %s is a file, not a directory.", rel, path.Join(done...))
		case err != nil:
			return "", false, pathError(rel, err)
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			done = append(done, c)
			continue
		}
		links++
		if links > maxSymlinks {
			return "", false, userErrorf("%s goes through too many symbolic links (a loop?). Use the path of the real file.", rel)
		}
		dest, err := ws.root.Readlink(cur)
		if errors.Is(err, syscall.EINVAL) {
			// No longer a symbolic link: it changed under us; look again.
			pending = append([]string{c}, pending...)
			continue
		}
		if err != nil {
			return "", false, pathError(rel, err)
		}
		lastLink = cur
		if filepath.IsAbs(dest) {
			r, ok := ws.relative(dest)
			if !ok {
				return "", false, userErrorf("%s is a symbolic link to %s, outside the workspace. Only files inside the workspace can be used.", cur, dest)
			}
			done = nil
			dest = filepath.ToSlash(r)
		}
		pending = append(splitPath(filepath.ToSlash(dest)), pending...)
	}
	if len(done) == 0 {
		return ".", true, nil
	}
	return path.Join(done...), !missing, nil
}

func splitPath(p string) []string {
	if p == "" || p == "." {
		return nil
	}
	return strings.Split(p, "/")
}

func escapeError(rel, link string) error {
	if link != "" {
		return userErrorf("%s leads outside the workspace through the symbolic link %s. Only files inside the workspace can be used.", rel, link)
	}
	return userErrorf("%s points outside the workspace. Only files inside the workspace can be used.", rel)
}

// pathError turns a filesystem error about display into a message for the model.
func pathError(display string, err error) error {
	var ue *userError
	if errors.As(err, &ue) {
		return err
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return userErrorf("%s does not exist.", display)
	case errors.Is(err, fs.ErrPermission):
		return userErrorf("Permission denied for %s: the sandbox user cannot access it. Choose another file or ask the user.", display)
	case errors.Is(err, syscall.ENOTDIR):
		return userErrorf("%s cannot exist: one of its parent directories is a file.", display)
	case errors.Is(err, syscall.ELOOP):
		return userErrorf("%s goes through too many symbolic links (a loop?). Use the path of the real file.", display)
	case isEscape(err):
		return userErrorf("%s resolves outside the workspace (a path component changed into a symbolic link while it was used). Only files inside the workspace can be used.", display)
	case errors.Is(err, syscall.ENAMETOOLONG):
		return userErrorf("The path %s is too long.", display)
	case errors.Is(err, syscall.ENXIO):
		// Opening a socket, or a device without a driver.
		return userErrorf("%s is a socket or a device, not a regular file; read, edit and write work on regular files.", display)
	}
	return fmt.Errorf("%s: %w", display, err)
}

// isEscape reports whether err is a Root refusing a path that leaves it: the
// only error of a Root operation that is not an errno (fsys.ErrEscape, or
// os.Root's own, which os keeps unexported).
func isEscape(err error) bool {
	var pe *fs.PathError
	var errno syscall.Errno
	return errors.As(err, &pe) && pe.Err != nil && !errors.As(pe.Err, &errno)
}

// protection holds Options.Protected in the form used for matching.
type protection struct {
	entries []string // clean, slash-separated, lower-case, no trailing "/"
	// files are the entries that name one file to compare with by identity:
	// those without a pattern, and the instance at the root of "**/" ones
	// ("**/.git" as .git). Patterns have none (the lexical check covers
	// them).
	files []string
	// shown is each entry as the user configured it, for messages.
	shown map[string]string
}

// statsOf returns Stat for root, answering the names of files and their
// directories: on the host's filesystem Stat itself; on another one, whose
// every call is a round trip, all of them asked at once, answered from
// what came back.
func statsOf(root fsys.Root, files []string) func(string) (fs.FileInfo, error) {
	if _, local := root.(*fsys.Local); local || len(files) < 2 {
		return root.Stat
	}
	type answer struct {
		fi  fs.FileInfo
		err error
	}
	names := map[string]*answer{}
	for _, f := range files {
		names[f], names[path.Dir(f)] = &answer{}, &answer{}
	}
	var wg sync.WaitGroup
	for n, a := range names {
		wg.Go(func() { a.fi, a.err = root.Stat(n) })
	}
	wg.Wait()
	return func(name string) (fs.FileInfo, error) {
		if a, ok := names[name]; ok {
			return a.fi, a.err
		}
		return root.Stat(name)
	}
}

func newProtection(list []string) protection {
	p := protection{shown: map[string]string{}}
	for _, e := range list {
		c := strings.Trim(filepath.ToSlash(filepath.Clean(e)), "/")
		if c == "" || c == "." {
			continue
		}
		lc := strings.ToLower(c)
		p.entries = append(p.entries, lc)
		if f := strings.TrimPrefix(lc, "**/"); !isPattern(f) {
			p.files = append(p.files, f)
		}
		if _, ok := p.shown[lc]; !ok {
			p.shown[lc] = e
		}
	}
	return p
}

// lexical reports the entry that protects canon, a resolved workspace path: the
// entry names it or a directory above it. An entry's components may be
// patterns: "*" and the like within one component (path.Match), "**" for any
// number of directories, so "*/**/.git" protects every repository below the
// root. Case is ignored whatever the filesystem, so .GIT/config is refused
// everywhere.
func (p protection) lexical(canon string) (string, bool) {
	for _, e := range p.entries {
		if agentconf.Match(e, canon) {
			return e, true
		}
	}
	return "", false
}

// isPattern reports whether an entry holds pattern characters.
func isPattern(e string) bool { return strings.ContainsAny(e, `*?[\`) }

// identity catches what the lexical check cannot see: the opened parent
// directory being a protected directory, or inside one (a directory swapped
// for a symbolic link after resolution), or the file being a hard link to a
// protected file. dirInfo is the parent as opened and dirPath its real path,
// relative to the workspace ("" when unknown); name is the last component,
// file the existing file (nil for a new one).
func (p protection) identity(root fsys.Root, dirInfo fs.FileInfo, dirPath, name string, file fs.FileInfo) (string, bool) {
	if dirPath != "" {
		if e, ok := p.lexical(path.Join(dirPath, name)); ok {
			return e, true
		}
	}
	stat := statsOf(root, p.files)
	for _, e := range p.files {
		fi, err := stat(e)
		switch {
		case err == nil && fi.IsDir():
			if fsys.SameFile(fi, dirInfo) {
				return e, true
			}
			continue
		case err == nil && file != nil && fsys.SameFile(fi, file):
			return e, true
		}
		// e is a file, or does not exist yet: is the target e by another name?
		if pd, err := stat(path.Dir(e)); err == nil && fsys.SameFile(pd, dirInfo) && strings.EqualFold(name, path.Base(e)) {
			return e, true
		}
	}
	return "", false
}

// error is the refusal of display, protected by entry (as matched: lexical's
// or identity's answer). It names the entry and, for an agent's or
// editor's configuration or a repository, why it is protected.
func (p protection) error(display, verb, entry string) error {
	shown, ok := p.shown[entry]
	if !ok {
		shown = entry
	}
	why := "the user's own tools run or trust what it holds"
	rest := strings.TrimPrefix(entry, "**/")
	if rest == ".git" || strings.HasPrefix(rest, ".git/") {
		why = "git on the host runs a repository's hooks, and its config names programs; use git through bash to change a repository"
	} else if e, _, ok := agentconf.Lookup(rest); ok && strings.EqualFold(e.Path, rest) {
		why = e.Who + " reads it without review: " + e.Why
	}
	return userErrorf("Cannot %s %s: it is a protected path (%s), because %s. Ask the user to make this change.", verb, display, shown, why)
}
