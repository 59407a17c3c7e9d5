package tools

import (
	"context"
	"hash/maphash"
	"io"
	"io/fs"
	"sync"

	"github.com/corralhq/corral/fsys"
)

// hashSeed keys the content hashes of this process. Hashes are compared only
// within the process and never stored or shown, so a fast keyed hash is enough:
// maphash runs at memory speed (about 10 GB/s here, against 1.6 GB/s for
// SHA-256 with SHA-NI), the random seed keeps a model from crafting collisions,
// and an accidental collision of 64 bits plus an equal size is negligible.
var hashSeed = maphash.MakeSeed()

// contentHash identifies a file's content. A file over maxHashBytes is not
// hashed: its stat signature (device, inode, size, modification time in
// nanoseconds) stands for its content, in large.
type contentHash struct {
	sum   uint64
	size  int64
	large statSig
}

// maxHashBytes is the largest file whose content is hashed for staleness;
// edit refuses larger files anyway (maxEditBytes), and write over one
// compares its stat signature.
const maxHashBytes = maxEditBytes

// largeKey is the staleness key of a file over maxHashBytes.
func largeKey(fi fs.FileInfo) contentHash {
	return contentHash{size: fi.Size(), large: sigOf(fi)}
}

// hasher computes a contentHash while the content streams through it.
type hasher struct {
	h    maphash.Hash
	size int64
}

func newHasher() *hasher {
	h := &hasher{}
	h.h.SetSeed(hashSeed)
	return h
}

func (h *hasher) Write(p []byte) (int, error) {
	h.size += int64(len(p))
	return h.h.Write(p)
}

func (h *hasher) sum() contentHash { return contentHash{sum: h.h.Sum64(), size: h.size} }

func hashBytes(b []byte) contentHash {
	return contentHash{sum: maphash.Bytes(hashSeed, b), size: int64(len(b))}
}

// hashReader hashes r to its end, checking ctx between chunks.
func hashReader(ctx context.Context, r io.Reader) (contentHash, error) {
	h := newHasher()
	buf := make([]byte, 256<<10)
	for {
		if err := ctx.Err(); err != nil {
			return contentHash{}, err
		}
		n, err := r.Read(buf)
		h.Write(buf[:n])
		if err == io.EOF {
			return h.sum(), nil
		}
		if err != nil {
			return contentHash{}, err
		}
	}
}

// statSig is what stat says about a file's content: cheap to compare, it lets
// the watcher tell a file it already knows from a changed one without hashing.
// The hash decides; the signature only saves work.
type statSig struct {
	dev, ino uint64
	size     int64
	mtime    int64
}

func sigOf(fi fs.FileInfo) statSig {
	dev, ino, _ := fsys.Inode(fi)
	return statSig{dev: dev, ino: ino, size: fi.Size(), mtime: fi.ModTime().UnixNano()}
}

// ownWrites is how many signatures of its own writes a file remembers, so that
// the watcher's late events about them are not taken for outside changes.
const ownWrites = 8

// fileState is what the session knows of one file it read or wrote.
type fileState struct {
	// hash is the content this session last read or wrote: edit and write
	// refuse the file when its content no longer hashes to it.
	hash contentHash
	// sig is the file's signature when hash was taken.
	sig statSig
	// own are signatures of files this session wrote, and of the files those
	// writes replaced, newest first.
	own [ownWrites]statSig
	// dirty is set when the watcher saw the file change since it was read or
	// written. It is reported once.
	dirty bool
	// display is the workspace-relative path for events.
	display string
}

func (f *fileState) knows(sig statSig) bool {
	if sig == f.sig {
		return true
	}
	for _, o := range f.own {
		if o == sig {
			return true
		}
	}
	return false
}

// readState maps file keys to what the session knows of them.
type readState struct {
	mu    sync.Mutex // guards files and the fileStates in it
	files map[string]*fileState
}

func newReadState() *readState {
	return &readState{files: map[string]*fileState{}}
}

// lookup returns the hash recorded for key.
func (rs *readState) lookup(key string) (contentHash, bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	f, ok := rs.files[key]
	if !ok {
		return contentHash{}, false
	}
	return f.hash, true
}

// markChanged makes key dirty when the session still knows it as content
// hashing to want, and returns its display name then: a tool that found the
// file changed reports it as the watcher would, when the watcher (whose
// events come late under load) has not yet. "" when already reported or
// read again since.
func (rs *readState) markChanged(key string, want contentHash) string {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	f, ok := rs.files[key]
	if !ok || f.dirty || f.hash != want {
		return ""
	}
	f.dirty = true
	return f.display
}

// snapshot returns a copy of key's state, to restore with put if a write fails.
func (rs *readState) snapshot(key string) (fileState, bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	f, ok := rs.files[key]
	if !ok {
		return fileState{}, false
	}
	return *f, true
}

// restore puts back a snapshot, or forgets key when there was none.
func (rs *readState) restore(key string, f fileState, ok bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if !ok {
		delete(rs.files, key)
		return
	}
	c := f
	rs.files[key] = &c
}

// entry returns key's state, made empty when there is none. The caller holds
// rs.mu.
func (rs *readState) entry(key string) *fileState {
	f := rs.files[key]
	if f == nil {
		f = &fileState{}
		rs.files[key] = f
	}
	return f
}

// set makes content hashing to h, with signature sig, what the session knows.
func (f *fileState) set(display string, h contentHash, sig statSig) {
	f.hash, f.sig, f.dirty, f.display = h, sig, false, display
}

// recordRead notes that the session read key with content hash h.
func (rs *readState) recordRead(key, display string, h contentHash, sig statSig) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.entry(key).set(display, h, sig)
}

// recordWrite notes that the session is writing content hashing to h, in a file
// whose signature will be sig. It is called before the file is renamed into
// place, so the watcher already knows the write when its events arrive.
func (rs *readState) recordWrite(key, display string, h contentHash, sig statSig) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	f := rs.entry(key)
	// Remember the signature being replaced too: a late event may still show
	// the file as it was just before this write.
	copy(f.own[2:], f.own[:ownWrites-2])
	f.own[0], f.own[1] = sig, f.sig
	f.set(display, h, sig)
}
