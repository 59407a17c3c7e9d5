package checkpoint

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"sort"
	"strings"
)

// Action is one change a restore makes to the working tree.
type Action struct {
	Path string `json:"path"`
	// Op is "write" (a file created or rewritten), "link" (a symbolic
	// link), "remove" (a file created after the checkpoint), "rmdir" (a
	// directory emptied by the restore and absent from the checkpoint) or
	// "keep" (a file the checkpoint did not record: left as it is).
	Op     string `json:"op"`
	Reason string `json:"reason,omitempty"` // why a file is kept
	mode   string
	oid    string
}

// Plan is what restoring a checkpoint would do.
type Plan struct {
	Checkpoint Checkpoint `json:"checkpoint"`
	Actions    []Action   `json:"actions"`
}

// RestoreOptions configure Restore and PlanRestore.
type RestoreOptions struct {
	// Paths limits the restore to these workspace paths and what is below
	// them; all of the tree when empty.
	Paths []string
}

// RestoreResult is what Restore did.
type RestoreResult struct {
	Plan
	// Before is the checkpoint taken just before the restore: restoring it
	// undoes the restore.
	Before Checkpoint `json:"before"`
}

// PlanRestore says what Restore would change, without changing anything in
// the working tree.
func (s *Store) PlanRestore(ctx context.Context, id int, opts RestoreOptions) (Plan, error) {
	c, err := s.Get(ctx, id)
	if err != nil {
		return Plan{}, err
	}
	unlock, err := s.lock(ctx)
	if err != nil {
		return Plan{}, err
	}
	defer unlock()
	cur, err := s.snapshot(ctx)
	if err != nil {
		return Plan{}, err
	}
	return s.plan(ctx, c, cur.tree, opts)
}

// Restore makes the working tree (or opts.Paths of it) exactly the tree of
// checkpoint id: files changed since are rewritten with their content, mode
// or link target of then; files deleted since come back; files created since
// are removed. Ignored files, and files the checkpoint did not record (too
// large, repositories), are left alone. It first takes a checkpoint of the
// tree as it is, so that a restore can be undone. It refuses to run while a
// session records checkpoints on the workspace (ErrBusy).
func (s *Store) Restore(ctx context.Context, id int, opts RestoreOptions) (RestoreResult, error) {
	c, err := s.Get(ctx, id)
	if err != nil {
		return RestoreResult{}, err
	}
	unlockSession, err := flock(ctx, s.dir+"/session.lock", true, false)
	if errors.Is(err, errLocked) {
		return RestoreResult{}, ErrBusy
	}
	if err != nil {
		return RestoreResult{}, err
	}
	defer unlockSession()
	before, err := s.record(ctx, Call{Session: "restore", Tool: "restore", Command: fmt.Sprintf("corral restore %d", id)})
	if err != nil {
		return RestoreResult{}, err
	}
	res := RestoreResult{Before: before}
	unlock, err := s.lock(ctx)
	if err != nil {
		return res, err
	}
	defer unlock()
	if res.Plan, err = s.plan(ctx, c, before.Tree, opts); err != nil {
		return res, err
	}
	return res, s.apply(ctx, res.Plan)
}

// plan compares checkpoint c with the current tree cur.
func (s *Store) plan(ctx context.Context, c Checkpoint, cur string, opts RestoreOptions) (Plan, error) {
	o, err := s.openObjects(ctx)
	if err != nil {
		return Plan{}, err
	}
	defer o.close()
	tree, err := o.commitTree(c.Commit)
	if err != nil {
		return Plan{}, err
	}
	if tree != c.Tree {
		return Plan{}, fmt.Errorf("%w: commit %s has tree %s, not %s", ErrDamaged, c.Commit, tree, c.Tree)
	}
	actions, err := s.planTrees(ctx, o, tree, c.Skipped, cur, opts)
	if err != nil {
		return Plan{}, err
	}
	return Plan{Checkpoint: c, Actions: actions}, nil
}

