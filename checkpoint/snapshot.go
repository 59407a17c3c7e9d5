package checkpoint

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Recorder takes the checkpoints of one session. While it is open, Restore on
// the workspace refuses to run.
type Recorder struct {
	s       *Store
	session string
	unlock  func()
}

// Begin opens the checkpoints of session. Close it when the session ends.
func (s *Store) Begin(ctx context.Context, session string) (*Recorder, error) {
	unlock, err := flock(ctx, filepath.Join(s.dir, "session.lock"), false, true)
	if err != nil {
		return nil, err
	}
	return &Recorder{s: s, session: session, unlock: unlock}, nil
}

// Close ends the session's use of the workspace. Its checkpoints stay until
// garbage-collected.
func (r *Recorder) Close() error {
	if r.unlock != nil {
		r.unlock()
		r.unlock = nil
	}
	return nil
}

// Store is the store the recorder writes to.
func (r *Recorder) Store() *Store { return r.s }

// Checkpoint records the workspace as it is now, before call.
func (r *Recorder) Checkpoint(ctx context.Context, call Call) (Checkpoint, error) {
	call.Session = r.session
	return r.s.record(ctx, call)
}

// record takes a checkpoint and adds it to the log.
func (s *Store) record(ctx context.Context, call Call) (Checkpoint, error) {
	unlock, err := s.lock(ctx)
	if err != nil {
		return Checkpoint{}, err
	}
	defer unlock()
	if err := s.checkIdentity(); err != nil {
		return Checkpoint{}, err
	}
	prev := s.readLast()
	var notices []string
	if s.notice != "" {
		notices = append(notices, s.notice)
	}
	snap, err := s.snapshot(ctx)
	if err != nil {
		return Checkpoint{}, err
	}
	if snap.notice != "" {
		notices = append(notices, snap.notice)
	}
	s.notice = ""
	c := Checkpoint{
		ID: prev.ID + 1, Session: call.Session, Call: call.Call, Tool: call.Tool,
		Command: call.Command, Path: call.Path, Time: time.Now().UTC(),
		Tree: snap.tree, Skipped: snap.skipped, Notice: strings.Join(notices, "; "),
	}
	if all, err := s.List(ctx); err == nil && len(all) > 0 {
		c.ID = max(c.ID, all[len(all)-1].ID+1) // the log wins over a lost last.json
	}
	if prev.Tree == snap.tree && prev.Commit != "" && s.hasObject(ctx, prev.Commit) {
		c.Commit, c.Unchanged = prev.Commit, true
	} else {
		msg := fmt.Sprintf("corral checkpoint %d\n\nsession: %s\ncall: %s\ntool: %s\n", c.ID, call.Session, call.Call, call.Tool)
		out, err := s.git.run(ctx, s.git.worktreeEnv(), strings.NewReader(msg), "commit-tree", "--no-gpg-sign", snap.tree)
		if err != nil {
			return Checkpoint{}, err
		}
		c.Commit = strings.TrimSpace(string(out))
		if prev.Tree != "" {
			if err := s.changes(ctx, &c, prev.Tree, snap.tree); err != nil {
				if ctx.Err() != nil {
					return Checkpoint{}, err
				}
				// The previous checkpoint cannot be read (an older corral's,
				// whose objects were in the repository): this one is whole,
				// only its list of changes is missing.
				s.log.Warn("checkpoint: no list of changes", "workspace", s.ws, "err", err)
			}
		}
	}
	c.Ref = refName(call.Session, c.ID)
	if _, err := s.git.run(ctx, s.git.repoEnv(), nil, "update-ref", "--no-deref", c.Ref, c.Commit); err != nil {
		return Checkpoint{}, err
	}
	if err := s.appendLog(c); err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint: writing the log: %w", err)
	}
	if err := s.writeLast(last{ID: c.ID, Commit: c.Commit, Tree: c.Tree}); err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint: %w", err)
	}
	return c, nil
}

// hasObject says whether corral's own repository has object oid.
func (s *Store) hasObject(ctx context.Context, oid string) bool {
	_, err := s.git.run(ctx, s.git.worktreeEnv(), nil, "cat-file", "-e", oid)
	return err == nil
}

// snap is the tree of the workspace at one moment.
type snap struct {
	tree    string
	skipped []Skip
	notice  string // what was repaired on the way
}

