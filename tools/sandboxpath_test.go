package tools

import (
	"context"
	"strings"
	"testing"
)

// TestSandboxPath: with the workspace seen by commands at another path (an
// isolated copy mounted at the user's workspace path), the file tools take
// absolute paths under that path, and name it to the model.
func TestSandboxPath(t *testing.T) {
	ctx := context.Background()
	const seen = "/home/someone/project"
	s, _ := newTestSession(t, map[string]string{"a.txt": "hello\n"}, func(o *Options) { o.SandboxPath = seen })
	r, err := s.Read(ctx, ReadParams{Path: seen + "/a.txt"})
	if err != nil || r.IsError || !strings.Contains(r.Content, "hello") {
		t.Fatalf("read by the sandbox's path: %+v %v", r, err)
	}
	r, err = s.Read(ctx, ReadParams{Path: "/elsewhere/a.txt"})
	if err != nil || !r.IsError || !strings.Contains(r.Content, "outside the workspace ("+seen+")") {
		t.Fatalf("read outside: %+v %v", r, err)
	}
	r, err = s.Write(ctx, WriteParams{Path: seen + "/b.txt", Content: "new\n"})
	if err != nil || r.IsError {
		t.Fatalf("write by the sandbox's path: %+v %v", r, err)
	}
}

// TestNotice: a notice is told once, after the first result.
func TestNotice(t *testing.T) {
	ctx := context.Background()
	const note = "[corral: a note for the model]"
	s, _ := newTestSession(t, map[string]string{"a.txt": "hello\n"}, func(o *Options) { o.Notice = note })
	r1, err := s.Read(ctx, ReadParams{Path: "missing.txt"})
	if err != nil {
		t.Fatal(err)
	}
	r2, err := s.Read(ctx, ReadParams{Path: "a.txt"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(r1.Content, "\n\n"+note) || strings.Contains(r2.Content, note) {
		t.Errorf("first: %q\nsecond: %q", r1.Content, r2.Content)
	}
}
