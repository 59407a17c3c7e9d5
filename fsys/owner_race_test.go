package fsys

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// ownRaceScript, run as the workspace's owner (what a command in the sandbox
// is), renames a directory of root's in the workspace over d as soon as d
// is there, as fast as it can, until its time or count runs out.
const ownRaceScript = `
import os, sys, time
end = time.time() + float(sys.argv[1])
n = 0
while time.time() < end and n < 50000000:
    n += 1
    try:
        os.rename('victim', 'd')
    except OSError:
        pass
`

// With corral as root on a user's workspace, a directory Local makes is
// given to the user; a process of the user's that puts a directory of
// root's in its place between the mkdir and the chown must not get that
// one given away instead.
func TestLocalOwnDirRace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root gives directories away")
	}
	py := "/usr/bin/python3" // not one in root's home, which uid 1001 cannot run
	if _, err := os.Stat(py); err != nil {
		t.Skip("no python3")
	}
	ws := t.TempDir()
	os.Chmod(filepath.Dir(ws), 0o755)
	if err := os.Chown(ws, 1001, 1001); err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(ws, "victim")
	if err := os.Mkdir(victim, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(victim, "keep"), []byte("root's\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := OpenLocal(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.owner == nil {
		t.Fatal("Local does not give what it makes to the workspace's owner")
	}
	script := filepath.Join(ws, "race.py")
	if err := os.WriteFile(script, []byte(ownRaceScript), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, script, "20")
	cmd.Dir = ws
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 1001, Gid: 1001}}
	if err := cmd.Start(); err != nil {
		t.Skip("cannot run a process as uid 1001:", err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	d := filepath.Join(ws, "d")
	end := time.Now().Add(15 * time.Second)
	swapped := 0
	for i := 0; i < 200000 && time.Now().Before(end); i++ {
		err := l.Mkdir("d", 0o755)
		if errors.Is(err, fs.ErrExist) {
			os.Rename(d, victim) // the racer was early: put it back
			continue
		}
		if _, serr := os.Lstat(filepath.Join(d, "keep")); serr == nil {
			// root's directory is at d now: it must still be root's.
			swapped++
			fi, _ := os.Lstat(d)
			if st := fi.Sys().(*syscall.Stat_t); st.Uid != 0 {
				t.Fatalf("after %d tries root's directory, put in place of the one made, belongs to %d:%d (Mkdir said %v)", i+1, st.Uid, st.Gid, err)
			}
			os.Rename(d, victim)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		os.Remove(d)
	}
	t.Logf("root's directory was put in place %d times", swapped)
}
