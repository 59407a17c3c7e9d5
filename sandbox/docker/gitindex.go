package docker

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"slices"
	"strings"
)

// A git index is read by git on the host as the state of the worktree: what
// is staged, and which paths are submodules (gitlinks), into whose .git git
// status then looks. Its extensions carry caches and, with a split index
// ("link"), the name of another file to read. checkIndex reads an index a
// command wrote, as git's read-cache.c lays it out (versions 2 to 4), and
// returns what may be copied to the host: the same entries, with only the
// extensions that hold data derived from them and that git checks against
// them (REUC, sdir). Not the cache tree (TREE): git on the host trusts it
// without looking at the entries — a commit writes the trees it names for
// the directories it says are valid — so a command's cache tree would put
// its own files in the user's next commit, unseen by git status and diff;
// without it git rebuilds the trees from the entries.

// gitIndexEntry is what checkIndex keeps of an entry.
type gitIndexEntry struct {
	path  string
	mode  uint32
	off   int    // where the entry starts
	flags uint16 // its flags
	ext   uint16 // its extended flags (version 3 and up), 0 when none
}

// Entry flags (read-cache.c, cache.h) that make git on the host look away
// from a path: assume-unchanged (CE_VALID) and skip-worktree. With either,
// git status and git diff show no change to the file, whatever it holds.
// (fsmonitor-valid lives in the FSMN extension, never copied;
// intent-to-add only makes a path show as new.)
const (
	indexFlagValid        = 0x8000 // in flags
	indexFlagExtended     = 0x4000 // in flags: an extended flags word follows
	indexExtSkipWorktree  = 0x4000 // in the extended flags
	indexExtIntentToAdd   = 0x2000 // in the extended flags
	indexStatSize         = 40     // ctime, mtime, dev, ino, mode, uid, gid, size
	indexStatModeOff      = 24
	indexStatModeEnd      = 28
	indexExtKnown         = indexExtSkipWorktree | indexExtIntentToAdd
	indexHidingExtFlags   = indexExtSkipWorktree
	indexHidingEntryFlags = indexFlagValid
)

const (
	gitModeLink  = 0o160000
	gitModeMask  = 0o170000
	indexMaxSize = 1 << 30
)

// indexKeep are the extensions an index copied to the host may keep.
var indexKeep = map[string]bool{"REUC": true, "sdir": true}

// parseIndex reads an index. hashLen is the repository's object id length
// (20 for SHA-1, 32 for SHA-256).
func parseIndex(b []byte, hashLen int) (entries []gitIndexEntry, exts [][]byte, bodyEnd int, err error) {
	if len(b) < 12+hashLen || string(b[:4]) != "DIRC" {
		return nil, nil, 0, errors.New("not a git index")
	}
	version := binary.BigEndian.Uint32(b[4:])
	if version < 2 || version > 4 {
		return nil, nil, 0, fmt.Errorf("index version %d", version)
	}
	n := binary.BigEndian.Uint32(b[8:])
	end := len(b) - hashLen // the trailer: a checksum of everything before
	off := 12
	var prev string
	for i := uint32(0); i < n; i++ {
		fixed := 40 + hashLen + 2
		if off+fixed > end {
			return nil, nil, 0, errors.New("index entries run past the end")
		}
		start := off
		mode := binary.BigEndian.Uint32(b[off+24:])
		flags := binary.BigEndian.Uint16(b[off+40+hashLen:])
		var ext uint16
		if flags&indexFlagExtended != 0 {
			if version < 3 {
				return nil, nil, 0, errors.New("extended index entry in a version 2 index")
			}
			fixed += 2
			if off+fixed > end {
				return nil, nil, 0, errors.New("index entries run past the end")
			}
			if ext = binary.BigEndian.Uint16(b[off+40+hashLen+2:]); ext&^indexExtKnown != 0 {
				return nil, nil, 0, fmt.Errorf("unknown extended flags %#x in index", ext)
			}
		}
		p := off + fixed
		var name string
		if version == 4 {
			strip, k := indexVarint(b[p:end])
			if k == 0 || strip > uint64(len(prev)) {
				return nil, nil, 0, errors.New("bad path compression in index")
			}
			p += k
			z := bytes.IndexByte(b[p:end], 0)
			if z < 0 {
				return nil, nil, 0, errors.New("unterminated path in index")
			}
			name = prev[:len(prev)-int(strip)] + string(b[p:p+z])
			off = p + z + 1
		} else {
			z := bytes.IndexByte(b[p:end], 0)
			if z < 0 {
				return nil, nil, 0, errors.New("unterminated path in index")
			}
			name = string(b[p : p+z])
			// Entries are padded with 1 to 8 NULs to a multiple of 8 bytes.
			off += (fixed + z + 8) &^ 7
			if off > end {
				return nil, nil, 0, errors.New("index entries run past the end")
			}
		}
		if err := checkIndexPath(name, mode); err != nil {
			return nil, nil, 0, err
		}
		entries = append(entries, gitIndexEntry{path: name, mode: mode, off: start, flags: flags, ext: ext})
		prev = name
	}
	bodyEnd = off
	for off < end {
		if off+8 > end {
			return nil, nil, 0, errors.New("truncated index extension")
		}
		size := int(binary.BigEndian.Uint32(b[off+4:]))
		if size < 0 || off+8+size > end {
			return nil, nil, 0, errors.New("index extension runs past the end")
		}
		exts = append(exts, b[off:off+8+size])
		off += 8 + size
	}
	return entries, exts, bodyEnd, nil
}

