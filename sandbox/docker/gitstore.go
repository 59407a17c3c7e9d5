package docker

import (
	"bufio"
	"bytes"
	"cmp"
	"compress/zlib"
	"context"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"maps"
	"os"
	"os/exec"
	"path"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/docker/docker/api/types/mount"
	"golang.org/x/sys/unix"
)

// A repository's data — its objects, refs and reflogs — is the command's
// to write only in its shadow. The host's object store is mounted read-only
// in the container (at hostObjects(i)) and named by the shadow's
// objects/info/alternates, so git in the sandbox reads every object the
// host has and writes new ones into the shadow's own store. The shadow
// starts with a copy of the host's refs and reflogs.
//
// After each command (and at close, and in `corral gc`) the host takes, in
// this order:
//
//   - the objects a command made: the shadow's loose objects and packs are
//     read by descriptor (no link followed, nothing but regular files) and
//     streamed as packs into `git index-pack --stdin --strict`, run on the
//     host's repository as its owner, into a quarantine (see quarantine):
//     git names each object by hashing its content, checks its format and
//     that every object it names is there, so a command can neither forge
//     an object under another's name, nor plant a malformed one, nor break
//     the history with an object that names one that is nowhere. Then they
//     are removed from the shadow; git there finds them through the
//     alternate.
//   - the refs a command changed, each name and value checked, applied with
//     one `git update-ref --stdin` transaction whose old values are those of
//     the last sync: when the user changed a ref on the host meanwhile, the
//     host's is kept. A command's reflog of refs/stash (the stash list) is
//     copied back line by line, checked.
//   - then HEAD, ORIG_HEAD and index (git.go).
//
// So a command cannot delete, corrupt or replace the host's objects, refs
// or reflogs, nor make the user's git write through a link it planted in
// them: it never has them. Before each command, refs the user changed on
// the host are written into the shadow (its packed-refs, with any loose
// ref of the same name removed).
//
// A repository that keeps its refs in a reftable (extensions.refStorage) or
// its large files with git-lfs still has refs, logs, reftable and lfs
// bind-mounted and shared, as before: the README says so.

// Bounds on what is taken back after one command.
const (
	maxRefs        = 100_000 // refs read from one side
	maxRefDepth    = 16      // directories under refs/
	maxRefFile     = 4096    // bytes of a loose ref
	maxImportFiles = 100_000 // loose objects imported at once
	maxImportPacks = 16      // packs imported at once (each a git process)
	maxStashLog    = 4 << 20 // bytes of the stash list
	hostObjectsDir = "/.corral/git"
)

// hostObjects is where repository i's object store is mounted, read-only,
// in the container.
func hostObjects(i int) string {
	return path.Join(hostObjectsDir, strconv.Itoa(i))
}

