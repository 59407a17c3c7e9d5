// Package records keeps corral's records out of the workspace. Commands may
// rewrite anything in the workspace, so an events file, the bash logs or a
// results file written there could be replaced by a command — a forged
// record of the run, read later by CI or a reviewer as corral's.
package records

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Resolve returns the real path path stands for: the longest part of it that
// exists with its links resolved, and the rest as given. path need not
// exist.
func Resolve(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	rest := ""
	for dir := abs; ; {
		real, err := filepath.EvalSymlinks(dir)
		if err == nil {
			return filepath.Join(real, rest), nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return abs, nil
		}
		rest = filepath.Join(filepath.Base(dir), rest)
		dir = parent
	}
}

// Inside says whether path, resolved, is the workspace ws or below it.
func Inside(ws, path string) (bool, error) {
	if ws == "" || path == "" {
		return false, nil
	}
	rws, err := Resolve(ws)
	if err != nil {
		return false, err
	}
	rp, err := Resolve(path)
	if err != nil {
		return false, err
	}
	rel, err := filepath.Rel(rws, rp)
	if err != nil {
		return false, nil
	}
	return rel == "." || (rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))), nil
}

// Check refuses a record (what: "--events", "--log-dir", ...) at path when it
// resolves inside the workspace ws, with an error that says where to put it.
func Check(ws, what, path string) error {
	in, err := Inside(ws, path)
	if err != nil {
		return fmt.Errorf("%s %s: %w", what, path, err)
	}
	if in {
		return fmt.Errorf("%s %s is inside the workspace %s, where a command can rewrite it: put it outside the workspace, e.g. %s", what, path, ws, Suggest(path))
	}
	return nil
}

// Suggest names a place outside any workspace for a record named like path:
// in $RUNNER_TEMP (GitHub Actions) when set, else in the system's temporary
// directory.
func Suggest(path string) string {
	dir := os.Getenv("RUNNER_TEMP")
	if dir == "" {
		dir = os.TempDir()
	}
	return filepath.Join(dir, filepath.Base(path))
}

// CheckFile refuses an open file f (corral run's standard output, redirected
// to a file) when it is a regular file inside the workspace ws. what names it
// ("the results (standard output)").
func CheckFile(ws, what string, f *os.File) error {
	if ws == "" || f == nil {
		return nil
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return nil // a terminal, a pipe: nothing a command can rewrite
	}
	path, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(f.Fd())))
	if err != nil || !filepath.IsAbs(path) {
		return nil // no way to name it here
	}
	in, err := Inside(ws, path)
	if err != nil || !in {
		return nil
	}
	return fmt.Errorf("%s go to %s, inside the workspace %s, where a command can rewrite them: redirect them outside the workspace, e.g. > %s", what, path, ws, Suggest(path))
}