// indexVarint decodes git's offset varint; k is 0 when it is malformed.
func indexVarint(b []byte) (v uint64, k int) {
	if len(b) == 0 {
		return 0, 0
	}
	c := b[0]
	v = uint64(c & 127)
	k = 1
	for c&128 != 0 {
		if k >= len(b) || k > 9 {
			return 0, 0
		}
		v++
		c = b[k]
		k++
		v = v<<7 + uint64(c&127)
	}
	return v, k
}

// checkIndexPath refuses what git's verify_path refuses, so that an index
// cannot make git on the host check a file out into .git or outside the
// worktree.
func checkIndexPath(name string, mode uint32) error {
	if name == "" || strings.HasPrefix(name, "/") || strings.HasSuffix(name, "/") && mode&gitModeMask != 0o040000 {
		return fmt.Errorf("index path %q", name)
	}
	for _, part := range strings.Split(strings.TrimSuffix(name, "/"), "/") {
		trimmed := strings.TrimRight(part, ". ")
		if part == "" || part == "." || part == ".." || strings.EqualFold(trimmed, ".git") || strings.EqualFold(part, "git~1") {
			return fmt.Errorf("index path %q", name)
		}
		for _, r := range part {
			if r < 0x20 || r == 0x7f {
				return fmt.Errorf("index path %q has a control character", name)
			}
		}
	}
	switch mode & gitModeMask {
	case 0o100000, 0o120000, gitModeLink, 0o040000:
	default:
		return fmt.Errorf("index path %q has mode %o", name, mode)
	}
	return nil
}

// checkIndex validates an index a command wrote and returns what may go to
// the host: unknown and pointer-bearing extensions dropped (a split index,
// whose entries live in another file, is refused), the checksum remade.
// Every gitlink must be one of links, the submodules the host's index had.
//
// Nothing in it may hide a change from the user's git status and git diff
// (hostIndex is the host's index, nil when there is none):
//   - assume-unchanged and skip-worktree are cleared on every entry whose
//     path did not have them in the host's index (a sparse directory entry,
//     which cannot be without skip-worktree, is refused);
//   - the stat data of every entry not the same as the host's (stat data,
//     mode, object id and flags) is zeroed, as git's read-tree leaves it, so
//     that git on the host compares the file's content with the entry's
//     object instead of trusting a size, times and inode a command wrote
//     to match a file it changed.
func checkIndex(b []byte, hashLen int, links map[string]bool, hostIndex []byte) ([]byte, error) {
	if len(b) > indexMaxSize {
		return nil, errors.New("the index is too large")
	}
	entries, exts, bodyEnd, err := parseIndex(b, hashLen)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if e.mode&gitModeMask == gitModeLink && !links[e.path] {
			return nil, fmt.Errorf("it adds a submodule at %s", e.path)
		}
	}
	// What the host's index had, by path (a path has up to 3 stages during
	// a merge; each is looked at).
	type hostEntry struct {
		fixed        []byte // stat data, mode, object id
		flags, ext   uint16
		valid, skipW bool
	}
	host := map[string][]hostEntry{}
	if hostEntries, _, _, err := parseIndex(hostIndex, hashLen); err == nil {
		for _, e := range hostEntries {
			host[e.path] = append(host[e.path], hostEntry{
				fixed: hostIndex[e.off : e.off+indexStatSize+hashLen],
				flags: e.flags, ext: e.ext,
				valid: e.flags&indexFlagValid != 0, skipW: e.ext&indexExtSkipWorktree != 0,
			})
		}
	}
	out := bytes.NewBuffer(make([]byte, 0, len(b)))
	out.Write(b[:bodyEnd])
	body := out.Bytes()
	changed := false
	for _, e := range entries {
		hs := host[e.path]
		had := func(f func(hostEntry) bool) bool { return slices.ContainsFunc(hs, f) }
		fl := e.off + indexStatSize + hashLen
		if e.flags&indexFlagValid != 0 && !had(func(h hostEntry) bool { return h.valid }) {
			binary.BigEndian.PutUint16(body[fl:], e.flags&^indexFlagValid)
			changed = true
		}
		if e.ext&indexExtSkipWorktree != 0 && !had(func(h hostEntry) bool { return h.skipW }) {
			if e.mode&gitModeMask == 0o040000 {
				return nil, fmt.Errorf("it makes %s a sparse directory", e.path)
			}
			binary.BigEndian.PutUint16(body[fl+2:], e.ext&^indexExtSkipWorktree)
			changed = true
		}
		fixed := body[e.off : e.off+indexStatSize+hashLen]
		flags := binary.BigEndian.Uint16(body[fl:])
		var ext uint16
		if flags&indexFlagExtended != 0 {
			ext = binary.BigEndian.Uint16(body[fl+2:])
		}
		// (An extended flags word of 0 is as none.)
		same := had(func(h hostEntry) bool {
			return bytes.Equal(h.fixed, fixed) && h.flags&^indexFlagExtended == flags&^indexFlagExtended && h.ext == ext
		})
		if !same && !(allZero(fixed[:indexStatModeOff]) && allZero(fixed[indexStatModeEnd:indexStatSize])) {
			clear(fixed[:indexStatModeOff])
			clear(fixed[indexStatModeEnd:indexStatSize])
			changed = true
		}
	}
	for _, x := range exts {
		sig := string(x[:4])
		if sig == "link" {
			return nil, errors.New("it is a split index")
		}
		if !indexKeep[sig] {
			changed = true
			continue
		}
		out.Write(x)
	}
	if !changed {
		return b, nil
	}
	var h hash.Hash = sha1.New()
	if hashLen == 32 {
		h = sha256.New()
	}
	h.Write(out.Bytes())
	return h.Sum(out.Bytes()), nil
}