// makeStore makes the shadow's own object store, which borrows the host's
// through the alternate at the container path alt. The alternates file is
// mounted read-only from outside the shadow: a command that removed or
// changed it would lose, even within its own run, every object the host has
// (and those taken from the shadow after each command).
func (s *gitShadow) makeStore(repo, shadow, alt string) error {
	for _, d := range []string{"objects", "objects/info", "objects/pack"} {
		p := shadow + "/" + d
		if err := os.Mkdir(p, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
		s.chown(p)
	}
	if alt == "" {
		return nil
	}
	target := shadow + "/objects/info/alternates"
	if err := os.WriteFile(target, nil, 0o644); err != nil {
		return err
	}
	src := shadow + ".alternates-" + path.Base(alt)
	if err := os.WriteFile(src, []byte(alt+"\n"), 0o644); err != nil {
		return err
	}
	// After the shadow's own mount, in which it is nested.
	s.mounts = append(s.mounts, mount.Mount{Type: mount.TypeBind, Source: src, Target: path.Join(repo, "objects", "info", "alternates"), ReadOnly: true})
	return nil
}

// treeKey tells whether a part of a repository changed since it was read:
// the stat keys of the files and directories git changes when it writes
// there (a ref, a loose object or a pack is made by a rename into its
// directory, which changes the directory's mtime). Unchanged, the part is not
// read again: after most commands nothing in the repository changed, and a
// repository may have thousands of refs.
type treeKey map[string]statKey

// unchanged reports whether every path of k still has its key in d.
func (k treeKey) unchanged(d *repoDir) bool {
	if k == nil {
		return false
	}
	for p, want := range k {
		var st unix.Stat_t
		got := statKey{}
		if unix.Fstatat(d.fd, p, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
			got = keyOfStat(&st)
		}
		if got != want {
			return false
		}
	}
	return true
}

// keyOf is the treeKey of paths in d, and of every directory under each of
// dirs (found by descriptor, bounded), and with files, of every file there
// too (a command may write a ref in place, where git would rename).
func keyOf(d *repoDir, paths []string, files bool, dirs ...string) treeKey {
	k := treeKey{}
	add := func(p string) {
		var st unix.Stat_t
		if unix.Fstatat(d.fd, p, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
			k[p] = keyOfStat(&st)
		} else {
			k[p] = statKey{}
		}
	}
	for _, p := range paths {
		add(p)
	}
	n := 0
	var walk func(dir *repoDir, rel string, depth int)
	walk = func(dir *repoDir, rel string, depth int) {
		add(rel)
		if depth >= maxRefDepth {
			return
		}
		names, err := dir.names(-1)
		if err != nil {
			return
		}
		for _, name := range names {
			var st unix.Stat_t
			if unix.Fstatat(dir.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || rel+"/"+name == "refs/corral" {
				continue
			}
			if n++; n > maxRefs {
				return
			}
			if st.Mode&unix.S_IFMT != unix.S_IFDIR {
				if files {
					k[rel+"/"+name] = keyOfStat(&st)
				}
				continue
			}
			if sub, err := openBeneathFD(dir, name); err == nil {
				walk(sub, rel+"/"+name, depth+1)
				sub.close()
			}
		}
	}
	for _, top := range dirs {
		if sub, err := openBeneathFD(d, top); err == nil {
			walk(sub, top, 1)
			sub.close()
		} else {
			add(top)
		}
	}
	return k
}

// refsKey is the treeKey of a repository's refs and stash list: on the
// host, which git alone writes (by rename), its directories; in a shadow,
// whose refs are packed but for the few commands wrote, every file.
func refsKey(d *repoDir, files bool) treeKey {
	return keyOf(d, []string{"packed-refs", "logs", "logs/refs", "logs/refs/stash"}, files, "refs")
}

// objectsKey is the treeKey of a shadow's own object store.
func objectsKey(sd *repoDir) treeKey {
	return keyOf(sd, nil, false, "objects")
}

// deletedRefs is where the host keeps the last value of each ref a command
// deleted. Refs under refs/corral/ are neither shown to commands nor taken
// from them.
const deletedRefs = "refs/corral/deleted/"

// corralRef reports whether name is corral's: refs/corral, or under it.
// A ref named refs/corral itself on the host would leave no room for the
// copies of deleted refs, and so fail every later deletion.
func corralRef(name string) bool {
	return name == "refs/corral" || strings.HasPrefix(name, "refs/corral/")
}

// refValue is a ref's value: an object id in hex, or "ref: NAME".
type refMap map[string]string

// readRefs reads the refs of the repository (or shadow) d: packed-refs,
// then the loose refs under refs/, which win. Every file is opened by
// descriptor, no link followed; what is not a well-formed ref is skipped
// (bad reports how many).
func readRefs(d *repoDir, hashLen int) (refs refMap, bad int, err error) {
	refs = refMap{}
	if b, err := d.read("packed-refs", maxSyncFile); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if line == "" || line[0] == '#' || line[0] == '^' {
				continue
			}
			id, name, ok := strings.Cut(line, " ")
			if !ok || !isHexID(id, hashLen) || checkRefName(name) != nil {
				bad++
				continue
			}
			if !corralRef(name) {
				refs[name] = id
			}
		}
	} else if !errors.Is(err, unix.ENOENT) {
		return nil, 0, fmt.Errorf("packed-refs: %w", err)
	}
	rd, err := openBeneathFD(d, "refs")
	if err != nil {
		return refs, bad, nil
	}
	defer rd.close()
	n := 0
	var walk func(dir *repoDir, prefix string, depth int)
	walk = func(dir *repoDir, prefix string, depth int) {
		names, err := dir.names(maxRefs)
		if err != nil {
			return
		}
		slices.Sort(names)
		for _, name := range names {
			if n++; n > maxRefs {
				return
			}
			var st unix.Stat_t
			if unix.Fstatat(dir.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
				continue
			}
			full := prefix + name
			switch st.Mode & unix.S_IFMT {
			case unix.S_IFDIR:
				if depth >= maxRefDepth {
					bad++
					continue
				}
				if full == "refs/corral" {
					continue
				}
				if sub, err := openBeneathFD(dir, name); err == nil {
					walk(sub, full+"/", depth+1)
					sub.close()
				}
			case unix.S_IFREG:
				if strings.HasSuffix(name, ".lock") || corralRef(full) {
					continue // git's own, mid-update; corral's
				}
				b, err := dir.read(name, maxRefFile)
				v, ok := strings.CutSuffix(string(b), "\n")
				switch {
				case err != nil || !ok || checkRefName(full) != nil:
					bad++
				case isHexID(v, hashLen):
					refs[full] = v
				case strings.HasPrefix(v, "ref: ") && checkRefName(v[5:]) == nil:
					refs[full] = v
				default:
					bad++
				}
			default:
				bad++ // a link, a pipe: not a ref git would read safely
			}
		}
	}
	walk(rd, "refs/", 1)
	return refs, bad, nil
}