// snapshot writes the working tree's objects and returns its tree (see
// snapshotWith). When corral's index, or what it was seeded from, names what
// cannot be had (an object deleted or corrupted in the repository, an index
// git cannot read), the tree is recorded anew from the files alone, and the
// snap says so. The caller holds the lock.
func (s *Store) snapshot(ctx context.Context) (snap, error) {
	sn, err := s.snapshotWith(ctx, true)
	var gerr *GitError
	if err == nil || ctx.Err() != nil || !errors.As(err, &gerr) {
		return sn, err
	}
	n := fmt.Sprintf("corral could not use its record of the workspace's files (%v) and recorded them anew", err)
	s.log.Warn("checkpoint: "+n, "workspace", s.ws)
	if rerr := os.Remove(s.git.index); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
		return snap{}, fmt.Errorf("checkpoint: %w", rerr)
	}
	sn, err = s.snapshotWith(ctx, false)
	sn.notice = n
	return sn, err
}

// snapshotWith writes the working tree's objects to corral's repository and
// returns its tree, updating corral's index (made from the repository's when
// it has none and seed is set, else from the files alone). git says which
// paths changed; corral reads them itself (treeReader). The caller holds the
// lock.
func (s *Store) snapshotWith(ctx context.Context, seed bool) (snap, error) {
	if seed {
		if err := s.seedIndex(ctx); err != nil {
			return snap{}, err
		}
	}
	// Files changed since just before this moment get no stat data (see
	// recentWindow).
	recent := time.Now().Add(-recentWindow)
	args := []string{"ls-files", "-z", "-t", "--modified", "--deleted", "--others"}
	if !s.opts.IncludeIgnored {
		args = append(args, "--exclude-standard")
		if s.exclude != "" {
			if f, err := openPlain(s.exclude); err == nil {
				f.Close()
				args = append(args, "--exclude-from="+s.exclude)
			}
		}
	}
	out, err := s.git.run(ctx, s.git.worktreeEnv(), nil, args...)
	if err != nil {
		return snap{}, err
	}
	tr, err := newTreeReader(s.ws, s.maxBytes)
	if err != nil {
		return snap{}, err
	}
	defer tr.close()
	var sn snap
	var add, remove bytes.Buffer
	added := 0
	stats := map[string]statEntry{}
	seen := map[string]bool{}
	for _, rec := range bytes.Split(out, []byte{0}) {
		if len(rec) < 3 {
			continue
		}
		if err := ctx.Err(); err != nil {
			return snap{}, err
		}
		tag, p := rec[0], string(rec[2:])
		if seen[p] {
			continue
		}
		seen[p] = true
		tracked := tag != '?'
		if strings.HasSuffix(p, "/") {
			sn.skipped = append(sn.skipped, Skip{Path: strings.TrimSuffix(p, "/"), Reason: "repository"})
			continue
		}
		e, err := tr.read(p)
		if err != nil {
			return snap{}, err
		}
		mode := "100644"
		switch e.kind {
		case kindGone, kindOther:
			// Gone, or a named pipe, a socket, a device: git records none.
			if tracked {
				remove.WriteString(p)
				remove.WriteByte(0)
			}
			continue
		case kindDir:
			// A tracked submodule or a directory where a file was: a
			// repository is not recorded, its directory is kept.
			if _, err := tr.root.Lstat(p + "/.git"); err == nil {
				sn.skipped = append(sn.skipped, Skip{Path: p, Reason: "repository"})
				continue
			}
			// A file that became a directory: its entry goes, the files in
			// it are listed as others.
			if tracked {
				remove.WriteString(p)
				remove.WriteByte(0)
			}
			continue
		case kindTooLarge, kindUnreadable:
			reason := "too large"
			if e.kind == kindUnreadable {
				reason = "unreadable"
			}
			sn.skipped = append(sn.skipped, Skip{Path: p, Size: e.size, Reason: reason})
			if tracked {
				remove.WriteString(p)
				remove.WriteByte(0)
			}
			continue
		case kindLink:
			mode = "120000"
		case kindFile:
			if e.exec {
				mode = "100755"
			}
		}
		oid, err := s.writeBlob(e.data)
		if err != nil {
			return snap{}, err
		}
		fmt.Fprintf(&add, "%s %s\t%s\x00", mode, oid, p)
		added++
		if e.stat.ok && !e.stat.since(recent) {
			raw, _ := hex.DecodeString(oid)
			stats[p] = statEntry{oid: raw, stat: e.stat}
		}
	}
	if remove.Len() > 0 {
		if _, err := s.git.run(ctx, s.git.worktreeEnv(), &remove, "update-index", "-z", "--force-remove", "--stdin"); err != nil {
			return snap{}, err
		}
	}
	if add.Len() > 0 {
		if _, err := s.git.run(ctx, s.git.worktreeEnv(), &add, "update-index", "-z", "--add", "--replace", "--index-info"); err != nil {
			return snap{}, err
		}
	}
	out, err = s.git.run(ctx, s.git.worktreeEnv(), nil, "write-tree")
	if err != nil {
		return snap{}, err
	}
	if added > 0 {
		// git gives the entries of --index-info no stat data (all zeros),
		// and every ls-files after would read and hash those files again,
		// as root too, until a refresh: corral gives them the stat data of
		// the descriptors it read them through.
		n := 0
		if len(stats) > 0 {
			n, err = setIndexStat(s.git.index, s.sumLen(), stats)
			if err != nil && !errors.Is(err, errIndexFormat) {
				return snap{}, fmt.Errorf("checkpoint: writing the index: %w", err)
			}
		}
		if err := s.countUnrefreshed(ctx, added-n); err != nil {
			return snap{}, err
		}
	}
	sn.tree = strings.TrimSpace(string(out))
	return sn, nil
}