// indexLinks returns the gitlink paths of an index, nil when it cannot be read.
func indexLinks(b []byte, hashLen int) []string {
	entries, _, _, err := parseIndex(b, hashLen)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if e.mode&gitModeMask == gitModeLink {
			out = append(out, e.path)
		}
	}
	return out
}

// checkRefName is a cautious form of git's check-ref-format for a ref a
// command names in HEAD or packed-refs.
func checkRefName(name string) error {
	if !strings.HasPrefix(name, "refs/") || len(name) > 1024 || strings.Contains(name, "..") ||
		strings.Contains(name, "//") || strings.Contains(name, "@{") || strings.HasSuffix(name, "/") ||
		strings.HasSuffix(name, ".lock") || strings.HasSuffix(name, ".") || strings.ContainsAny(name, " ~^:?*[\\") {
		return fmt.Errorf("ref name %q", name)
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("ref name %q has a control character", name)
		}
	}
	for _, part := range strings.Split(name, "/") {
		if part == "" || strings.HasPrefix(part, ".") {
			return fmt.Errorf("ref name %q", name)
		}
	}
	return nil
}

// isHexID reports whether s is an object id of hashLen bytes in hex.
func isHexID(s string, hashLen int) bool {
	if len(s) != 2*hashLen {
		return false
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// checkHead validates HEAD (a symbolic ref or a detached object id) and
// ORIG_HEAD (an object id).
func checkHead(b []byte, hashLen int, symbolic bool) error {
	s, ok := strings.CutSuffix(string(b), "\n")
	if !ok || strings.Contains(s, "\n") {
		return errors.New("not one line")
	}
	if target, ok := strings.CutPrefix(s, "ref: "); ok && symbolic {
		if corralRef(target) {
			// The user's commits would go where no command sees them,
			// and the next deletion's copy would overwrite them.
			return errors.New("a ref of corral's")
		}
		return checkRefName(target)
	}
	if !isHexID(s, hashLen) {
		return errors.New("not an object id")
	}
	return nil
}

// checkPackedRefs validates packed-refs line by line.
func checkPackedRefs(b []byte, hashLen int) error {
	s, ok := strings.CutSuffix(string(b), "\n")
	if !ok && len(b) > 0 {
		return errors.New("no final newline")
	}
	if len(b) == 0 {
		return nil
	}
	for i, line := range strings.Split(s, "\n") {
		switch {
		case i == 0 && strings.HasPrefix(line, "# pack-refs with:"):
			for _, r := range line {
				if r < 0x20 || r == 0x7f {
					return errors.New("control character in the header")
				}
			}
		case strings.HasPrefix(line, "^"):
			if !isHexID(line[1:], hashLen) {
				return fmt.Errorf("line %d", i+1)
			}
		default:
			id, name, ok := strings.Cut(line, " ")
			if !ok || !isHexID(id, hashLen) {
				return fmt.Errorf("line %d", i+1)
			}
			if err := checkRefName(name); err != nil {
				return fmt.Errorf("line %d: %w", i+1, err)
			}
		}
	}
	return nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