// gitAsOwner runs git on the host's repository r, as the owner of its
// directory when corral is root (git refuses a repository of another user,
// and what it writes must be the owner's), with no environment of the
// caller's that would send it elsewhere.
//
// The repository may be one a command made in the workspace in an earlier
// session, before it was shadowed, with the hooks, commondir and links of
// the command's: git runs no hook (update-ref would run
// reference-transaction, on the host), nor in a repository with a
// commondir (its refs and objects would be another repository's, anywhere
// on the host), and only where plainPath says no link leads elsewhere.
func (s *gitShadow) gitAsOwner(r *shadowRepo, hd *repoDir, env []string, stdin io.Reader, limit time.Duration, args ...string) ([]byte, error) {
	if r.stuck {
		return nil, fmt.Errorf("git %s: git did not end in this repository before: nothing more is taken from it in this session", args[0])
	}
	var st unix.Stat_t
	if err := unix.Fstatat(hd.fd, "commondir", &st, unix.AT_SYMLINK_NOFOLLOW); !errors.Is(err, unix.ENOENT) {
		return nil, fmt.Errorf("git %s: the repository has a commondir, which sends git to another repository", args[0])
	}
	// Bounded: what git opens there (an included config, packed-refs,
	// objects/info/alternates) may be a named pipe that never opens.
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", append([]string{"--git-dir=" + r.Host, "-c", "core.hooksPath=/dev/null"}, args...)...)
	cmd.WaitDelay = 10 * time.Second
	cmd.Dir = r.Host
	cmd.Stdin = stdin
	// In a partial clone, git would fetch an object a command's names
	// from the promisor remote, with the user's credentials.
	cmd.Env = append(append(gitHostEnv(), "GIT_NO_LAZY_FETCH=1"), env...)
	if os.Geteuid() == 0 && unix.Fstat(hd.fd, &st) == nil && st.Uid != 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: st.Uid, Gid: st.Gid}}
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			r.stuck = true
			s.log.Warn("git did not end in a repository: nothing more is taken from it in this session", "repo", r.Host, "git", args[0], "limit", limit)
			return nil, fmt.Errorf("git %s did not end within %v (a named pipe in the repository?): nothing more is taken from it in this session", args[0], limit)
		}
		msg := strings.TrimSpace(errb.String())
		if i := strings.LastIndexByte(msg, '\n'); i >= 0 {
			msg = msg[i+1:]
		}
		return nil, fmt.Errorf("git %s: %v: %s", args[0], err, msg)
	}
	return out.Bytes(), nil
}

// gitLimit bounds git run on a host's repository, and gitRate lets
// index-pack a minute more for each gitRate bytes it is given.
var (
	gitLimit = 2 * time.Minute
	gitRate  = int64(32 << 20)
)

func indexPackLimit(size int64) time.Duration {
	return gitLimit + time.Duration(size/gitRate)*time.Minute
}

// plainPath reports whether each directory on the way to rel in the host's
// repository hd is a directory and rel a regular file (a directory when
// dir is set), as far as they exist: no link, which git would follow to
// write elsewhere.
func plainPath(hd *repoDir, rel string, dir bool) bool {
	d := hd
	defer func() {
		if d != hd {
			d.close()
		}
	}()
	parts := strings.Split(rel, "/")
	for i, part := range parts {
		var st unix.Stat_t
		if err := unix.Fstatat(d.fd, part, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return errors.Is(err, unix.ENOENT)
		}
		if i == len(parts)-1 && !dir {
			return st.Mode&unix.S_IFMT == unix.S_IFREG
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			return false
		}
		sub, err := openBeneathFD(d, part)
		if err != nil {
			return false
		}
		if d != hd {
			d.close()
		}
		d = sub
	}
	return true
}

// gitHostEnv is the environment of git run on the host's repository: the
// caller's, less every GIT_ variable, with no terminal prompt.
func gitHostEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") {
			env = append(env, kv)
		}
	}
	return append(env, "GIT_TERMINAL_PROMPT=0")
}

