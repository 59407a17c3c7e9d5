// Package wsarchive moves a workspace tree as a tar stream: the host
// uploads a directory into a sandbox pod and downloads it back, the agent
// unpacks and packs it there. Unpacking is confined to its directory
// (os.Root: no "..", no absolute name, no way through a symbolic link), makes
// no set-id, device or special file, and stops at a size bound; the host
// trusts nothing in a stream a sandbox wrote but what is written here.
package wsarchive

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// Pack writes the tree under dir to w as a tar stream: regular files,
// directories and symbolic links (as links), with their modes and
// modification times; other files (sockets, devices, FIFOs) are left out.
// skip, when not nil, leaves out a path (slash-separated, relative to dir)
// and, for a directory, what is below it.
func Pack(w io.Writer, dir string, skip func(rel string, isDir bool) bool) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	tw := tar.NewWriter(w)
	err = fs.WalkDir(root.FS(), ".", func(rel string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if rel == "." {
			return nil
		}
		if skip != nil && skip(rel, d.IsDir()) {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		h := &tar.Header{Name: rel, Mode: int64(fi.Mode().Perm()), ModTime: fi.ModTime(), Format: tar.FormatPAX}
		switch {
		case fi.Mode().IsRegular():
			h.Typeflag, h.Size = tar.TypeReg, fi.Size()
		case fi.IsDir():
			h.Typeflag, h.Name = tar.TypeDir, rel+"/"
		case fi.Mode()&fs.ModeSymlink != 0:
			h.Typeflag = tar.TypeSymlink
			if h.Linkname, err = root.Readlink(rel); err != nil {
				return err
			}
		default:
			return nil
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if h.Typeflag != tar.TypeReg {
			return nil
		}
		f, err := root.Open(rel)
		if err != nil {
			return err
		}
		defer f.Close()
		// A file that grows while it is read is cut at the size the
		// header gave; one that shrinks is an error.
		if _, err := io.CopyN(tw, f, h.Size); err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// ErrTooLarge says a stream unpacks to more than its bound.
var ErrTooLarge = errors.New("the archive is larger than its bound")

// Options bound and filter Unpack.
type Options struct {
	// MaxBytes bounds the bytes of file content written; 0 means no bound.
	MaxBytes int64
	// Skip, when not nil, leaves out an entry (slash-separated name,
	// relative); Skipped lists those it left out.
	Skip func(rel string, isDir bool) bool
}

// Result says what Unpack did.
type Result struct {
	Files, Bytes int64
	// Skipped lists the entries left out: by Options.Skip, or as special
	// files or hard links, each "NAME (WHY)".
	Skipped []string
}

// Unpack writes the tar stream r into dir, which must exist: regular files
// (mode bits rwx only: no set-id, no sticky), directories and symbolic
// links. Every name is resolved inside dir through os.Root, so no entry
// reaches outside it, whatever links earlier entries made. An existing
// file is replaced (a fresh file renamed over it); a directory stays.
func Unpack(r io.Reader, dir string, o Options) (Result, error) {
	var res Result
	root, err := os.OpenRoot(dir)
	if err != nil {
		return res, err
	}
	defer root.Close()
	tr := tar.NewReader(r)
	type stamp struct {
		name string
		t    time.Time
	}
	var dirTimes []stamp
	var skippedDirs []string // what is below them is left out, unlisted
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return res, fmt.Errorf("read the archive: %w", err)
		}
		name, ok := cleanName(h.Name)
		if !ok {
			return res, fmt.Errorf("archive entry %q: a name must be relative, without \"..\"", h.Name)
		}
		if name == "." {
			continue
		}
		isDir := h.Typeflag == tar.TypeDir
		if under(name, skippedDirs) {
			continue
		}
		if o.Skip != nil && o.Skip(name, isDir) {
			res.Skipped = append(res.Skipped, name+" (protected)")
			if isDir {
				skippedDirs = append(skippedDirs, name)
			}
			continue
		}
		mode := fs.FileMode(h.Mode).Perm()
		if dirOf := path.Dir(name); dirOf != "." {
			if err := root.MkdirAll(dirOf, 0o755); err != nil {
				return res, fmt.Errorf("%s: %w", name, err)
			}
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := root.Mkdir(name, mode|0o700); err != nil && !errors.Is(err, fs.ErrExist) {
				return res, fmt.Errorf("%s: %w", name, err)
			}
			if fi, err := root.Lstat(name); err != nil || !fi.IsDir() {
				return res, fmt.Errorf("%s: not a directory in the destination", name)
			}
			_ = root.Chmod(name, mode|0o700)
			dirTimes = append(dirTimes, stamp{name, h.ModTime})
		case tar.TypeReg:
			if o.MaxBytes > 0 && res.Bytes+h.Size > o.MaxBytes {
				return res, fmt.Errorf("%w (%d bytes)", ErrTooLarge, o.MaxBytes)
			}
			if err := writeFile(root, name, tr, h.Size, mode); err != nil {
				return res, fmt.Errorf("%s: %w", name, err)
			}
			_ = root.Chtimes(name, h.ModTime, h.ModTime)
			res.Files++
			res.Bytes += h.Size
		case tar.TypeSymlink:
			_ = root.Remove(name)
			if err := root.Symlink(h.Linkname, name); err != nil {
				return res, fmt.Errorf("%s: %w", name, err)
			}
			res.Files++
		default:
			res.Skipped = append(res.Skipped, name+" (not a regular file, directory or symbolic link)")
		}
	}
	for i := len(dirTimes) - 1; i >= 0; i-- {
		_ = root.Chtimes(dirTimes[i].name, dirTimes[i].t, dirTimes[i].t)
	}
	return res, nil
}

// writeFile writes n bytes of r as name: a temporary file beside it,
// renamed over it.
func writeFile(root *os.Root, name string, r io.Reader, n int64, mode fs.FileMode) error {
	tmp := path.Join(path.Dir(name), fmt.Sprintf(".corral-unpack-%d", time.Now().UnixNano()))
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = io.CopyN(f, r, n)
	if err == nil {
		err = f.Chmod(mode)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		if fi, lerr := root.Lstat(name); lerr == nil && fi.IsDir() {
			err = fmt.Errorf("a directory is in the way")
		}
	}
	if err == nil {
		err = root.Rename(tmp, name)
	}
	if err != nil {
		_ = root.Remove(tmp)
	}
	return err
}

// under says whether name is below one of dirs.
func under(name string, dirs []string) bool {
	for _, d := range dirs {
		if strings.HasPrefix(name, d+"/") {
			return true
		}
	}
	return false
}

// cleanName makes an archive name relative and clean; ok is false for an
// absolute one or one that climbs out.
func cleanName(name string) (string, bool) {
	if name == "" || strings.HasPrefix(name, "/") || filepath.IsAbs(name) || strings.Contains(name, "\x00") {
		return "", false
	}
	c := path.Clean(name)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", false
	}
	return c, true
}
