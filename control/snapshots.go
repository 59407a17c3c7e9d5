package control

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/corralhq/corral"
	"github.com/corralhq/corral/snapshot"
	"github.com/corralhq/corral/workspace"
)

// snapshots is the server's snapshot store, opened on first use.
type snapshots struct {
	dir string // Options.SnapshotDir

	once  sync.Once
	store *snapshot.Store
	err   error

	mu    sync.Mutex // guards locks
	locks map[string]*sync.RWMutex
}

// open returns the store.
func (sn *snapshots) open() (*snapshot.Store, error) {
	sn.once.Do(func() {
		sn.store, sn.err = snapshot.Open(sn.dir)
	})
	if sn.err != nil {
		return nil, errorf(CodeInternal, "the snapshot store: %v", sn.err)
	}
	return sn.store, nil
}

// lock returns the lock of snapshot name: taking or removing it holds it
// for writing, a session starting from it for reading (its workspace's
// copy and its /tmp are read from the store).
func (sn *snapshots) lock(name string) *sync.RWMutex {
	sn.mu.Lock()
	defer sn.mu.Unlock()
	if sn.locks == nil {
		sn.locks = map[string]*sync.RWMutex{}
	}
	l := sn.locks[name]
	if l == nil {
		l = &sync.RWMutex{}
		sn.locks[name] = l
	}
	return l
}

// get returns snapshot name, or the protocol's error.
func (sn *snapshots) get(name string) (*snapshot.Snapshot, error) {
	if err := snapshot.CheckName(name); err != nil {
		return nil, errorf(CodeBadRequest, "%v", err)
	}
	store, err := sn.open()
	if err != nil {
		return nil, err
	}
	snap, err := store.Get(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, errorf(CodeUnknownSnapshot, "no snapshot %q in the server's store %s: take one with %s", name, store.Dir(), MethodSnapshot)
	case err != nil:
		return nil, errorf(CodeInternal, "%v", err)
	}
	return snap, nil
}

// snapshotInfo is snap as the protocol describes it.
func snapshotInfo(snap *snapshot.Snapshot) SnapshotInfo {
	return SnapshotInfo{
		Name:      snap.Name,
		Image:     snap.Image,
		ImageID:   snap.ImageID,
		Base:      snap.Base,
		Session:   snap.Session,
		Created:   snap.Created,
		Workspace: snap.Workspace,
		Files:     snap.Files,
		Bytes:     snap.Bytes,
		Skipped:   snap.Skipped,
		Tmp:       snap.Tmp,
		TmpNote:   snap.TmpNote,
	}
}

// Snapshot takes a snapshot of session req.Session as req.Name, as a batch
// task's "snapshot" does: an image of its sandbox's filesystem, a copy of
// its workspace, an archive of its /tmp. Take it between commands: one
// running meanwhile may be caught half-way.
func (s *Server) Snapshot(ctx context.Context, req SnapshotRequest) (SnapshotInfo, error) {
	if err := snapshot.CheckName(req.Name); err != nil {
		return SnapshotInfo{}, errorf(CodeBadRequest, "%v", err)
	}
	ss, ctx, release, err := s.acquire(ctx, req.Session)
	if err != nil {
		return SnapshotInfo{}, err
	}
	defer release()
	store, err := s.snaps.open()
	if err != nil {
		return SnapshotInfo{}, err
	}
	l := s.snaps.lock(req.Name)
	l.Lock()
	defer l.Unlock()
	snap, err := store.Take(ctx, ss.s.Sandbox(), req.Name)
	if errors.Is(err, errors.ErrUnsupported) {
		return SnapshotInfo{}, errorf(CodeUnsupported, "%v (snapshots need the Docker backend)", err)
	}
	if err != nil {
		return SnapshotInfo{}, sandboxError(ctx, err)
	}
	s.log.Info("control: snapshot taken", "session", ss.id, "snapshot", snap.Name, "image", snap.Image)
	return snapshotInfo(snap), nil
}