// importObjects moves the objects commands made in r's shadow into the
// host's store, checked by git; why says what was refused.
func (s *gitShadow) importObjects(r *shadowRepo, hd, sd *repoDir) (why string) {
	if r.objectsKey.unchanged(sd) {
		return ""
	}
	left := false // packs left for the next sync
	defer func() {
		// What was taken (or refused) is gone from the shadow now.
		r.objectsKey = objectsKey(sd)
		if left {
			r.objectsKey = nil
		}
	}()
	if !plainPath(hd, "objects/pack", true) {
		return "the repository's objects/pack is not a directory of its own: nothing taken"
	}
	od, err := openBeneathFD(sd, "objects")
	if err != nil {
		return ""
	}
	defer od.close()
	names, err := od.names(-1)
	if err != nil {
		return ""
	}
	slices.Sort(names)
	var objs []looseEntry
	var dirs []*repoDir
	defer func() {
		for _, d := range dirs {
			d.close()
		}
	}()
	var pd *repoDir
	type packFile struct {
		base  string
		mtime int64
	}
	var packs []packFile
	for _, name := range names {
		switch {
		case len(name) == 2 && strings.Trim(name, "0123456789abcdef") == "":
			sub, err := openBeneathFD(od, name)
			if err != nil {
				continue
			}
			dirs = append(dirs, sub)
			files, _ := sub.names(maxImportFiles)
			slices.Sort(files)
			for _, f := range files {
				if isHexID(name+f, r.HashLen) && len(objs) < maxImportFiles {
					objs = append(objs, looseEntry{sub, f})
				}
			}
		case name == "pack":
			if pd, err = openBeneathFD(od, name); err != nil {
				continue
			}
			dirs = append(dirs, pd)
			files, _ := pd.names(maxImportFiles)
			for _, f := range files {
				if base, ok := strings.CutSuffix(f, ".pack"); ok && strings.HasPrefix(base, "pack-") {
					var st unix.Stat_t
					unix.Fstatat(pd.fd, f, &st, unix.AT_SYMLINK_NOFOLLOW)
					packs = append(packs, packFile{base, st.Mtim.Nano()})
				}
			}
		}
	}
	// In the order git made them, which is the order in which they name
	// each other; a bounded number each time.
	slices.SortFunc(packs, func(a, b packFile) int {
		return cmp.Or(cmp.Compare(a.mtime, b.mtime), strings.Compare(a.base, b.base))
	})
	if len(packs) > maxImportPacks {
		packs, left = packs[:maxImportPacks], true
	}
	var problems []string
	if len(packs) > 0 || len(objs) > 0 {
		q, err := s.newQuarantine(r, hd)
		if err != nil {
			// Nothing taken, nothing removed: tried again after the next
			// command.
			left = true
			return "objects not taken: " + err.Error()
		}
		// Twice: a pack may name objects of one taken after it.
		failed := map[string]error{}
		for _, p := range packs {
			failed[p.base] = s.importPack(q, r, hd, pd, p.base+".pack")
		}
		var looseErr error
		if len(objs) > 0 {
			looseErr = s.importLoose(q, r, hd, objs)
		}
		again := false
		for _, p := range packs {
			if failed[p.base] != nil {
				failed[p.base] = s.importPack(q, r, hd, pd, p.base+".pack")
				again = again || failed[p.base] == nil
			}
		}
		if looseErr != nil && again {
			looseErr = s.importLoose(q, r, hd, objs)
		}
		for _, p := range packs {
			if err := failed[p.base]; err != nil {
				problems = append(problems, err.Error())
				s.log.Warn("a pack a command made was not taken into the host's repository", "repo", r.Host, "pack", p.base, "err", err)
			}
		}
		if looseErr != nil {
			problems = append(problems, looseErr.Error())
			s.log.Warn("objects a command made were not taken into the host's repository", "repo", r.Host, "err", looseErr)
		}
		if err := q.finish(); err != nil {
			problems = append(problems, err.Error())
		}
	}
	// Taken, or refused: either way they go, packs with their companions.
	for _, p := range packs {
		for _, ext := range []string{".pack", ".idx", ".rev", ".bitmap", ".keep", ".promisor", ".mtimes"} {
			pd.remove(p.base + ext)
		}
	}
	for _, o := range objs {
		o.dir.remove(o.name)
	}
	// An emptied fan-out directory goes, so that the next object made there
	// changes the store's own mtime (git makes the directory again).
	for _, name := range names {
		if len(name) == 2 {
			unix.Unlinkat(od.fd, name, unix.AT_REMOVEDIR)
		}
	}
	if len(problems) > 0 {
		return "objects refused: " + strings.Join(problems, "; ")
	}
	return ""
}

// A quarantine is a directory in the host's object store where the packs of
// one sync are made, as git's receive-pack does: git index-pack --strict
// writes there, the host's store its alternate, and only the packs it took
// whole are moved into the store. index-pack checks the .gitmodules files
// a pack's trees name only after it has written the pack, and without
// --strict takes objects that name objects that are nowhere (a tree whose
// .gitmodules comes in a later pack, unchecked; a commit whose parent is
// nowhere, a history broken for every git command after it).
type quarantine struct {
	s       *gitShadow
	od, qd  *repoDir // the host's objects, the quarantine
	name    string   // the quarantine's name in od
	path    string   // its path, for git
	objects string   // the host's objects' path, for git
	taken   []string // the packs taken (pack-HASH)
}