// planTrees lists what turns the tree have into the tree want, whose
// snapshot left out skipped: removals first, deepest directories last; then
// what is written, parents first.
func (s *Store) planTrees(ctx context.Context, o *objects, tree string, skipped []Skip, cur string, opts RestoreOptions) ([]Action, error) {
	p := &planner{o: o, paths: cleanPaths(opts.Paths), skipped: map[string]Skip{}}
	for _, sk := range skipped {
		p.skipped[sk.Path] = sk
	}
	if err := p.walk("", tree, cur); err != nil {
		return nil, err
	}
	if !s.opts.IncludeIgnored {
		if err := s.keepIgnored(ctx, o, tree, p.actions); err != nil {
			return nil, err
		}
	}
	// Removals first, deepest directories last; then what is written, parents first.
	var rm, dirs, wr []Action
	for _, a := range p.actions {
		switch a.Op {
		case "remove":
			rm = append(rm, a)
		case "rmdir":
			dirs = append(dirs, a)
		default:
			wr = append(wr, a)
		}
	}
	sort.Slice(dirs, func(i, j int) bool { return dirs[i].Path > dirs[j].Path })
	sort.SliceStable(wr, func(i, j int) bool { return wr[i].Path < wr[j].Path })
	return slices.Concat(rm, dirs, wr), nil
}

func cleanPaths(ps []string) []string {
	var out []string
	for _, p := range ps {
		p = path.Clean(strings.TrimPrefix(p, "./"))
		if p == "." || p == "" {
			return nil
		}
		out = append(out, strings.TrimSuffix(p, "/"))
	}
	return out
}

type planner struct {
	o       *objects
	paths   []string
	skipped map[string]Skip
	actions []Action
}

// selected says whether p is one of the paths restored.
func (p *planner) selected(name string) bool {
	if len(p.paths) == 0 {
		return true
	}
	for _, x := range p.paths {
		if name == x || strings.HasPrefix(name, x+"/") {
			return true
		}
	}
	return false
}

// mayHold says whether directory dir may hold a path restored.
func (p *planner) mayHold(dir string) bool {
	if dir == "" || len(p.paths) == 0 {
		return true
	}
	for _, x := range p.paths {
		if dir == x || strings.HasPrefix(dir, x+"/") || strings.HasPrefix(x, dir+"/") {
			return true
		}
	}
	return false
}

