package control

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A session installs things outside its workspace — a Python module in the
// system's site-packages (its workspace belongs to root, so its commands may
// write there), a file in HOME (in /tmp), one in /var/tmp — and a file in
// its workspace, and is snapshotted through the API; a new session from the
// snapshot, on a fresh workspace of another owner, finds all of it and can
// change the workspace's files; the snapshot is listed and removed, image
// and all. Over both transports.
func TestSnapshot(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			store := t.TempDir()
			s := newServer(t, func(o *Options) { o.SnapshotDir = store })
			c := tr.connect(t, s)
			var b [4]byte
			rand.Read(b[:])
			name := "test-" + hex.EncodeToString(b[:])
			t.Cleanup(func() { exec.Command("docker", "rmi", "-f", "corral/snapshot:"+name).Run() })

			if err := os.Mkdir(filepath.Join(s.root, "src"), 0o755); err != nil {
				t.Fatal(err)
			}
			src := create(t, c, SessionOptions{Workspace: "src"})
			out(t, c, src.ID, `python3 - <<'EOF'
import os, site
d = site.getsitepackages()[0]
os.makedirs(d, exist_ok=True)
open(os.path.join(d, "snapmod.py"), "w").write("X = 42\n")
os.makedirs(os.environ["HOME"] + "/.config", exist_ok=True)
open(os.environ["HOME"] + "/.config/marker", "w").write("home\n")
open("/var/tmp/marker", "w").write("outside\n")
EOF`)
			if _, err := c.WriteFile(ctxT(t), src.ID, "made.txt", []byte("in the workspace\r\n"), 0); err != nil {
				t.Fatal(err)
			}
			snap, err := c.Snapshot(ctxT(t), src.ID, name)
			if err != nil {
				t.Fatal(err)
			}
			if snap.Name != name || snap.Image != "corral/snapshot:"+name || snap.ImageID == "" || snap.Session != src.ID || !snap.Tmp || snap.Files != 1 {
				t.Errorf("the snapshot: %+v", snap)
			}

			for _, o := range []SessionOptions{{FromSnapshot: name}, {FromSnapshot: name, Workspace: "empty"}} {
				if o.Workspace != "" {
					os.Mkdir(filepath.Join(s.root, o.Workspace), 0o755)
				}
				from := create(t, c, o)
				if from.Image != snap.Image || from.FromSnapshot != name {
					t.Errorf("the session from the snapshot: %+v", from)
				}
				got := out(t, c, from.ID, `python3 -c 'import snapmod; print("module", snapmod.X)'; cat ~/.config/marker /var/tmp/marker made.txt; echo more >> made.txt && echo changed`)
				if want := "module 42\nhome\noutside\nin the workspace\r\nchanged\n"; got != want {
					t.Errorf("%+v: got %q, want %q", o, got, want)
				}
				if err := c.CloseSession(ctxT(t), from.ID); err != nil {
					t.Error(err)
				}
			}
			// The source's workspace is its own: the new sessions wrote copies.
			if b, err := os.ReadFile(filepath.Join(src.Workspace, "made.txt")); err != nil || string(b) != "in the workspace\r\n" {
				t.Errorf("the source's made.txt: %q %v", b, err)
			}

			_, err = c.Create(ctxT(t), SessionOptions{FromSnapshot: name, Workspace: "src"})
			wantCode(t, err, CodeBadRequest, "")
			_, err = c.Create(ctxT(t), SessionOptions{FromSnapshot: "no-such-snapshot"})
			wantCode(t, err, CodeUnknownSnapshot, "")
			_, err = c.Create(ctxT(t), SessionOptions{FromSnapshot: "Bad/Name"})
			wantCode(t, err, CodeBadRequest, "")
			_, err = c.Snapshot(ctxT(t), src.ID, "../escape")
			wantCode(t, err, CodeBadRequest, "")
			_, err = c.Snapshot(ctxT(t), "no-such-session", name)
			wantCode(t, err, CodeUnknownSession, "")

			list, err := c.Snapshots(ctxT(t))
			if err != nil || len(list) != 1 || list[0].Name != name {
				t.Errorf("snapshots: %+v %v", list, err)
			}
			if err := c.RemoveSnapshot(ctxT(t), name); err != nil {
				t.Fatal(err)
			}
			wantCode(t, c.RemoveSnapshot(ctxT(t), name), CodeUnknownSnapshot, "")
			if list, err := c.Snapshots(ctxT(t)); err != nil || len(list) != 0 {
				t.Errorf("snapshots after the removal: %+v %v", list, err)
			}
			if out, _ := exec.Command("docker", "images", "-q", "corral/snapshot:"+name).Output(); strings.TrimSpace(string(out)) != "" {
				t.Error("the snapshot's image stays after its removal")
			}
		})
	}
}