// newQuarantine makes a quarantine in r's host objects.
func (s *gitShadow) newQuarantine(r *shadowRepo, hd *repoDir) (*quarantine, error) {
	od, err := openBeneathFD(hd, "objects")
	if err != nil {
		return nil, err
	}
	var rnd [8]byte
	rand.Read(rnd[:])
	name := "tmp_objdir-corral-" + hex.EncodeToString(rnd[:])
	uid, gid := -1, -1
	var st unix.Stat_t
	if os.Geteuid() == 0 && unix.Fstat(hd.fd, &st) == nil {
		uid, gid = int(st.Uid), int(st.Gid) // git runs as the owner (gitAsOwner)
	}
	for _, p := range []string{name, name + "/pack"} {
		if err := unix.Mkdirat(od.fd, p, 0o700); err != nil {
			od.close()
			return nil, err
		}
		if uid >= 0 {
			unix.Fchownat(od.fd, p, uid, gid, unix.AT_SYMLINK_NOFOLLOW)
		}
	}
	qd, err := openBeneathFD(od, name)
	if err != nil {
		od.removeAll(name)
		od.close()
		return nil, err
	}
	objects := path.Join(r.Host, "objects")
	return &quarantine{s: s, od: od, qd: qd, name: name, path: path.Join(objects, name), objects: objects}, nil
}

// indexPack streams a pack into git index-pack in the quarantine; what a
// refused one left there goes.
func (q *quarantine) indexPack(r *shadowRepo, hd *repoDir, in io.Reader, size int64) error {
	env := []string{"GIT_OBJECT_DIRECTORY=" + q.path, "GIT_ALTERNATE_OBJECT_DIRECTORIES=" + q.objects}
	out, err := q.s.gitAsOwner(r, hd, env, in, indexPackLimit(size), "index-pack", "--stdin", "--strict")
	var hash string
	if err == nil {
		// "pack\tHASH", then the .gitmodules it could not check: none
		// under --strict, or it is refused.
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		h, ok := strings.CutPrefix(lines[0], "pack\t")
		if !ok || len(lines) > 1 || !isHexID(h, r.HashLen) {
			err = fmt.Errorf("git index-pack: a .gitmodules it could not check: %q", out)
		}
		hash = h
	}
	if err != nil {
		q.sweep()
		return err
	}
	if !slices.Contains(q.taken, "pack-"+hash) {
		q.taken = append(q.taken, "pack-"+hash)
	}
	return nil
}

// sweep removes from the quarantine every file but those of the packs taken.
func (q *quarantine) sweep() {
	pd, err := openBeneathFD(q.qd, "pack")
	if err != nil {
		return
	}
	defer pd.close()
	files, _ := pd.names(-1)
	for _, f := range files {
		if !slices.ContainsFunc(q.taken, func(base string) bool { return strings.HasPrefix(f, base+".") }) {
			pd.removeAll(f)
		}
	}
}

// finish moves the packs taken into the host's store, each index last (git
// finds a pack by its index), and removes the quarantine.
func (q *quarantine) finish() error {
	defer func() {
		q.qd.close()
		q.od.removeAll(q.name)
		q.od.close()
	}()
	if len(q.taken) == 0 {
		return nil
	}
	from, err := openBeneathFD(q.qd, "pack")
	if err != nil {
		return err
	}
	defer from.close()
	if unix.Mkdirat(q.od.fd, "pack", 0o755) == nil {
		var st unix.Stat_t
		if os.Geteuid() == 0 && unix.Fstat(q.od.fd, &st) == nil {
			unix.Fchownat(q.od.fd, "pack", int(st.Uid), int(st.Gid), unix.AT_SYMLINK_NOFOLLOW)
		}
	}
	to, err := openBeneathFD(q.od, "pack")
	if err != nil {
		return err
	}
	defer to.close()
	for _, base := range q.taken {
		for _, ext := range []string{".pack", ".rev", ".idx"} {
			err := unix.Renameat(from.fd, base+ext, to.fd, base+ext)
			if err != nil && (ext != ".rev" || !errors.Is(err, unix.ENOENT)) {
				return fmt.Errorf("cannot move %s into the host's store: %w", base+ext, err)
			}
		}
	}
	return nil
}

// importPack streams the pack name in pd into the quarantine.
func (s *gitShadow) importPack(q *quarantine, r *shadowRepo, hd, pd *repoDir, name string) error {
	fd, err := unix.Openat(pd.fd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil // gone meanwhile
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", name)
	}
	return q.indexPack(r, hd, bufio.NewReaderSize(f, 1<<16), fi.Size())
}

// looseEntry is a loose object file of a shadow.
type looseEntry struct {
	dir  *repoDir
	name string
}

// Pack object types, as in a pack's entry header.
var packTypes = map[string]byte{"commit": 1, "tree": 2, "blob": 3, "tag": 4}

