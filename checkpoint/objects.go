package checkpoint

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// ErrDamaged is returned when an object of a checkpoint is missing or does
// not match its name: the repository's objects were changed or removed since
// the checkpoint was taken.
var ErrDamaged = errors.New("checkpoint is damaged")

// maxObject bounds the objects read into memory.
const maxObject = 1 << 30

// objects reads objects through one git cat-file --batch, checking each
// against its name: what a restore writes is what the checkpoint recorded,
// whatever was done to the object files since.
type objects struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	newSum func() hash.Hash
}

func (s *Store) openObjects(ctx context.Context) (*objects, error) {
	cmd := s.git.command(ctx, s.git.readEnv(), "cat-file", "--batch")
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("checkpoint: git cat-file: %w", err)
	}
	o := &objects{cmd: cmd, in: in, out: bufio.NewReaderSize(out, 64<<10), newSum: sha1.New}
	if s.format == "sha256" {
		o.newSum = sha256.New
	}
	return o, nil
}

func (o *objects) close() {
	o.in.Close()
	_ = o.cmd.Wait()
}

// read returns the content of object oid, which must be of type want.
func (o *objects) read(oid, want string) ([]byte, error) {
	if _, err := fmt.Fprintf(o.in, "%s\n", oid); err != nil {
		return nil, fmt.Errorf("checkpoint: git cat-file: %w", err)
	}
	header, err := o.out.ReadString('\n')
	if err != nil {
		return nil, fmt.Errorf("checkpoint: git cat-file: %w", err)
	}
	f := strings.Fields(header)
	if len(f) == 2 && f[1] == "missing" {
		return nil, fmt.Errorf("%w: object %s is missing", ErrDamaged, oid)
	}
	if len(f) != 3 {
		return nil, fmt.Errorf("checkpoint: git cat-file: unexpected %q", header)
	}
	size, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil || size < 0 || size > maxObject {
		return nil, fmt.Errorf("checkpoint: object %s: size %q", oid, f[2])
	}
	data := make([]byte, size+1)
	if _, err := io.ReadFull(o.out, data); err != nil {
		return nil, fmt.Errorf("checkpoint: git cat-file: %w", err)
	}
	data = data[:size]
	if f[1] != want {
		return nil, fmt.Errorf("%w: object %s is a %s, not a %s", ErrDamaged, oid, f[1], want)
	}
	h := o.newSum()
	fmt.Fprintf(h, "%s %d\x00", f[1], size)
	h.Write(data)
	if hex.EncodeToString(h.Sum(nil)) != oid {
		return nil, fmt.Errorf("%w: object %s does not match its content", ErrDamaged, oid)
	}
	return data, nil
}

// treeEntry is one entry of a tree object.
type treeEntry struct {
	mode string // "100644", "100755", "120000", "40000", "160000"
	name string
	oid  string
}

func (e treeEntry) isTree() bool { return e.mode == "40000" }

// tree reads and parses tree object oid.
func (o *objects) tree(oid string) ([]treeEntry, error) {
	data, err := o.read(oid, "tree")
	if err != nil {
		return nil, err
	}
	n := o.newSum().Size()
	var out []treeEntry
	for len(data) > 0 {
		sp := bytes.IndexByte(data, ' ')
		nul := bytes.IndexByte(data, 0)
		if sp < 0 || nul < sp || nul+1+n > len(data) {
			return nil, fmt.Errorf("%w: tree %s is malformed", ErrDamaged, oid)
		}
		e := treeEntry{mode: string(data[:sp]), name: string(data[sp+1 : nul]), oid: hex.EncodeToString(data[nul+1 : nul+1+n])}
		if e.name == "" || e.name == "." || e.name == ".." || strings.ContainsRune(e.name, '/') || strings.EqualFold(e.name, ".git") {
			return nil, fmt.Errorf("%w: tree %s has an entry named %q", ErrDamaged, oid, e.name)
		}
		out = append(out, e)
		data = data[nul+1+n:]
	}
	return out, nil
}

// commitTree reads commit oid and returns its tree.
func (o *objects) commitTree(oid string) (string, error) {
	data, err := o.read(oid, "commit")
	if err != nil {
		return "", err
	}
	line, _, _ := bytes.Cut(data, []byte{'\n'})
	t, ok := bytes.CutPrefix(line, []byte("tree "))
	if !ok {
		return "", fmt.Errorf("%w: commit %s has no tree", ErrDamaged, oid)
	}
	return string(t), nil
}

// newSum is the hash of the store's object format.
func (s *Store) newSum() hash.Hash {
	if s.format == "sha256" {
		return sha256.New()
	}
	return sha1.New()
}

// sumLen is the length of an object name of the store's format, in bytes.
func (s *Store) sumLen() int { return s.newSum().Size() }

// writeBlob stores data as a blob in corral's own object directory, as a
// loose object (unless it is there already), and returns its name.
func (s *Store) writeBlob(data []byte) (string, error) {
	h := s.newSum()
	header := fmt.Sprintf("blob %d\x00", len(data))
	io.WriteString(h, header)
	h.Write(data)
	oid := hex.EncodeToString(h.Sum(nil))
	dir := filepath.Join(s.git.objects, oid[:2])
	name := filepath.Join(dir, oid[2:])
	if _, err := os.Lstat(name); err == nil {
		return oid, nil
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("checkpoint: storing a blob: %w", err)
	}
	f, err := os.CreateTemp(dir, "tmp_obj_")
	if err != nil {
		return "", fmt.Errorf("checkpoint: storing a blob: %w", err)
	}
	zw, _ := zlib.NewWriterLevel(f, zlib.BestSpeed)
	_, err = io.WriteString(zw, header)
	if err == nil {
		_, err = zw.Write(data)
	}
	if err == nil {
		err = zw.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), name)
	}
	if err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("checkpoint: storing a blob: %w", err)
	}
	return oid, nil
}
