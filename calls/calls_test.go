package calls

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corralhq/corral/tools"
)

func newSession(t *testing.T) (*tools.Session, string) {
	t.Helper()
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("one\ntwo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := tools.NewSession(context.Background(), tools.Options{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, ws
}

// TestRun: one result a line, in order, for good and bad lines alike; each
// sees every result; the tools' answers are the session's.
func TestRun(t *testing.T) {
	s, ws := newSession(t)
	in := strings.Join([]string{
		`{"id": "r", "tool": "read", "args": {"path": "a.txt"}}`,
		``,
		`not json`,
		`{"id": 2, "tool": "edit", "args": {"path": "a.txt", "oldText": "two", "newText": "TWO"}}`,
		`{"id": "x", "args": {}}`,
		`{"id": "t", "tool": 5}`,
		`{"id": "w", "tool": "write", "args": {"path": "b.txt", "content": "b"}}`,
	}, "\n")
	var out strings.Builder
	var seen []Result
	err := Run(context.Background(), s, strings.NewReader(in), &out, func(r Result, err error) {
		if err != nil {
			t.Errorf("call %s: %v", r.ID, err)
		}
		seen = append(seen, r)
	})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 6 || len(seen) != 6 {
		t.Fatalf("%d lines, %d seen, want 6:\n%s", len(lines), len(seen), out.String())
	}
	want := []struct {
		id      string
		isError bool
		has     string
	}{
		{`"r"`, false, "one"},
		{`null`, true, "Line 3 is not valid JSON"},
		{`2`, false, "a.txt"},
		{`"x"`, true, "Line 5 names no tool"},
		{`"t"`, true, `Line 6: "tool" must be a string, got a JSON number`},
		{`"w"`, false, "b.txt"},
	}
	for i, w := range want {
		var r Result
		if err := json.Unmarshal([]byte(lines[i]), &r); err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
		if string(r.ID) != w.id || r.IsError != w.isError || !strings.Contains(r.Content, w.has) {
			t.Errorf("line %d = %s, want id %s, is_error %v, content with %q", i, lines[i], w.id, w.isError, w.has)
		}
		if string(seen[i].ID) != w.id {
			t.Errorf("each saw id %s at %d, want %s", seen[i].ID, i, w.id)
		}
	}
	b, err := os.ReadFile(filepath.Join(ws, "a.txt"))
	if err != nil || string(b) != "one\nTWO\n" {
		t.Errorf("a.txt = %q, %v", b, err)
	}
}

// TestCallError: a call that fails for the infrastructure (here a closed
// session) is an is_error result naming the error, and the error reaches
// each.
func TestCallError(t *testing.T) {
	s, _ := newSession(t)
	s.Close()
	var got error
	var out strings.Builder
	err := Run(context.Background(), s, strings.NewReader(`{"id":"1","tool":"read","args":{"path":"a.txt"}}`), &out, func(r Result, err error) { got = err })
	if err != nil {
		t.Fatal(err)
	}
	if got == nil || !strings.Contains(out.String(), `"is_error":true`) || !strings.Contains(out.String(), "read failed: ") {
		t.Errorf("each got %v; output %s", got, out.String())
	}
}

// TestRunCancelled: a cancelled context ends a run that waits for input.
func TestRunCancelled(t *testing.T) {
	s, _ := newSession(t)
	pr, pw := osPipe(t)
	defer pw.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, s, pr, &strings.Builder{}, nil) }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v, want context.Canceled", err)
	}
}

func osPipe(t *testing.T) (*os.File, *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r, w
}

// TestReadLine: a line over the cap is consumed whole and reported, and the
// next line reads normally; CRLF loses its CR.
func TestReadLine(t *testing.T) {
	r := bufio.NewReaderSize(strings.NewReader(strings.Repeat("x", 100)+"\nshort\r\nlast"), 16)
	line, tooLong, err := ReadLine(r, 50)
	if !tooLong || line != nil || err != nil {
		t.Errorf("long line: %q %v %v", line, tooLong, err)
	}
	if line, tooLong, err = ReadLine(r, 50); string(line) != "short" || tooLong || err != nil {
		t.Errorf("short line: %q %v %v", line, tooLong, err)
	}
	if line, _, err = ReadLine(r, 50); string(line) != "last" || err == nil {
		t.Errorf("last line: %q %v", line, err)
	}
	if res := TooLong(3); !res.IsError || !strings.Contains(res.Content, "Line 3 is longer than 64 MB") {
		t.Errorf("TooLong = %+v", res)
	}
}
