// Package workspace fills a workspace directory from where a task's files
// come from: a host directory (copied), a git repository at a revision
// (cloned), or a tar file (unpacked). Batch mode fills each task's
// workspace this way, and a pooled session its slot.
//
// What is written stays inside the workspace: every file is made through
// os.Root on it, so no name and no symbolic link a source holds — "..", an
// absolute path, a link planted before a file of the same path — leads a
// write outside. Links are copied as links, never followed; set-id bits are
// dropped; named pipes, sockets and devices are left out. Nothing the source
// names is run: git runs without hooks, system or global configuration.
package workspace

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
)

// Source is where a workspace's files come from: one of Dir, Git or Tar, or
// none for an empty workspace.
type Source struct {
	// Dir is a host directory whose tree is copied.
	Dir string `json:"dir,omitempty"`
	// Git is a repository (a directory or a URL git can clone) cloned with
	// its history, its working tree checked out at Rev (HEAD when empty),
	// detached.
	Git string `json:"git,omitempty"`
	Rev string `json:"rev,omitempty"`
	// Tar is a tar file, gzipped or not, whose entries are relative to the
	// workspace.
	Tar string `json:"tar,omitempty"`
}

// Check says what is wrong with s without touching anything but the
// source's existence.
func (s Source) Check() error {
	n := 0
	for _, v := range []string{s.Dir, s.Git, s.Tar} {
		if v != "" {
			n++
		}
	}
	switch {
	case n > 1:
		return errors.New("a workspace comes from one source: a directory, a git repository or a tar file; give one")
	case s.Rev != "" && s.Git == "":
		return errors.New("a revision (rev) needs a git repository (git)")
	case strings.HasPrefix(s.Rev, "-"):
		return fmt.Errorf("git revision %q may not start with '-'", s.Rev)
	case strings.HasPrefix(s.Git, "-"):
		return fmt.Errorf("git repository %q may not start with '-'", s.Git)
	case s.Dir != "":
		fi, err := os.Stat(s.Dir)
		if err != nil {
			return fmt.Errorf("workspace directory: %w", err)
		}
		if !fi.IsDir() {
			return fmt.Errorf("workspace directory %s is not a directory", s.Dir)
		}
	case s.Tar != "":
		if _, err := os.Stat(s.Tar); err != nil {
			return fmt.Errorf("workspace tar file: %w", err)
		}
	case s.Git != "":
		if _, err := exec.LookPath("git"); err != nil {
			return errors.New("a git source needs git on this machine")
		}
	}
	return nil
}

// Fill fills dst, an existing directory (empty for a git source), from s.
// Skipped lists what was left out.
func (s Source) Fill(ctx context.Context, dst string) (skipped []string, err error) {
	if err := s.Check(); err != nil {
		return nil, err
	}
	switch {
	case s.Dir != "":
		return Copy(ctx, s.Dir, dst)
	case s.Git != "":
		return nil, Clone(ctx, s.Git, s.Rev, dst)
	case s.Tar != "":
		return Untar(ctx, s.Tar, dst)
	}
	return nil, nil
}

// keepMode is what a file keeps of its mode: permissions and the sticky
// bit, never set-user-id or set-group-id.
const keepMode = fs.ModePerm | fs.ModeSticky

// Copy copies the tree under src into dst (which exists): directories,
// regular files with their permissions and modification times, symbolic
// links as links. Skipped lists what was left out (named pipes, sockets,
// devices) as paths relative to src.
func Copy(ctx context.Context, src, dst string) (skipped []string, err error) {
	src, err = filepath.EvalSymlinks(src)
	if err != nil {
		return nil, fmt.Errorf("workspace: source: %w", err)
	}
	root, err := os.OpenRoot(dst)
	if err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	defer root.Close()
	type dirTime struct {
		name string
		info fs.FileInfo
	}
	var dirs []dirTime // modification times to set last, deepest first
	err = filepath.WalkDir(src, func(p string, d fs.DirEntry, werr error) error {
		if werr != nil {
			return werr
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case rel == ".":
			dirs = append(dirs, dirTime{".", info})
			return root.Chmod(".", info.Mode()&keepMode|0o700)
		case d.IsDir():
			if err := root.Mkdir(rel, 0o700); err != nil {
				return err
			}
			dirs = append(dirs, dirTime{rel, info})
			return nil
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return root.Symlink(target, rel)
		case d.Type().IsRegular():
			return copyFile(root, p, rel, info)
		default:
			skipped = append(skipped, rel)
			return nil
		}
	})
	if err != nil {
		return skipped, fmt.Errorf("workspace: copying %s: %w", src, err)
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		d := dirs[i]
		if err := root.Chmod(d.name, d.info.Mode()&keepMode); err != nil {
			return skipped, fmt.Errorf("workspace: %w", err)
		}
		_ = root.Chtimes(d.name, d.info.ModTime(), d.info.ModTime())
	}
	return skipped, nil
}

// copyFile copies the regular file p to rel in root.
func copyFile(root *os.Root, p, rel string, info fs.FileInfo) error {
	in, err := os.Open(p)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	// The kernel copies between the files (copy_file_range; a reflink where
	// the filesystem shares blocks).
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Chmod(info.Mode() & keepMode); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return root.Chtimes(rel, info.ModTime(), info.ModTime())
}