// importLoose makes one pack of loose objects and streams it into the host's
// store. Each file is read twice (its header, to count and size it; then
// its content, into the pack): one changed in between breaks the pack,
// which git then refuses whole.
func (s *gitShadow) importLoose(q *quarantine, r *shadowRepo, hd *repoDir, objs []looseEntry) error {
	type head struct {
		typ  byte
		size int64
	}
	heads := make([]head, 0, len(objs))
	kept := objs[:0:0]
	for _, o := range objs {
		typ, size, err := looseHeader(o.dir, o.name)
		if err != nil {
			continue // not an object git wrote: left out, removed after
		}
		heads = append(heads, head{typ, size})
		kept = append(kept, o)
	}
	if len(kept) == 0 {
		return nil
	}
	pr, pw := io.Pipe()
	written := make(chan struct{})
	go func() {
		defer close(written)
		var h hash.Hash = sha1.New()
		if r.HashLen == 32 {
			h = sha256.New()
		}
		bw := bufio.NewWriterSize(pw, 1<<16)
		w := io.MultiWriter(bw, h)
		var hdr [12]byte
		copy(hdr[:], "PACK")
		binary.BigEndian.PutUint32(hdr[4:], 2)
		binary.BigEndian.PutUint32(hdr[8:], uint32(len(kept)))
		_, err := w.Write(hdr[:])
		for i := 0; err == nil && i < len(kept); i++ {
			err = writePackEntry(w, kept[i].dir, kept[i].name, heads[i].typ, heads[i].size)
		}
		if err == nil {
			_, err = bw.Write(h.Sum(nil))
		}
		if err == nil {
			err = bw.Flush()
		}
		pw.CloseWithError(err)
	}()
	var size int64
	for _, h := range heads {
		size += h.size
	}
	err := q.indexPack(r, hd, pr, size)
	// The writer reads the shadow's directories by descriptor: it must be
	// done (its next write fails once the pipe is closed) before the
	// caller closes them.
	pr.Close()
	<-written
	return err
}

// openLoose opens a loose object file and its zlib stream.
func openLoose(d *repoDir, name string) (*os.File, io.ReadCloser, error) {
	fd, err := unix.Openat(d.fd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	f := os.NewFile(uintptr(fd), name)
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, errors.New("not a regular file")
	}
	z, err := zlib.NewReader(bufio.NewReader(f))
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, z, nil
}

// readLooseHeader reads "TYPE SIZE\0" from a loose object's stream.
func readLooseHeader(z io.Reader) (typ byte, size int64, err error) {
	var hdr []byte
	var b [1]byte
	for len(hdr) < 32 {
		if _, err := io.ReadFull(z, b[:]); err != nil {
			return 0, 0, err
		}
		if b[0] == 0 {
			t, n, ok := strings.Cut(string(hdr), " ")
			typ, known := packTypes[t]
			size, err := strconv.ParseInt(n, 10, 64)
			if !ok || !known || err != nil || size < 0 {
				return 0, 0, errors.New("not a loose object")
			}
			return typ, size, nil
		}
		hdr = append(hdr, b[0])
	}
	return 0, 0, errors.New("not a loose object")
}

func looseHeader(d *repoDir, name string) (byte, int64, error) {
	f, z, err := openLoose(d, name)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	defer z.Close()
	return readLooseHeader(z)
}

// writePackEntry writes one loose object as a pack entry: its type and
// size, then its content compressed anew; the content must be exactly
// size bytes.
func writePackEntry(w io.Writer, d *repoDir, name string, typ byte, size int64) error {
	f, z, err := openLoose(d, name)
	if err != nil {
		return err
	}
	defer f.Close()
	defer z.Close()
	t, n, err := readLooseHeader(z)
	if err != nil || t != typ || n != size {
		return fmt.Errorf("%s changed while it was read", name)
	}
	var hdr []byte
	c := byte(typ<<4) | byte(size&0x0f)
	for rest := size >> 4; rest > 0; rest >>= 7 {
		hdr = append(hdr, c|0x80)
		c = byte(rest & 0x7f)
	}
	hdr = append(hdr, c)
	if _, err := w.Write(hdr); err != nil {
		return err
	}
	zw, _ := zlib.NewWriterLevel(w, zlib.BestSpeed)
	copied, err := io.Copy(zw, io.LimitReader(z, size))
	if err == nil && copied != size {
		err = fmt.Errorf("%s is shorter than its header says", name)
	}
	if err == nil {
		var extra [1]byte
		if k, _ := z.Read(extra[:]); k > 0 {
			err = fmt.Errorf("%s is longer than its header says", name)
		}
	}
	if cerr := zw.Close(); err == nil {
		err = cerr
	}
	return err
}

