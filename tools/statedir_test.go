package tools

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/corralhq/corral/policy"
)

// TestLogDirPrivate: without a LogDir, bash's logs go in a directory made in
// the user's private state directory (0700, the user's), not in a shared
// temporary one.
func TestLogDirPrivate(t *testing.T) {
	state := t.TempDir()
	t.Setenv("XDG_STATE_HOME", state)
	p, err := policy.New(policy.Options{Workspace: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	sh, err := newShell(&Session{opts: Options{Policy: p}})
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(sh.logDir)
	if !strings.HasPrefix(sh.logDir, state+string(filepath.Separator)) {
		t.Fatalf("log directory %s, want one below %s", sh.logDir, state)
	}
	for d := sh.logDir; d != state; d = filepath.Dir(d) {
		fi, err := os.Lstat(d)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o700 || int(fi.Sys().(*syscall.Stat_t).Uid) != os.Geteuid() {
			t.Errorf("%s: mode %v, uid %d; want 0700, uid %d", d, fi.Mode().Perm(), fi.Sys().(*syscall.Stat_t).Uid, os.Geteuid())
		}
	}
}
