package control

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestPolicyFilePrivate: a session's policy file is made in the user's
// private state directory (0700, the user's), not in a shared temporary one.
func TestPolicyFilePrivate(t *testing.T) {
	state := t.TempDir()
	t.Setenv("XDG_STATE_HOME", state)
	text := "[policy]\n"
	var undo []func()
	defer func() {
		for _, f := range undo {
			f()
		}
	}()
	cfg, err := (&Server{}).config(SessionOptions{Policy: &text}, &undo)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(cfg.PolicyFile, state+string(filepath.Separator)) {
		t.Fatalf("policy file %s, want one below %s", cfg.PolicyFile, state)
	}
	for d := filepath.Dir(cfg.PolicyFile); d != state; d = filepath.Dir(d) {
		fi, err := os.Lstat(d)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o700 || int(fi.Sys().(*syscall.Stat_t).Uid) != os.Geteuid() {
			t.Errorf("%s: mode %v, uid %d; want 0700, uid %d", d, fi.Mode().Perm(), fi.Sys().(*syscall.Stat_t).Uid, os.Geteuid())
		}
	}
}