// pushRefs applies to the host the refs commands changed in r's shadow since
// the last sync; why says what was refused (those are put back).
func (s *gitShadow) pushRefs(r *shadowRepo, hd, sd *repoDir) (changed bool, why string) {
	if r.shadowKey.unchanged(sd) {
		return false, ""
	}
	key := refsKey(sd, true)
	shadow, _, err := readRefs(sd, r.HashLen)
	if err != nil {
		return false, ""
	}
	r.shadowKey = key // what was read; resetRefs below makes it anew
	// A symbolic ref (refs/remotes/origin/HEAD) stays the shadow's.
	symbolic := func(v string) bool { return strings.HasPrefix(v, "ref: ") }
	var names []string
	for name, v := range shadow {
		if r.Refs[name] != v && !symbolic(v) && !symbolic(r.Refs[name]) {
			names = append(names, name)
		}
	}
	for name, v := range r.Refs {
		if _, ok := shadow[name]; !ok && !symbolic(v) {
			names = append(names, name)
		}
	}
	stashLog, stashChanged := s.stashLogChanged(r, sd)
	if len(names) == 0 && !stashChanged {
		return false, ""
	}
	slices.Sort(names)
	host, _, err := readRefs(hd, r.HashLen)
	if err != nil {
		return true, "refs: " + err.Error()
	}
	// The branch HEAD names, which git never deletes: the shadow's HEAD
	// when it is one (a command checked out another branch, then deleted
	// this one), else the host's.
	current := ""
	for _, d := range []*repoDir{sd, hd} {
		if b, err := d.read("HEAD", maxRefFile); err == nil && checkHead(b, r.HashLen, true) == nil {
			if target, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "ref: "); ok {
				current = target
				break
			}
		}
	}
	var refused []string
	var lines []string
	var applied []string
	for _, name := range names {
		old, cur := r.Refs[name], shadow[name]
		switch {
		case host[name] != old:
			refused = append(refused, name+" changed on the host too; the host's is kept")
		case cur == "" && name == current:
			refused = append(refused, name+" is the branch checked out: git does not delete it")
		case cur != "" && strings.HasPrefix(name, "refs/replace/"):
			// The user's git would show the object it replaces as the
			// command's: a commit HEAD names holding the command's files,
			// their change gone from git status and git diff.
			refused = append(refused, name+" would make the user's git show another object in place of one: replace refs are not taken")
		case cur == "":
			// Its reflog goes with it: its last value is kept where no
			// command reaches (refs/corral is never synced).
			lines = append(lines, "update "+deletedRefs+name+" "+old, "delete "+name+" "+old)
			applied = append(applied, name)
		case old == "":
			lines = append(lines, "create "+name+" "+cur)
			applied = append(applied, name)
		default:
			lines = append(lines, "update "+name+" "+cur+" "+old)
			applied = append(applied, name)
		}
	}
	if len(lines) > 0 || stashChanged {
		r.hostKey = nil // the host's refs change: read them again before the next command
	}
	updateRefs := func(lines []string) error {
		for _, l := range lines {
			name := strings.Fields(l)[1]
			if !plainPath(hd, name, false) || !plainPath(hd, "logs/"+name, false) {
				return errors.New(name + " or its reflog cannot be a file of the repository's own (a link, or a ref, on the way): no ref taken")
			}
		}
		in := strings.Join(lines, "\n") + "\n"
		_, err := s.gitAsOwner(r, hd, nil, strings.NewReader(in), gitLimit, "update-ref", "--create-reflog", "-m", "corral: a command in the sandbox", "--stdin")
		return err
	}
	if len(lines) > 0 {
		err := updateRefs(lines)
		if err != nil && slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, "update "+deletedRefs) }) {
			// The copy of a deleted ref may be in the way of another's
			// (refs/heads/a deleted, then refs/heads/a/b): the copies go
			// in a directory of their own instead.
			alt := make([]string, len(lines))
			dir := deletedRefs + strconv.FormatInt(time.Now().UnixNano(), 10) + "/"
			for i, l := range lines {
				if rest, ok := strings.CutPrefix(l, "update "+deletedRefs); ok {
					l = "update " + dir + rest
				}
				alt[i] = l
			}
			if updateRefs(alt) == nil {
				err = nil
			}
		}
		if err != nil {
			refused = append(refused, err.Error())
			applied = nil
		}
	}
	for _, name := range applied {
		if v := shadow[name]; v == "" {
			delete(r.Refs, name)
		} else {
			r.Refs[name] = v
		}
	}
	if stashChanged && (shadow["refs/stash"] == r.Refs["refs/stash"]) {
		if err := s.writeStashLog(hd, stashLog, r.HashLen); err != nil {
			refused = append(refused, "the stash list: "+err.Error())
		} else {
			r.StashSum = sha256.Sum256(stashLog)
		}
	}
	if len(refused) > 0 {
		s.resetRefs(r, hd, sd)
		return true, "refs: " + strings.Join(refused, "; ")
	}
	return true, ""
}

// stashLogChanged reads the shadow's reflog of refs/stash (the stash list)
// and reports whether it differs from the last sync's.
func (s *gitShadow) stashLogChanged(r *shadowRepo, sd *repoDir) ([]byte, bool) {
	ld, err := openBeneath(r.Shadow, "logs/refs")
	if err != nil {
		return nil, r.StashSum != [32]byte{}
	}
	defer ld.close()
	b, err := ld.read("stash", maxStashLog)
	if err != nil {
		b = nil
	}
	var sum [32]byte
	if len(b) > 0 {
		sum = sha256.Sum256(b)
	}
	return b, sum != r.StashSum
}

