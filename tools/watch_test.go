package tools

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

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
	var logBuf syncBuffer
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

type syncBuffer struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
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
