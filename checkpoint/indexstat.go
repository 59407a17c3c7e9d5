package checkpoint

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"hash"
	"os"
	"path/filepath"
	"time"
)

// statData is what git's index keeps of a file's stat(2) to tell, without
// reading it, that the file still has its entry's content.
type statData struct {
	ok                 bool // none when false: the entry keeps zeros
	ctimeS, ctimeNs    uint32
	mtimeS, mtimeNs    uint32
	dev, ino, uid, gid uint32
	size               uint32
}

// recentWindow: a file whose ctime or mtime is less than this before a
// checkpoint began gets no stat data in corral's index. Its stat data could
// be the same after a change made after corral read it, within the same
// tick of the filesystem's clock, and git's racy rule, which compares a
// file's mtime with the index's, misses such a change when the index is
// written in a later tick. Without stat data, the next checkpoint compares
// the file's content (a few files: the ones a call just changed).
const recentWindow = time.Second

// since says whether the file changed (its ctime or mtime) at t or after.
func (st statData) since(t time.Time) bool {
	return !time.Unix(int64(st.ctimeS), int64(st.ctimeNs)).Before(t) ||
		!time.Unix(int64(st.mtimeS), int64(st.mtimeNs)).Before(t)
}

// statEntry is a path corral read by descriptor and stored as blob oid (raw
// bytes), with the stat data of that descriptor.
type statEntry struct {
	oid  []byte
	stat statData
}

// setIndexStat puts into the index file name the stat data of the entries
// in want (by path) whose object is the one corral stored for them, in
// place of the zeros git gives the entries of update-index --index-info, so
// that the next ls-files need not read and hash those files again. It says
// how many entries it gave stat data. An index it does not know how to
// write (a split index, an unknown version) is left as it is. The caller
// holds the lock; git's racy rule still applies: an entry whose file is not
// older than the index is compared by content.
func setIndexStat(name string, sumLen int, want map[string]statEntry) (int, error) {
	data, err := readPlain(name, 1<<34) // corral's own file
	if err != nil {
		return 0, err
	}
	n, err := patchIndexStat(data, sumLen, want)
	if err != nil || n == 0 {
		return 0, err
	}
	f, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".tmp-*")
	if err != nil {
		return 0, err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), name)
	}
	if err != nil {
		os.Remove(f.Name())
		return 0, err
	}
	return n, nil
}

// errIndexFormat is an index patchIndexStat leaves alone.
var errIndexFormat = errors.New("an index corral does not write")

// patchIndexStat writes the stat data of want into the entries of the index
// data (versions 2 to 4), and its checksum anew. It returns how many entries
// it changed; on errIndexFormat data is unchanged.
func patchIndexStat(data []byte, sumLen int, want map[string]statEntry) (int, error) {
	if len(data) < 12+sumLen || string(data[:4]) != "DIRC" {
		return 0, errIndexFormat
	}
	version := binary.BigEndian.Uint32(data[4:8])
	if version < 2 || version > 4 {
		return 0, errIndexFormat
	}
	count := binary.BigEndian.Uint32(data[8:12])
	end := len(data) - sumLen
	off := 12
	var prev []byte
	type patch struct {
		off int
		st  statData
	}
	var patches []patch
	for range count {
		start := off
		if off+62-20+sumLen > end {
			return 0, errIndexFormat
		}
		off += 40
		oid := data[off : off+sumLen]
		off += sumLen
		flags := binary.BigEndian.Uint16(data[off : off+2])
		off += 2
		if flags&0x4000 != 0 {
			if version < 3 || off+2 > end {
				return 0, errIndexFormat
			}
			off += 2
		}
		var path []byte
		if version == 4 {
			strip, n := indexVarint(data[off:end])
			if n == 0 || strip > uint64(len(prev)) {
				return 0, errIndexFormat
			}
			off += n
			nul := bytes.IndexByte(data[off:end], 0)
			if nul < 0 {
				return 0, errIndexFormat
			}
			path = append(append([]byte(nil), prev[:len(prev)-int(strip)]...), data[off:off+nul]...)
			off += nul + 1
			prev = path
		} else {
			nul := bytes.IndexByte(data[off:end], 0)
			if nul < 0 {
				return 0, errIndexFormat
			}
			path = data[off : off+nul]
			// The entry is padded with 1 to 8 NULs to a multiple of 8.
			off = start + (off-start+nul+8)&^7
			if off > end {
				return 0, errIndexFormat
			}
		}
		if flags&0x3000 != 0 { // a conflict's stage
			continue
		}
		if w, ok := want[string(path)]; ok && w.stat.ok && bytes.Equal(w.oid, oid) {
			patches = append(patches, patch{start, w.stat})
		}
	}
	// Extensions: a split index's entries are elsewhere.
	for off+8 <= end {
		sig := string(data[off : off+4])
		if sig == "link" || sig == "sdir" {
			return 0, errIndexFormat
		}
		off += 8 + int(binary.BigEndian.Uint32(data[off+4:off+8]))
	}
	if off != end {
		return 0, errIndexFormat
	}
	if len(patches) == 0 {
		return 0, nil
	}
	for _, p := range patches {
		b := data[p.off:]
		st := p.st
		for i, v := range []uint32{st.ctimeS, st.ctimeNs, st.mtimeS, st.mtimeNs, st.dev, st.ino} {
			binary.BigEndian.PutUint32(b[4*i:], v)
		}
		// b[24:28] is the entry's mode, git's own.
		binary.BigEndian.PutUint32(b[28:], st.uid)
		binary.BigEndian.PutUint32(b[32:], st.gid)
		binary.BigEndian.PutUint32(b[36:], st.size)
	}
	// A checksum of zeros is an index written without one (index.skipHash).
	if !allZero(data[end:]) {
		h := newSumOfLen(sumLen)
		h.Write(data[:end])
		copy(data[end:], h.Sum(nil))
	}
	return len(patches), nil
}

// indexVarint decodes the variable-length integer of an index of version 4
// (that of a pack's offset deltas), returning it and its length; 0 for none.
func indexVarint(b []byte) (uint64, int) {
	if len(b) == 0 {
		return 0, 0
	}
	c := b[0]
	v := uint64(c & 127)
	n := 1
	for c&128 != 0 {
		if n >= len(b) || n > 9 {
			return 0, 0
		}
		c = b[n]
		n++
		v = ((v + 1) << 7) | uint64(c&127)
	}
	return v, n
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// newSumOfLen is the hash whose sums are sumLen bytes long.
func newSumOfLen(sumLen int) hash.Hash {
	if sumLen == sha256.Size {
		return sha256.New()
	}
	return sha1.New()
}