// writeStashLog replaces the host's reflog of refs/stash with b, each line
// checked to be a reflog entry of git's format.
func (s *gitShadow) writeStashLog(hd *repoDir, b []byte, hashLen int) error {
	if err := checkReflog(b, hashLen); err != nil {
		return err
	}
	s.mkdirAt(hd, "logs")
	ld, err := openBeneathFD(hd, "logs")
	if err != nil {
		return err
	}
	defer ld.close()
	s.mkdirAt(ld, "refs")
	rd, err := openBeneathFD(ld, "refs")
	if err != nil {
		return err
	}
	defer rd.close()
	if len(b) == 0 {
		return rd.remove("stash")
	}
	return s.writeHost(rd, "stash", b)
}

// checkReflog checks each line of a reflog: "OLD NEW IDENT TIME TZ\tMESSAGE",
// no control character but the tab.
func checkReflog(b []byte, hashLen int) error {
	if len(b) == 0 {
		return nil
	}
	s, ok := strings.CutSuffix(string(b), "\n")
	if !ok {
		return errors.New("no final newline")
	}
	for i, line := range strings.Split(s, "\n") {
		f := strings.SplitN(line, " ", 3)
		if len(f) != 3 || !isHexID(f[0], hashLen) || !isHexID(f[1], hashLen) {
			return fmt.Errorf("line %d is not a reflog entry", i+1)
		}
		for _, c := range line {
			if c < 0x20 && c != '\t' || c == 0x7f {
				return fmt.Errorf("line %d has a control character", i+1)
			}
		}
	}
	return nil
}

// pullRefs writes into r's shadow the refs the user changed on the host
// since the last sync.
func (s *gitShadow) pullRefs(r *shadowRepo, hd, sd *repoDir) bool {
	if r.hostKey.unchanged(hd) {
		return false
	}
	key := refsKey(hd, false)
	host, _, err := readRefs(hd, r.HashLen)
	if err != nil {
		return false
	}
	if maps.Equal(host, r.Refs) {
		r.hostKey = key
		return false
	}
	s.resetRefs(r, hd, sd)
	r.hostKey = key
	return true
}

// resetRefs makes the shadow's refs the host's: its packed-refs holds
// every ref of the host that is not symbolic, and each loose ref of the
// shadow that differs from the host's is removed (a symbolic one is
// written). The last sync's refs become the host's.
func (s *gitShadow) resetRefs(r *shadowRepo, hd, sd *repoDir) {
	host, _, err := readRefs(hd, r.HashLen)
	if err != nil {
		return
	}
	shadow, _, _ := readRefs(sd, r.HashLen)
	var buf bytes.Buffer
	names := make([]string, 0, len(host))
	for name := range host {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if v := host[name]; !strings.HasPrefix(v, "ref: ") {
			fmt.Fprintf(&buf, "%s %s\n", v, name)
		}
	}
	if err := s.writeShadow(sd, "packed-refs", buf.Bytes()); err != nil {
		s.log.Warn("cannot write the shadow's packed-refs", "repo", r.Host, "err", err)
	}
	for name, v := range shadow {
		if host[name] == v {
			continue
		}
		dir, base := path.Split(name)
		d, err := openBeneath(r.Shadow, strings.TrimSuffix(dir, "/"))
		if err != nil {
			continue
		}
		if hv := host[name]; strings.HasPrefix(hv, "ref: ") {
			s.writeShadow(d, base, []byte(hv+"\n"))
		} else {
			d.removeAll(base)
		}
		d.close()
	}
	for name, v := range host {
		if _, ok := shadow[name]; !ok && strings.HasPrefix(v, "ref: ") {
			dir, base := path.Split(name)
			if d, err := openBeneath(r.Shadow, strings.TrimSuffix(dir, "/")); err == nil {
				s.writeShadow(d, base, []byte(v+"\n"))
				d.close()
			}
		}
	}
	r.Refs = host
	// The stash list is the reflog of refs/stash: the host's.
	var log []byte
	if ld, err := openBeneathFD(hd, "logs"); err == nil {
		if rd, err := openBeneathFD(ld, "refs"); err == nil {
			log, _ = rd.read("stash", maxStashLog)
			rd.close()
		}
		ld.close()
	}
	s.mkdirAt(sd, "logs")
	if ld, err := openBeneath(r.Shadow, "logs"); err == nil {
		s.mkdirAt(ld, "refs")
		ld.close()
	}
	if ld, err := openBeneath(r.Shadow, "logs/refs"); err == nil {
		if len(log) > 0 {
			s.writeShadow(ld, "stash", log)
		} else {
			ld.removeAll("stash")
		}
		ld.close()
	}
	r.StashSum = [32]byte{}
	if len(log) > 0 {
		r.StashSum = sha256.Sum256(log)
	}
	r.shadowKey = refsKey(sd, true)
}