// maxUnrefreshed is how many entries corral's index may hold without stat
// data before they are refreshed.
const maxUnrefreshed = 1000

// countUnrefreshed counts n more entries without stat data (what corral
// read itself and gave git by name, without the stat data of setIndexStat:
// links, files that changed as they were read, an index it does not write): each makes the next ls-files compare
// that file's bytes with its entry. Past maxUnrefreshed, one refresh gives
// them the stat data of the files that still match, in one scan of the
// tree. The caller holds the lock.
func (s *Store) countUnrefreshed(ctx context.Context, n int) error {
	name := filepath.Join(s.dir, "unrefreshed")
	b, _ := os.ReadFile(name)
	count, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	count += n
	if count > maxUnrefreshed {
		_, err := s.git.run(ctx, s.git.worktreeEnv(), nil, "update-index", "-q", "--ignore-submodules", "--refresh")
		if exitCode(err) != 1 && err != nil {
			return err
		}
		count = 0
	}
	return os.WriteFile(name, []byte(strconv.Itoa(count)+"\n"), 0o600) // a count: a lost one costs a refresh, or one scan of a few files more
}

// seedIndex makes corral's index when it has none: a copy of the repository's
// own index, whose stat data spares hashing the files that did not change, or
// an empty one. Conflicted entries are dropped (the files are then recorded as
// they are). The blobs the index names are brought into corral's repository
// from the workspace's.
func (s *Store) seedIndex(ctx context.Context) error {
	if _, err := os.Stat(s.git.index); err == nil {
		return nil
	}
	if !s.inGit {
		return nil // git makes an empty index
	}
	gitDir, _, err := findRepo(s.ws)
	if err != nil || gitDir == "" {
		return nil
	}
	src, err := openPlain(filepath.Join(gitDir, "index"))
	if err != nil {
		return nil // a repository without an index
	}
	defer src.Close()
	tmp := s.git.index + ".seed"
	dst, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	_, err = io.Copy(dst, src)
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, s.git.index)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("checkpoint: copying the index: %w", err)
	}
	// Its stat data says a file matches its entry, but the entry may hold
	// what a filter or a line-ending conversion made of the file, or what
	// anyone who could write the index put there. Every entry is made racy
	// (an index older than all its files) so that the refresh below compares
	// each file's bytes with its entry, once; from then on the stat data is
	// corral's own.
	epoch := time.Unix(1, 0) // git takes a zero time for none
	if err := os.Chtimes(s.git.index, epoch, epoch); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	out, err := s.git.run(ctx, s.git.worktreeEnv(), nil, "ls-files", "-z", "--stage")
	if err != nil {
		// An index this git cannot read (a split index, a newer version):
		// start from an empty one.
		s.log.Info("checkpoint: not reusing the repository's index", "err", err)
		os.Remove(s.git.index)
		return nil
	}
	var unmerged bytes.Buffer
	var oids bytes.Buffer
	seen := map[string]bool{}
	for _, rec := range bytes.Split(out, []byte{0}) {
		meta, p, ok := bytes.Cut(rec, []byte{'\t'})
		f := strings.Fields(string(meta))
		if !ok || len(f) != 3 {
			continue
		}
		if f[2] != "0" {
			unmerged.Write(p)
			unmerged.WriteByte(0)
			continue
		}
		if f[0] != "160000" && !seen[f[1]] {
			seen[f[1]] = true
			oids.WriteString(f[1])
			oids.WriteByte('\n')
		}
	}
	if unmerged.Len() > 0 {
		if _, err := s.git.run(ctx, s.git.worktreeEnv(), &unmerged, "update-index", "-z", "--force-remove", "--stdin"); err != nil {
			return err
		}
	}
	if oids.Len() > 0 {
		if err := s.importObjects(ctx, &oids); err != nil {
			// The repository lacks them, or they are corrupt: the files are
			// recorded from the working tree.
			s.log.Info("checkpoint: not reusing the repository's index", "err", err)
			os.Remove(s.git.index)
			return nil
		}
	}
	// Changed files make refresh exit 1: ls-files lists them next.
	_, err = s.git.run(ctx, s.git.worktreeEnv(), nil, "update-index", "-q", "--ignore-submodules", "--refresh")
	if exitCode(err) == 1 {
		err = nil
	}
	if err == nil {
		err = writeFileAtomic(filepath.Join(s.dir, "unrefreshed"), []byte("0\n"), 0o600)
	}
	return err
}

