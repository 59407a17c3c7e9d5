package tools

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestWriteOwner: the file write creates and the directories it makes for it
// belong to the workspace's owner, as the user's own tools would have made
// them; a file it overwrites keeps its owner and group.
//
// With corral as root, on a workspace of uid 1001, that means giving them
// to 1001, and leaving a file of root's root's. An ordinary user can give a
// file to no one else: what write creates is theirs, and a file of theirs in
// another group of theirs (a supplementary one) keeps that group, when they
// have one.
func TestWriteOwner(t *testing.T) {
	if agentMode {
		t.Skip("through the agent, files are made by the commands' user")
	}
	ws := t.TempDir()
	// other is the owner and group of the file that exists before.
	owner, group := uint32(1001), uint32(1001)
	otherUID, otherGID := uint32(0), uint32(0)
	if os.Geteuid() == 0 {
		if err := os.Chown(ws, 1001, 1001); err != nil {
			t.Fatal(err)
		}
	} else {
		owner, group = uint32(os.Geteuid()), uint32(os.Getegid())
		otherUID, otherGID = owner, group
		groups, err := os.Getgroups()
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range groups {
			if uint32(g) != group {
				otherGID = uint32(g)
				break
			}
		}
		if otherGID == group {
			t.Log("no supplementary group: the existing file keeps the primary group")
		}
	}
	existing := filepath.Join(ws, "existing.txt")
	if err := os.WriteFile(existing, []byte("r\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(existing, int(otherUID), int(otherGID)); err != nil {
		t.Fatal(err)
	}
	s, err := NewSession(context.Background(), Options{Workspace: ws, WritePolicy: AllowOverwrite})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mustOK(t, s, "write", m{"path": "sub/dir/new.txt", "content": "x\n"})
	mustOK(t, s, "write", m{"path": "existing.txt", "content": "still its owner's\n"})
	type ids struct{ uid, gid uint32 }
	want := map[string]ids{
		"sub":             {owner, group},
		"sub/dir":         {owner, group},
		"sub/dir/new.txt": {owner, group},
		"existing.txt":    {otherUID, otherGID},
	}
	for name, w := range want {
		fi, err := os.Lstat(filepath.Join(ws, name))
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if st.Uid != w.uid || st.Gid != w.gid {
			t.Errorf("%s belongs to %d:%d, want %d:%d", name, st.Uid, st.Gid, w.uid, w.gid)
		}
	}
}