func join(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

// walk compares the tree want (the checkpoint's) with have (the current one)
// under dir; either may be "" (absent).
func (p *planner) walk(dir, want, have string) error {
	if want == have || !p.mayHold(dir) {
		return nil
	}
	var we, he []treeEntry
	var err error
	if want != "" {
		if we, err = p.o.tree(want); err != nil {
			return err
		}
	}
	if have != "" {
		if he, err = p.o.tree(have); err != nil {
			return err
		}
	}
	hm := map[string]treeEntry{}
	for _, e := range he {
		hm[e.name] = e
	}
	wm := map[string]treeEntry{}
	for _, e := range we {
		wm[e.name] = e
	}
	for _, h := range he {
		w, ok := wm[h.name]
		name := join(dir, h.name)
		if h.isTree() {
			if ok && w.isTree() {
				continue // compared below
			}
			if err := p.walk(name, "", h.oid); err != nil {
				return err
			}
			if p.selected(name) {
				p.actions = append(p.actions, Action{Path: name, Op: "rmdir"})
			}
			continue
		}
		if ok && !w.isTree() || !p.selected(name) {
			continue // rewritten below when it differs
		}
		// Not in the checkpoint, or a directory there.
		if sk, isSkipped := p.skipped[name]; isSkipped && !ok {
			p.actions = append(p.actions, Action{Path: name, Op: "keep", Reason: "not recorded in the checkpoint (" + sk.Reason + ")"})
			continue
		}
		if h.mode == "160000" {
			p.actions = append(p.actions, Action{Path: name, Op: "keep", Reason: "a repository"})
			continue
		}
		p.actions = append(p.actions, Action{Path: name, Op: "remove"})
	}
	for _, w := range we {
		h, ok := hm[w.name]
		name := join(dir, w.name)
		if w.isTree() {
			sub := ""
			if ok && h.isTree() {
				sub = h.oid
			}
			if err := p.walk(name, w.oid, sub); err != nil {
				return err
			}
			continue
		}
		if ok && !h.isTree() && h.oid == w.oid && h.mode == w.mode || !p.selected(name) {
			continue
		}
		switch w.mode {
		case "160000":
			p.actions = append(p.actions, Action{Path: name, Op: "keep", Reason: "a repository"})
		case "120000":
			p.actions = append(p.actions, Action{Path: name, Op: "link", mode: w.mode, oid: w.oid})
		default:
			p.actions = append(p.actions, Action{Path: name, Op: "write", mode: w.mode, oid: w.oid})
		}
	}
	return nil
}

// apply carries out a plan in the working tree.
func (s *Store) apply(ctx context.Context, p Plan) error {
	return s.applyIn(ctx, s.ws, p.Actions)
}

// applyIn carries out actions in dir, with the store's objects, through an
// os.Root: a path never leads out of dir, whatever links are in it.
func (s *Store) applyIn(ctx context.Context, dir string, actions []Action) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	o, err := s.openObjects(ctx)
	if err != nil {
		return err
	}
	defer o.close()
	for _, a := range actions {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := applyOne(root, o, a); err != nil {
			return fmt.Errorf("checkpoint: restoring %s: %w", a.Path, err)
		}
	}
	return nil
}

func applyOne(root *os.Root, o *objects, a Action) error {
	switch a.Op {
	case "remove":
		err := root.Remove(a.Path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	case "rmdir":
		err := root.Remove(a.Path)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			// Not empty: it holds ignored files, which stay.
			return nil
		}
		return nil
	case "link":
		target, err := o.read(a.oid, "blob")
		if err != nil {
			return err
		}
		if err := makeParent(root, a.Path); err != nil {
			return err
		}
		uid, gid, own := ownerFor(root, a.Path)
		if err := removeIfNotDir(root, a.Path); err != nil {
			return err
		}
		if err := root.Symlink(string(target), a.Path); err != nil {
			return err
		}
		if own {
			return root.Lchown(a.Path, uid, gid)
		}
		return nil
	case "write":
		data, err := o.read(a.oid, "blob")
		if err != nil {
			return err
		}
		if err := makeParent(root, a.Path); err != nil {
			return err
		}
		perm := fs.FileMode(0o644)
		if fi, err := root.Lstat(a.Path); err == nil && fi.Mode().IsRegular() {
			perm = fi.Mode().Perm()
		}
		if a.mode == "100755" {
			perm |= (perm & 0o444) >> 2
		} else {
			perm &^= 0o111
		}
		uid, gid, own := ownerFor(root, a.Path)
		if err := writeInRoot(root, a.Path, data, perm); err != nil {
			return err
		}
		if own {
			return root.Lchown(a.Path, uid, gid)
		}
		return nil
	}
	return nil
}

// ownerFor says, when corral runs as root, who should own what is written
// at name: its owner now, else the owner of its directory — not root, as the
// new file otherwise would be.
func ownerFor(root *os.Root, name string) (uid, gid int, ok bool) {
	if !asRoot() {
		return 0, 0, false
	}
	fi, err := root.Lstat(name)
	if err != nil {
		if fi, err = root.Lstat(path.Dir(name)); err != nil {
			return 0, 0, false
		}
	}
	return fileOwner(fi)
}

