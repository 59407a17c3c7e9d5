package tools

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/testenv"
)

// watchedDirs returns how many directories are watched.
func (w *watcher) watchedDirs() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.dirs)
}

// isDegraded reports whether the watcher gave up adding watches.
func (w *watcher) isDegraded() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.degraded
}

// nextChange waits for the next file_changed event. The timeout only keeps a
// broken watcher from hanging the test; nothing is asserted about time.
func nextChange(t *testing.T, ch <-chan Event) Event {
	t.Helper()
	timeout := time.After(time.Minute)
	for {
		select {
		case e := <-ch:
			if e.Type == EventFileChanged {
				return e
			}
		case <-timeout:
			t.Fatal("no file_changed event")
		}
	}
}

func TestFileChangedEvents(t *testing.T) {
	events := &eventLog{ch: make(chan Event, 10000)}
	s, ws := newTestSession(t, map[string]string{"src/a.txt": "a\n", "src/b.txt": "b\n", "c.txt": "c\n"},
		func(o *Options) { o.Events = events })
	for _, p := range []string{"src/a.txt", "src/b.txt", "c.txt"} {
		mustOK(t, s, "read", m{"path": p})
	}
	if n := s.watch.watchedDirs(); n != 2 {
		t.Errorf("%d directories watched, want 2 (src and the root)", n)
	}

	// The session's own edits and writes are not reported...
	for i := range 20 {
		mustOK(t, s, "edit", m{"path": "src/a.txt", "oldText": "a", "newText": fmt.Sprintf("a%d", i)})
		mustOK(t, s, "write", m{"path": "src/new.txt", "content": fmt.Sprint(i)})
	}
	// ...an outside change is: its event comes after those of the session's
	// writes, so receiving it proves none of them was taken for a change.
	writeFile(t, ws, "src/b.txt", "changed by the user\n")
	e := nextChange(t, events.ch)
	if e.Path != "src/b.txt" || e.Op != "write" {
		t.Errorf("event %+v, want src/b.txt write", e)
	}
	// It is reported once, however many events the change makes.
	writeFile(t, ws, "src/b.txt", "changed again\n")
	os.Remove(filepath.Join(ws, "c.txt"))
	e = nextChange(t, events.ch)
	if e.Path != "c.txt" || e.Op != "remove" {
		t.Errorf("event %+v, want c.txt remove", e)
	}
	// A touch that keeps the content is no change.
	mustOK(t, s, "read", m{"path": "src/b.txt"})
	future := time.Now().Add(time.Hour)
	os.Chtimes(filepath.Join(ws, "src/b.txt"), future, future)
	writeFile(t, ws, "src/a.txt", "the user again\n")
	e = nextChange(t, events.ch)
	if e.Path != "src/a.txt" {
		t.Errorf("event %+v, want src/a.txt (the touch of b is not a change)", e)
	}
	// A file edited after a fresh read is reported again when it changes.
	mustOK(t, s, "read", m{"path": "src/b.txt"})
	writeFile(t, ws, "src/b.txt", "third\n")
	if e = nextChange(t, events.ch); e.Path != "src/b.txt" {
		t.Errorf("event %+v, want src/b.txt", e)
	}
	for _, e := range events.all() {
		if e.Type == EventFileChanged && e.Path == "src/new.txt" {
			t.Errorf("the session's own write was reported: %+v", e)
		}
	}
}

// When the watch limit is exhausted the watcher says so once in the log and
// stops adding watches; the hash check still catches changes.
func TestWatchLimitDegrades(t *testing.T) {
	var logBuf testenv.SyncBuffer
	logger := slog.New(slog.NewTextHandler(&logBuf, nil))
	s, ws := newTestSession(t, map[string]string{"a/x": "x\n", "b/y": "y\n", "c/z": "z\n"},
		func(o *Options) { o.Logger = logger })
	s.watch.mu.Lock()
	s.watch.addWatch = func(string) error { return fmt.Errorf("inotify_add_watch: %w", syscall.ENOSPC) }
	s.watch.mu.Unlock()
	for _, p := range []string{"a/x", "b/y", "c/z"} {
		mustOK(t, s, "read", m{"path": p})
	}
	if !s.watch.isDegraded() {
		t.Error("not degraded")
	}
	if n := strings.Count(logBuf.String(), "watch limit"); n != 1 {
		t.Errorf("%d log lines about the limit, want 1:\n%s", n, logBuf.String())
	}
	writeFile(t, ws, "b/y", "changed\n")
	mustFail(t, s, "edit", m{"path": "b/y", "oldText": "y", "newText": "Y"}, "changed since")
}

