package tools

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestWriteOwner: with corral as root, on a workspace of uid 1001, the file
// write creates and the directories it makes for it belong to 1001, as the
// user's own tools would have made them; a file of root's it overwrites
// stays root's.
func TestWriteOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to write in another user's workspace")
	}
	if agentMode {
		t.Skip("through the agent, files are made by the commands' user")
	}
	ws := t.TempDir()
	if err := os.Chown(ws, 1001, 1001); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "roots.txt"), []byte("r\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := NewSession(context.Background(), Options{Workspace: ws, WritePolicy: AllowOverwrite})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mustOK(t, s, "write", m{"path": "sub/dir/new.txt", "content": "x\n"})
	mustOK(t, s, "write", m{"path": "roots.txt", "content": "still root's\n"})
	for name, want := range map[string]uint32{"sub": 1001, "sub/dir": 1001, "sub/dir/new.txt": 1001, "roots.txt": 0} {
		fi, err := os.Lstat(filepath.Join(ws, name))
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if st.Uid != want || (want != 0 && st.Gid != want) {
			t.Errorf("%s belongs to %d:%d, want %d", name, st.Uid, st.Gid, want)
		}
	}
}
