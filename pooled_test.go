package corral_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral"
	"github.com/corralhq/corral/checkpoint"
	"github.com/corralhq/corral/internal/testenv"
	"github.com/corralhq/corral/pool"
	"github.com/corralhq/corral/sandbox/docker"
	"github.com/corralhq/corral/tools"
)

func newTestPool(t *testing.T, opts pool.Options) *pool.Pool {
	t.Helper()
	testenv.NeedsDocker(t)
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	if opts.Backend == nil {
		opts.Backend = docker.Backend
	}
	p, err := pool.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func waitReady(t *testing.T, p *pool.Pool, n int) {
	t.Helper()
	ok := false
	defer func() {
		if !ok {
			t.Logf("the pool has %+v", p.Stats())
		}
	}()
	testenv.WaitFor(t, 2*time.Minute, fmt.Sprintf("%d ready sandboxes in the pool", n), func() bool { return p.Stats().Ready >= n })
	ok = true
}

// TestPooledSession: a session of a host with a pool starts on a sandbox
// made ahead, works on a copy of the workspace in the slot — at the slot's
// own path, for the tools and for commands alike — never on the workspace
// itself, and Close removes the slot.
func TestPooledSession(t *testing.T) {
	cfg := sandboxed(t)
	os.WriteFile(filepath.Join(cfg.Workspace, "a.txt"), []byte("original\n"), 0o644)
	p := newTestPool(t, pool.Options{})
	if err := p.Warm(cfg.Sandbox, 1); err != nil {
		t.Fatal(err)
	}
	waitReady(t, p, 1)
	cfg.Pool = p
	var events []tools.Event
	cfg.Events = tools.EventFunc(func(e tools.Event) { events = append(events, e) })
	h, err := corral.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	ctx := context.Background()
	s, err := h.Open(ctx, corral.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ps, ok := s.Sandbox().(*pool.Sandbox)
	if !ok || !ps.Warm() {
		t.Fatalf("the session's sandbox is %T (warm %v), want a warm *pool.Sandbox", s.Sandbox(), ok && ps.Warm())
	}
	dir := ps.Dir()
	r, err := s.Bash(ctx, tools.BashParams{Command: "pwd; cat a.txt; echo changed > a.txt"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(r.Content, dir+"\noriginal") {
		t.Errorf("bash:\n%s", r.Content)
	}
	if r, err = s.Call(ctx, "read", json.RawMessage(`{"path":"`+dir+`/a.txt"}`)); err != nil || r.IsError || !strings.Contains(r.Content, "changed") {
		t.Errorf("read by the slot's absolute path: %+v, %v", r, err)
	}
	if r, err = s.Call(ctx, "edit", json.RawMessage(`{"path":"a.txt","oldText":"changed","newText":"edited"}`)); err != nil || r.IsError {
		t.Errorf("edit: %+v, %v", r, err)
	}
	if b, _ := os.ReadFile(filepath.Join(cfg.Workspace, "a.txt")); string(b) != "original\n" {
		t.Errorf("the workspace itself changed: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(b) != "edited\n" {
		t.Errorf("the slot's a.txt: %q", b)
	}
	// The command's log is in the slot, read-only inside.
	if r, err = s.Bash(ctx, tools.BashParams{Command: "seq 3"}); err != nil {
		t.Fatal(err)
	}
	if lp := r.Details.(*tools.BashDetails).LogPath; !strings.HasPrefix(lp, ps.LogDir()+"/") {
		t.Errorf("log %s is not in the slot's log directory %s", lp, ps.LogDir())
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the slot stays after Close: %v", err)
	}
	if len(events) == 0 || events[0].Type != tools.EventSessionStart || events[0].Path != dir {
		t.Errorf("first event %+v, want session_start with the slot's path", events[:1])
	}
}

// TestPooledFill: SessionOptions.Fill fills an empty workspace; a failing
// Fill fails Open and gives the sandbox back.
func TestPooledFill(t *testing.T) {
	p := newTestPool(t, pool.Options{Max: 1})
	cfg := sandboxed(t)
	cfg.Workspace = ""
	cfg.Pool = p
	h, err := corral.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	ctx := context.Background()
	_, err = h.Open(ctx, corral.SessionOptions{Fill: func(ctx context.Context, dir string) error {
		return errors.New("no source")
	}})
	if err == nil || !strings.Contains(err.Error(), "no source") {
		t.Fatalf("Open with a failing Fill: %v", err)
	}
	if st := p.Stats(); st.Live != 0 {
		t.Errorf("after a failed Open the pool holds %+v", st)
	}
	s, err := h.Open(ctx, corral.SessionOptions{Fill: func(ctx context.Context, dir string) error {
		return os.WriteFile(filepath.Join(dir, "task.txt"), []byte("from fill\n"), 0o644)
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r, err := s.Bash(ctx, tools.BashParams{Command: "cat task.txt"})
	if err != nil || !strings.Contains(r.Content, "from fill") {
		t.Errorf("bash: %+v, %v", r, err)
	}
}

// TestPooledChecks: what a pooled session cannot have is refused by New.
func TestPooledChecks(t *testing.T) {
	p := newTestPool(t, pool.Options{})
	cfg := sandboxed(t)
	cfg.Pool = p
	cfg.Checkpoints = &checkpoint.Options{}
	if _, err := corral.New(cfg); err == nil || !strings.Contains(err.Error(), "no checkpoints") {
		t.Errorf("pool with checkpoints: %v", err)
	}
	cfg.Checkpoints = nil
	cfg.Isolate = &corral.Isolation{}
	if _, err := corral.New(cfg); err == nil || !strings.Contains(err.Error(), "cannot be isolated") {
		t.Errorf("pool with isolation: %v", err)
	}
	cfg.Isolate = nil
	cfg.Sandbox.Session = "mine"
	if _, err := corral.New(cfg); err == nil {
		t.Error("pool with a session id: no error")
	}
	cfg.Sandbox.Session = ""
	cfg.Workspace = ""
	if _, err := corral.New(cfg); err != nil {
		t.Errorf("pool without a workspace: %v", err)
	}
	cfg.Pool = nil
	if _, err := corral.New(cfg); err == nil {
		t.Error("no pool, no workspace: no error")
	}
}