// A watched file swapped for a named pipe whose writer never writes does not
// block the watcher (and Close with it): what was opened is checked.
func TestWatcherHashDoesNotBlockOnAPipe(t *testing.T) {
	s, ws := newTestSession(t, nil)
	p := filepath.Join(ws, "pipe")
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Skip("no mkfifo:", err)
	}
	writer, err := os.OpenFile(p, os.O_RDWR, 0) // a writer that never writes
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close()
	done := make(chan error, 1)
	go func() {
		_, err := s.watch.hashFile("pipe")
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Error("a named pipe was hashed")
		}
	case <-time.After(time.Minute): // only a hang fails
		t.Fatal("hashing a named pipe blocked")
	}
}

// Under rapid churn — files rewritten, directories removed, recreated and
// renamed while the session reads, edits and writes in them — nothing panics or
// hangs, Close leaves no goroutine behind, and calls after Close fail cleanly.
func TestWatcherChurnAndClose(t *testing.T) {
	before := runtime.NumGoroutine()
	ws := t.TempDir()
	const dirs = 20
	for i := range dirs {
		writeFile(t, ws, fmt.Sprintf("d%d/f", i), "x\n")
	}
	s, err := NewSession(t.Context(), Options{Workspace: ws, Events: &eventLog{}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range dirs {
		mustOK(t, s, "read", m{"path": fmt.Sprintf("d%d/f", i)})
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := g; ; k += 3 {
				select {
				case <-stop:
					return
				default:
				}
				d := filepath.Join(ws, fmt.Sprintf("d%d", k%dirs))
				switch k % 4 {
				case 0:
					os.WriteFile(filepath.Join(d, "f"), []byte(fmt.Sprint(k)), 0o644)
				case 1:
					os.RemoveAll(d)
				case 2:
					os.MkdirAll(d, 0o755)
					os.WriteFile(filepath.Join(d, "f"), []byte("x\n"), 0o644)
				case 3:
					os.Rename(d, d+"-moved")
					os.Rename(d+"-moved", d)
				}
			}
		}()
	}
	ctx := t.Context()
	for i := range 200 {
		p := fmt.Sprintf("d%d/f", i%dirs)
		for _, err := range []error{
			func() error { _, err := s.Read(ctx, ReadParams{Path: p}); return err }(),
			func() error { _, err := s.Edit(ctx, EditParams{Path: p, OldText: "x", NewText: "y"}); return err }(),
			func() error { _, err := s.Write(ctx, WriteParams{Path: p, Content: "x\n"}); return err }(),
		} {
			if err != nil {
				t.Errorf("Go error under churn: %v", err)
			}
		}
	}
	close(stop)
	wg.Wait()
	if err := s.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	if _, err := s.Read(ctx, ReadParams{Path: "d0/f"}); !errors.Is(err, ErrClosed) {
		t.Errorf("read after Close: %v, want ErrClosed", err)
	}
	ok := false
	defer func() {
		if !ok {
			buf := make([]byte, 1<<20)
			t.Logf("%d goroutines after Close, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
	}()
	// Only a leak fails.
	testenv.WaitFor(t, time.Minute, "the goroutines of the watch to end", func() bool { return runtime.NumGoroutine() <= before })
	ok = true
}

// When the watcher has no watch on a file (degraded, or its events late
// under load), edit and write that find it changed report file_changed
// themselves, once: the UI hears of it whichever comes first.
func TestStaleToolReportsChange(t *testing.T) {
	events := &eventLog{}
	s, ws := newTestSession(t, map[string]string{"a/x": "x\n"}, func(o *Options) { o.Events = events })
	s.watch.mu.Lock()
	s.watch.addWatch = func(string) error { return fmt.Errorf("inotify_add_watch: %w", syscall.ENOSPC) }
	s.watch.mu.Unlock()
	mustOK(t, s, "read", m{"path": "a/x"})
	writeFile(t, ws, "a/x", "changed\n")
	mustFail(t, s, "edit", m{"path": "a/x", "oldText": "x", "newText": "X"}, "changed since")
	mustFail(t, s, "write", m{"path": "a/x", "content": "y\n"}, "changed since")
	n := 0
	for _, e := range events.all() {
		if e.Type == EventFileChanged && e.Path == "a/x" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d file_changed events for a/x, want 1: %+v", n, events.all())
	}
}