// Snapshots lists the snapshots of the server's store, by name.
func (s *Server) Snapshots() ([]SnapshotInfo, error) {
	store, err := s.snaps.open()
	if err != nil {
		return nil, err
	}
	list, err := store.List()
	if err != nil {
		return nil, errorf(CodeInternal, "listing the snapshots: %v", err)
	}
	out := make([]SnapshotInfo, len(list))
	for i, snap := range list {
		out[i] = snapshotInfo(snap)
	}
	return out, nil
}

// RemoveSnapshot removes snapshot name: its copy and its image (unless a
// sandbox still runs it). Sessions started from it are not touched.
func (s *Server) RemoveSnapshot(ctx context.Context, name string) error {
	if _, err := s.snaps.get(name); err != nil {
		return err
	}
	store, err := s.snaps.open()
	if err != nil {
		return err
	}
	l := s.snaps.lock(name)
	l.Lock()
	defer l.Unlock()
	err = store.Remove(ctx, name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return errorf(CodeUnknownSnapshot, "no snapshot %q: it was removed meanwhile", name)
	case err != nil:
		return errorf(CodeInternal, "removing snapshot %s: %v", name, err)
	}
	return nil
}

// fromSnapshot prepares cfg, a session's configuration, to start from
// snapshot name: its image unless one was asked, its workspace filled with
// a copy of the snapshot's (given to the workspace's owner). The snapshot
// stays read-locked until unlock, so that its /tmp can be restored once the
// sandbox runs.
func (s *Server) fromSnapshot(ctx context.Context, o SessionOptions, cfg *corral.Config) (_ *snapshot.Snapshot, unlock func(), err error) {
	if err := snapshot.CheckName(o.FromSnapshot); err != nil {
		return nil, nil, errorf(CodeBadRequest, "from_snapshot: %v", err)
	}
	l := s.snaps.lock(o.FromSnapshot)
	l.RLock()
	defer func() {
		if err != nil {
			l.RUnlock()
		}
	}()
	snap, err := s.snaps.get(o.FromSnapshot)
	if err != nil {
		return nil, nil, err
	}
	if o.Image == "" {
		cfg.Sandbox.Image = snap.Image
	}
	ws := cfg.Workspace
	if o.Workspace != "" {
		empty, err := emptyDir(ws)
		if err != nil {
			return nil, nil, errorf(CodeInternal, "reading the workspace: %v", err)
		}
		if !empty {
			return nil, nil, errorf(CodeBadRequest, "workspace %q is not empty: a session from a snapshot starts on a copy of the snapshot's workspace; give an empty directory, or none for a fresh one", o.Workspace)
		}
	}
	if _, err := workspace.Copy(ctx, snap.WorkspaceDir(), ws); err != nil {
		if ctx.Err() != nil {
			return nil, nil, errorf(CodeCanceled, "the request was cancelled while the session's workspace was copied")
		}
		return nil, nil, errorf(CodeInternal, "copying the snapshot's workspace: %v", err)
	}
	if err := giveTree(ws); err != nil {
		return nil, nil, errorf(CodeInternal, "giving the snapshot's copy to the workspace's owner: %v", err)
	}
	return snap, l.RUnlock, nil
}

// emptyDir says whether dir has no entries.
func emptyDir(dir string) (bool, error) {
	f, err := os.Open(dir)
	if err != nil {
		return false, err
	}
	defer f.Close()
	_, err = f.Readdirnames(1)
	if err == io.EOF {
		return true, nil
	}
	return false, err
}

// giveTree gives what is below dir to dir's owner, when this process is
// root and the owner is not: commands run as the workspace's owner, and
// must be able to change what the copy made.
func giveTree(dir string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || st.Uid == 0 {
		return nil
	}
	uid, gid := int(st.Uid), int(st.Gid)
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
}