// Clone clones the git repository repo into dst (which must be empty or
// missing) and checks out rev (HEAD when empty), detached. It runs git
// without hooks, system or global configuration, terminal prompts, or
// anything the source repository's configuration names for a clone.
func Clone(ctx context.Context, repo, rev, dst string) error {
	if strings.HasPrefix(repo, "-") || strings.HasPrefix(rev, "-") {
		return fmt.Errorf("workspace: git %q at %q: neither may start with '-'", repo, rev)
	}
	if rev == "" {
		rev = "HEAD"
	}
	if err := git(ctx, "", "clone", "--quiet", "--no-local", "--no-checkout", "--", repo, dst); err != nil {
		return err
	}
	return git(ctx, dst, "checkout", "--quiet", "--detach", rev, "--")
}

// git runs git in dir with nothing of the machine's or the user's
// configuration, no hooks and no prompts.
func git(ctx context.Context, dir string, args ...string) error {
	full := append([]string{"-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "protocol.ext.allow=never"}, args...)
	if dir != "" {
		full = append([]string{"-C", dir}, full...)
	}
	cmd := exec.CommandContext(ctx, "git", full...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_TERMINAL_PROMPT=0", "GIT_ASKPASS=/bin/false", "SSH_ASKPASS=/bin/false")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(out.String())
		if len(msg) > 2000 {
			msg = msg[:2000] + "…"
		}
		return fmt.Errorf("workspace: git %s: %v: %s", args[0], err, msg)
	}
	return nil
}

// Untar unpacks the tar file name (gzipped or not) into dst (which exists).
// Skipped lists the entries left out (named pipes, devices). An entry that
// would land outside dst is an error.
func Untar(ctx context.Context, name, dst string) (skipped []string, err error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	defer f.Close()
	br := bufio.NewReader(f)
	var r io.Reader = br
	if magic, _ := br.Peek(2); bytes.Equal(magic, []byte{0x1f, 0x8b}) {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("workspace: tar file %s: %w", name, err)
		}
		defer zr.Close()
		r = zr
	}
	skipped, err = Unpack(ctx, r, dst)
	if err != nil {
		return skipped, fmt.Errorf("workspace: tar file %s: %w", name, err)
	}
	return skipped, nil
}

// Unpack unpacks the tar stream r into dst (which exists); see Untar.
func Unpack(ctx context.Context, r io.Reader, dst string) (skipped []string, err error) {
	root, err := os.OpenRoot(dst)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	tr := tar.NewReader(r)
	type dirTime struct {
		name string
		hdr  *tar.Header
	}
	var dirs []dirTime
	for {
		if err := ctx.Err(); err != nil {
			return skipped, err
		}
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return skipped, err
		}
		name, ok := entryName(hdr.Name)
		if !ok {
			return skipped, fmt.Errorf("entry %q leaves the workspace", hdr.Name)
		}
		if name == "." {
			continue
		}
		if dir := path.Dir(name); dir != "." {
			if err := root.MkdirAll(dir, 0o755); err != nil {
				return skipped, fmt.Errorf("entry %q: %w", hdr.Name, err)
			}
		}
		mode := fs.FileMode(hdr.Mode) & keepMode
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := root.Mkdir(name, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
				return skipped, fmt.Errorf("entry %q: %w", hdr.Name, err)
			}
			dirs = append(dirs, dirTime{name, hdr})
		case tar.TypeReg:
			if err := writeEntry(root, name, tr, mode); err != nil {
				return skipped, fmt.Errorf("entry %q: %w", hdr.Name, err)
			}
			_ = root.Chtimes(name, hdr.ModTime, hdr.ModTime)
		case tar.TypeSymlink:
			_ = root.Remove(name) // a later entry of the same name wins
			if err := root.Symlink(hdr.Linkname, name); err != nil {
				return skipped, fmt.Errorf("entry %q: %w", hdr.Name, err)
			}
		case tar.TypeLink:
			target, ok := entryName(hdr.Linkname)
			if !ok {
				return skipped, fmt.Errorf("entry %q links to %q, outside the workspace", hdr.Name, hdr.Linkname)
			}
			_ = root.Remove(name)
			if err := root.Link(target, name); err != nil {
				return skipped, fmt.Errorf("entry %q: %w", hdr.Name, err)
			}
		default:
			skipped = append(skipped, name)
		}
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		d := dirs[i]
		if err := root.Chmod(d.name, fs.FileMode(d.hdr.Mode)&keepMode|0o700); err != nil {
			return skipped, err
		}
		_ = root.Chtimes(d.name, d.hdr.ModTime, d.hdr.ModTime)
	}
	return skipped, nil
}

// entryName cleans a tar entry's name into a path relative to the
// workspace; ok is false for one that climbs out of it with "..". A leading
// "/" is dropped, as tar does.
func entryName(name string) (string, bool) {
	name = strings.TrimLeft(name, "/")
	for _, c := range strings.Split(name, "/") {
		if c == ".." {
			return "", false
		}
	}
	return path.Clean("./" + name), true
}

// writeEntry writes a regular file of a tar stream, replacing one of the
// same name.
func writeEntry(root *os.Root, name string, r io.Reader, mode fs.FileMode) error {
	if fi, err := root.Lstat(name); err == nil && !fi.Mode().IsRegular() {
		if err := root.Remove(name); err != nil {
			return err
		}
	}
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
