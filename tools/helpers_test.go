package tools

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// eventLog collects a session's events.
type eventLog struct {
	mu     sync.Mutex // guards events
	events []Event
	ch     chan Event // also receives every event, when not nil
}

func (l *eventLog) Emit(e Event) {
	l.mu.Lock()
	l.events = append(l.events, e)
	l.mu.Unlock()
	if l.ch != nil {
		l.ch <- e
	}
}

func (l *eventLog) all() []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Event(nil), l.events...)
}

// newTestSession opens a session on a fresh workspace, with files written from
// name → content pairs.
func newTestSession(t testing.TB, files map[string]string, opts ...func(*Options)) (*Session, string) {
	t.Helper()
	ws := testWorkspace(t)
	for name, content := range files {
		writeFile(t, ws, name, content)
	}
	o := Options{Workspace: ws}
	if agentMode {
		o.FS = agentRoot(t, ws)
	}
	for _, f := range opts {
		f(&o)
	}
	s, err := NewSession(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, ws
}

func writeFile(t testing.TB, ws, name, content string) {
	t.Helper()
	p := filepath.Join(ws, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t testing.TB, ws, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(ws, filepath.FromSlash(name)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// call runs a tool with args given as a Go value; a Go error fails the test.
func call(t testing.TB, s *Session, tool string, args any) Result {
	t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.Call(context.Background(), tool, raw)
	if err != nil {
		t.Fatalf("%s %s: Go error %v", tool, raw, err)
	}
	return r
}

// mustOK runs a tool call that must succeed.
func mustOK(t testing.TB, s *Session, tool string, args any) Result {
	t.Helper()
	r := call(t, s, tool, args)
	if r.IsError {
		t.Fatalf("%s %v: %s", tool, args, r.Content)
	}
	return r
}

// mustFail runs a tool call that must give an IsError result carrying facts.
func mustFail(t testing.TB, s *Session, tool string, args any, facts ...string) Result {
	t.Helper()
	r := call(t, s, tool, args)
	if !r.IsError {
		t.Fatalf("%s %v: not an error: %s", tool, args, r.Content)
	}
	wantFacts(t, r.Content, facts...)
	return r
}

func wantFacts(t testing.TB, got string, facts ...string) {
	t.Helper()
	for _, f := range facts {
		if !strings.Contains(got, f) {
			t.Errorf("message lacks %q:\n%s", f, clip(got))
		}
	}
}

type m = map[string]any

// clip shortens s for a failure message.
func clip(s string) string {
	if len(s) <= 2000 {
		return s
	}
	return s[:1000] + "\n[…]\n" + s[len(s)-1000:]
}
