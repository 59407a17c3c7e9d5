package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/corralhq/corral/fsys"
	"github.com/corralhq/corral/fsys/fsystest"
	"github.com/corralhq/corral/sandbox/internal/ring"
	"github.com/corralhq/corral/sandbox/proto"
)

// agentFS opens the sandbox's workspace through its agent.
func agentFS(t testing.TB, c *Container) *AgentFS {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a, err := c.AgentFS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

func TestAgentFSBasics(t *testing.T) {
	c := newSandbox(t, testConfig(t))
	a := agentFS(t, c)
	if a.Name() != c.Workspace() {
		t.Errorf("Name = %q, want %q", a.Name(), c.Workspace())
	}
	if err := a.MkdirAll("d/e", 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := a.OpenFile("d/e/f.txt", os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("0123456789abcdef\r\n"), 100_000) // 1.8 MB
	if n, err := f.Write(data); err != nil || n != len(data) {
		t.Fatalf("write %d %v", n, err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	host, err := os.ReadFile(filepath.Join(c.Workspace(), "d/e/f.txt"))
	if err != nil || !bytes.Equal(host, data) {
		t.Fatalf("the host sees %d bytes (%v), want %d", len(host), err, len(data))
	}
	g, err := a.OpenFile("d/e/f.txt", os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(g)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes (%v), want %d", len(got), err, len(data))
	}
	fi, err := g.Stat()
	if err != nil {
		t.Fatal(err)
	}
	g.Close()
	hfi, _ := os.Stat(filepath.Join(c.Workspace(), "d/e/f.txt"))
	if !fsys.SameFile(fi, hfi) || fi.Size() != int64(len(data)) || !fi.ModTime().Equal(hfi.ModTime()) {
		t.Errorf("remote %v %v %v vs host %v %v", fi.Size(), fi.ModTime(), fi.Sys(), hfi.Size(), hfi.ModTime())
	}
	uid, _, _ := fsys.Owner(fi)
	if want := 65532; uid != want {
		t.Errorf("a file made through the agent belongs to %d, want the commands' user %d", uid, want)
	}
	if _, err := a.Stat("missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("stat missing: %v", err)
	}
	if _, err := a.Readlink("d"); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("readlink of a directory: %v", err)
	}
	if _, err := a.OpenFile("../etc/passwd", os.O_RDONLY, 0); err == nil || !errors.Is(err, fsys.ErrEscape) {
		t.Errorf("open ../etc/passwd: %v", err)
	}
	sub, err := a.OpenRoot("d")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if w, ok := sub.Where(); !ok || w != filepath.Join(c.Workspace(), "d") {
		t.Errorf("Where = %q %v", w, ok)
	}
	d, err := sub.OpenFile(".", os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil || len(names) != 1 || names[0] != "e" {
		t.Errorf("names %q %v", names, err)
	}
	if err := sub.Rename("e/f.txt", "g.txt"); err != nil {
		t.Fatal(err)
	}
	if err := sub.Remove("e"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(c.Workspace(), "d/g.txt")); err != nil {
		t.Error(err)
	}
}

// The file half of the conformance suite, through the agent: with a
// workspace that belongs to root (commands, and the agent's file
// operations, override permissions) and with one that belongs to an
// unprivileged user (permissions hold).
func TestAgentFSConformance(t *testing.T) {
	for _, tc := range []struct {
		name  string
		owner int
	}{{"root-workspace", 0}, {"user-workspace", 1000}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t)
			if err := os.Chown(cfg.Workspace, tc.owner, tc.owner); err != nil {
				t.Fatal(err)
			}
			c := newSandbox(t, cfg)
			a := agentFS(t, c)
			n := 0
			fsystest.Run(t, fsystest.Target{
				Open: func(t *testing.T) fsys.Root {
					n++
					dir := fmt.Sprintf("case%d", n)
					if err := a.Mkdir(dir, 0o755); err != nil {
						t.Fatal(err)
					}
					r, err := a.OpenRoot(dir)
					if err != nil {
						t.Fatal(err)
					}
					return r
				},
				EnforcesPermissions: tc.owner != 0,
			})
		})
	}
}

// FuzzDispatchFS: whatever file-operation frames the agent sends, the host's
// dispatcher returns an error or nothing, never panics, and never holds more
// of a read than its window.
func FuzzDispatchFS(f *testing.F) {
	f.Add(byte(proto.FSReply), uint32(proto.FSStreamBit|1), []byte(`{"handle":5,"info":{"name":"YQ==","size":3}}`))
	f.Add(byte(proto.FSData), uint32(proto.FSStreamBit|2), []byte("data"))
	f.Add(byte(proto.FSCredit), uint32(proto.FSStreamBit|3), []byte{0, 0, 0, 1})
	f.Add(byte(proto.FSReply), uint32(proto.FSStreamBit|2), []byte(`{"error":{"op":"read","errno":2}}`))
	f.Add(byte(proto.FSData), uint32(1), []byte("x"))
	f.Fuzz(func(t *testing.T, typ byte, stream uint32, p []byte) {
		c := &Client{streams: map[uint32]*hostStream{}, helloCh: make(chan proto.AgentHelloMsg, 1), log: slog.New(slog.DiscardHandler)}
		c.fsc.calls = map[uint32]*fsCall{}
		for id, read := range map[uint32]bool{proto.FSStreamBit | 1: false, proto.FSStreamBit | 2: true, proto.FSStreamBit | 3: false} {
			call := &fsCall{id: id, reply: make(chan proto.FSReplyMsg, 1), ready: make(chan struct{}, 1)}
			if read {
				call.data = ring.New(proto.FSWindow)
			}
			c.fsc.calls[id] = call
		}
		rd := c.fsc.calls[proto.FSStreamBit|2]
		for range 3 {
			_ = c.dispatch(proto.Frame{Type: proto.Type(typ), Stream: stream, Payload: p})
		}
		if rd.data.Len() > proto.FSWindow {
			t.Fatal("a read holds more than its window")
		}
		select {
		case r := <-rd.reply:
			_ = fsError(r.Error)
		default:
		}
	})
}