// importObjects brings the objects listed in oids (one a line) from the
// workspace's repository into corral's: git pack-objects reads them there,
// and index-pack, in corral's repository, names each by its content, so
// that a corrupt one arrives under another name (and the one asked for is
// then missing: write-tree says so, and the tree is recorded anew). Objects
// the repository lacks are left out.
func (s *Store) importObjects(ctx context.Context, oids io.Reader) error {
	if !s.git.sourceReadable() {
		return errors.New("the repository's object directory has a special file where git reads")
	}
	env := append(s.git.worktreeEnv(), "GIT_ALTERNATE_OBJECT_DIRECTORIES="+s.git.source)
	pack := s.git.command(ctx, env, "pack-objects", "--stdout", "-q", "--window=0", "--missing=allow-any")
	pack.Stdin = oids
	var perr, ierr limitedBuffer
	perr.b, ierr.b = new(bytes.Buffer), new(bytes.Buffer)
	perr.n, ierr.n = 4096, 4096
	pack.Stderr = &perr
	r, err := pack.StdoutPipe()
	if err != nil {
		return err
	}
	index := s.git.command(ctx, s.git.worktreeEnv(), "index-pack", "--stdin")
	index.Stdin = r
	index.Stderr = &ierr
	if err := pack.Start(); err != nil {
		return err
	}
	if err := index.Run(); err != nil {
		pack.Process.Kill()
		pack.Wait()
		return &GitError{Args: []string{"index-pack"}, Err: err, Stderr: ierr.b.String()}
	}
	if err := pack.Wait(); err != nil {
		return &GitError{Args: []string{"pack-objects"}, Err: err, Stderr: perr.b.String()}
	}
	return nil
}

// exitCode is the exit status of the git that failed with err, -1 for another
// error, 0 for none.
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

// changes fills c's Changed, Files, Added and Removed with the difference
// between two trees.
// Only corral's own objects are read: nothing the sandbox wrote can make a
// checkpoint wait.
func (s *Store) changes(ctx context.Context, c *Checkpoint, from, to string) error {
	ch, err := s.diffTreesIn(ctx, s.git.worktreeEnv(), from, to)
	if err != nil {
		return err
	}
	c.Files = len(ch)
	for _, x := range ch {
		if x.Added > 0 {
			c.Added += x.Added
		}
		if x.Removed > 0 {
			c.Removed += x.Removed
		}
	}
	if len(ch) > maxChanged {
		ch = ch[:maxChanged]
	}
	c.Changed = ch
	return nil
}

// diffTrees lists the files that differ between two trees, with their lines
// added and removed.
func (s *Store) diffTrees(ctx context.Context, from, to string, paths ...string) ([]Change, error) {
	return s.diffTreesIn(ctx, s.git.readEnv(), from, to, paths...)
}

// diffTreesIn is diffTrees with git's environment env.
func (s *Store) diffTreesIn(ctx context.Context, env []string, from, to string, paths ...string) ([]Change, error) {
	args := []string{"diff-tree", "-r", "-z", "--no-renames", "--no-ext-diff", "--no-textconv", "--raw", "--numstat", from, to}
	if len(paths) > 0 {
		args = append(append(args, "--"), paths...)
	}
	out, err := s.git.run(ctx, env, nil, args...)
	if err != nil {
		return nil, err
	}
	var ch []Change
	index := map[string]int{}
	f := bytes.Split(out, []byte{0})
	for i := 0; i < len(f); i++ {
		rec := f[i]
		if len(rec) == 0 {
			continue
		}
		if rec[0] == ':' {
			fields := strings.Fields(string(rec))
			if len(fields) < 5 || i+1 >= len(f) {
				continue
			}
			i++
			p := string(f[i])
			index[p] = len(ch)
			ch = append(ch, Change{Path: p, Status: fields[4][:1]})
			continue
		}
		// numstat: added TAB removed TAB path
		parts := strings.SplitN(string(rec), "\t", 3)
		if len(parts) != 3 {
			continue
		}
		j, ok := index[parts[2]]
		if !ok {
			continue
		}
		a, errA := strconv.Atoi(parts[0])
		r, errR := strconv.Atoi(parts[1])
		if errA != nil || errR != nil {
			a, r = -1, -1 // binary
		}
		ch[j].Added, ch[j].Removed = a, r
	}
	return ch, nil
}

// ErrBusy is returned by Restore while a session works on the workspace.
var ErrBusy = errors.New("a session is running on the workspace")
