package tools

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/corralhq/corral/fsys"
)

// tempMarker is in the name of every temporary file a write creates, so the
// watcher can ignore them.
const tempMarker = ".corral-"

// tempName returns a fresh hidden name next to name.
func tempName(name string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	if len(name) > 180 { // stay under NAME_MAX (255 bytes)
		name = name[:180]
	}
	return "." + name + tempMarker + hex.EncodeToString(b[:]) + ".tmp"
}

func isTempName(name string) bool {
	return strings.HasPrefix(name, ".") && strings.Contains(name, tempMarker) && strings.HasSuffix(name, ".tmp")
}

// newFileMode is the mode of a file write creates in root: 0644 less the
// umask.
func newFileMode(root fsys.Root) fs.FileMode { return 0o644 &^ fsys.Umask(root) }

// keepOwner gives f, a new file described by fi, the owner and group of old
// when they differ and the filesystem's user may change them (root may).
// Errors are ignored: ownership is kept where possible, never a reason to
// fail a write.
func keepOwner(f fsys.File, fi, old fs.FileInfo) {
	uid, gid, ok := fsys.Owner(old)
	if !ok {
		return
	}
	if u, g, ok := fsys.Owner(fi); ok && u == uid && g == gid {
		return
	}
	_ = f.Chown(uid, gid)
}

// keptMode is the part of an existing file's mode a rewrite keeps.
func keptMode(fi fs.FileInfo) fs.FileMode {
	return fi.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
}

// writeAtomic replaces name in dir with data: it writes a temporary file in the
// same directory, gives it mode and (when old is not nil) old's owner, syncs it,
// renames it over name and syncs the directory. Whenever the process dies, name
// holds either its old content or data, never a mix. committing is called with
// the new file's signature just before the rename, so the session knows its own
// write before any watcher event about it; an error from it cancels the write.
// A directory sync that the filesystem does not support is logged by the caller
// through dirSyncErr, not failed.
func writeAtomic(dir fsys.Root, name string, data []byte, mode fs.FileMode, old fs.FileInfo, committing func(statSig) error) (dirSyncErr error, err error) {
	tmp := tempName(name)
	f, err := dir.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	done := false
	defer func() {
		if !done {
			f.Close()
			_ = dir.Remove(tmp)
		}
	}()
	if _, err := f.Write(data); err != nil {
		return nil, err
	}
	// The signature of the new content: neither the owner nor the mode
	// changes it.
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if old != nil {
		keepOwner(f, fi, old)
	}
	// Chmod on the descriptor: the umask does not apply, and no one can swap
	// the file under us.
	if err := f.Chmod(mode); err != nil {
		return nil, err
	}
	if err := f.Sync(); err != nil {
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	if committing != nil {
		if err := committing(sigOf(fi)); err != nil {
			return nil, err
		}
	}
	if err := dir.Rename(tmp, name); err != nil {
		return nil, err
	}
	done = true
	return syncDir(dir), nil
}

// syncDir makes a rename in dir durable.
func syncDir(dir fsys.Root) error {
	d, err := dir.OpenFile(".", os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync directory: %w", err)
	}
	return nil
}

// errTooLarge says a file exceeds what edit and write hold in memory.
var errTooLarge = errors.New("file too large")

// errChangedMeanwhile says a file changed between the moment an edit or write
// loaded it and the moment it would have replaced it.
var errChangedMeanwhile = errors.New("file changed while it was being written")

// testHookCommitting, when set by a test, runs just before a write's last check
// of the file it replaces.
var testHookCommitting func(name string)

// stillAsLoaded checks, just before the rename, that name in dir is still the
// file that was loaded — old, whose content hashed to h — or still absent when
// old is nil: someone else's change made since would otherwise be lost. Its
// signature decides when it is unchanged; else the content does.
func stillAsLoaded(ctx context.Context, dir fsys.Root, name string, old fs.FileInfo, h contentHash) error {
	if testHookCommitting != nil {
		testHookCommitting(name)
	}
	cur, err := dir.Lstat(name)
	switch {
	case old == nil && errors.Is(err, fs.ErrNotExist):
		return nil
	case old == nil, err != nil, !cur.Mode().IsRegular():
		return errChangedMeanwhile
	case sigOf(cur) == sigOf(old):
		return nil
	case h.large != statSig{}:
		return errChangedMeanwhile // its signature is its content
	}
	f, err := dir.OpenFile(name, os.O_RDONLY|openNonblock, 0)
	if err != nil {
		return errChangedMeanwhile
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() || fi.Size() != h.size {
		return errChangedMeanwhile
	}
	now, err := hashReader(ctx, f)
	if err != nil {
		return err
	}
	if now != h {
		return errChangedMeanwhile
	}
	return nil
}