// makeParent makes the directories above name, owned as their parents are.
func makeParent(root *os.Root, name string) error {
	dir := path.Dir(name)
	if dir == "." {
		return nil
	}
	if _, err := root.Lstat(dir); err == nil {
		return nil // MkdirAll says what else it is
	}
	if err := makeParent(root, dir); err != nil {
		return err
	}
	uid, gid, own := ownerFor(root, dir)
	if err := root.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	if own {
		return root.Lchown(dir, uid, gid)
	}
	return nil
}

// removeIfNotDir removes name unless it is a directory (which a rename or a
// link over it then refuses).
func removeIfNotDir(root *os.Root, name string) error {
	fi, err := root.Lstat(name)
	if err != nil || fi.IsDir() {
		return nil
	}
	return root.Remove(name)
}

// writeInRoot replaces name with data, through a temporary file beside it and
// a rename: a crash leaves the old file or the new one.
func writeInRoot(root *os.Root, name string, data []byte, perm fs.FileMode) error {
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	tmp := path.Join(path.Dir(name), "."+path.Base(name)+".corral-restore-"+hex.EncodeToString(rnd[:]))
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(perm)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		if err = removeIfNotDir(root, name); err == nil {
			err = root.Rename(tmp, name)
		}
	}
	if err != nil {
		_ = root.Remove(tmp)
	}
	return err
}

// keepIgnored turns into "keep" the removals of files that the checkpoint's
// own ignore rules ignore: such a file was not recorded because it was
// ignored, not because it did not exist, and a restore leaves ignored files
// alone. The rules are the .gitignore files of the checkpoint's tree and the
// repository's info/exclude, evaluated by git check-ignore in a directory of
// corral's holding only them.
func (s *Store) keepIgnored(ctx context.Context, o *objects, tree string, actions []Action) error {
	var cand bytes.Buffer
	for _, a := range actions {
		if a.Op == "remove" || a.Op == "rmdir" {
			cand.WriteString(a.Path)
			cand.WriteByte(0)
		}
	}
	if cand.Len() == 0 {
		return nil
	}
	rules, err := os.MkdirTemp(s.dir, "ignore-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(rules)
	out, err := s.git.run(ctx, s.git.readEnv(), nil, "ls-tree", "-r", "-z", tree)
	if err != nil {
		return err
	}
	root, err := os.OpenRoot(rules)
	if err != nil {
		return err
	}
	defer root.Close()
	for _, rec := range bytes.Split(out, []byte{0}) {
		meta, name, ok := strings.Cut(string(rec), "\t")
		f := strings.Fields(meta)
		if !ok || len(f) != 3 || f[1] != "blob" || path.Base(name) != ".gitignore" {
			continue
		}
		data, err := o.read(f[2], "blob")
		if err != nil {
			return err
		}
		if err := makeParent(root, name); err != nil {
			return err
		}
		if err := root.WriteFile(name, data, 0o600); err != nil {
			return err
		}
	}
	var env []string
	for _, e := range s.git.baseEnv() {
		if !strings.HasPrefix(e, "GIT_LITERAL_PATHSPECS=") { // check-ignore takes paths, not pathspecs, and refuses it
			env = append(env, e)
		}
	}
	env = append(env, "GIT_DIR="+s.git.shim, "GIT_WORK_TREE="+rules)
	args := []string{}
	if s.exclude != "" {
		args = append(args, "-c", "core.excludesFile="+s.exclude)
	}
	args = append(args, "check-ignore", "--no-index", "-z", "--stdin")
	ignored, err := s.git.run(ctx, env, &cand, args...)
	if exitCode(err) == 1 {
		return nil // none is ignored
	}
	if err != nil {
		return err
	}
	keep := map[string]bool{}
	for _, p := range bytes.Split(ignored, []byte{0}) {
		keep[string(p)] = true
	}
	for i, a := range actions {
		if (a.Op == "remove" || a.Op == "rmdir") && keep[a.Path] {
			actions[i] = Action{Path: a.Path, Op: "keep", Reason: "ignored when the checkpoint was taken"}
		}
	}
	return nil
}
