package tools

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Inputs an agent or a hostile repository can produce get a clear, correctable
// error — never a Go error, a panic or a hang — and change nothing they should
// not.
func TestHostileInputs(t *testing.T) {
	s, ws := newTestSession(t, map[string]string{
		"empty":     "",
		"nonl":      "a\nb",
		"bomonly":   "\uFEFF",
		"blank.txt": "   \n\t\t\n  \n",
		"-rf":       "\x00binary\n",
		"ro.txt":    "keep\n",
		"rodir/f":   "keep\n",
		"~lit/f":    "a literal tilde directory\n",
	})
	if err := os.Chmod(filepath.Join(ws, "ro.txt"), 0o444); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(ws, "rodir"), 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(filepath.Join(ws, "rodir"), 0o755) })
	if l, err := net.Listen("unix", filepath.Join(ws, "sock")); err == nil {
		t.Cleanup(func() { l.Close() })
	} else {
		t.Log("no unix socket:", err)
	}
	if err := syscall.Mkfifo(filepath.Join(ws, "fifo"), 0o644); err != nil {
		t.Log("no fifo:", err)
	}
	for _, p := range []string{"empty", "nonl", "bomonly", "blank.txt", "ro.txt", "rodir/f"} {
		mustOK(t, s, "read", m{"path": p})
	}

	tests := []struct {
		tool  string
		args  m
		ok    bool
		facts []string
	}{
		{"read", m{"path": "empty"}, true, []string{"[empty is empty.]"}},
		// A limit as large as an integer goes once overflowed offset+limit and
		// showed no line at all.
		{"read", m{"path": "nonl", "limit": int64(9223372036854775807)}, true, []string{"1\ta\n2\tb"}},
		{"read", m{"path": "nonl", "offset": 2, "limit": int64(9223372036854775807)}, true, []string{"2\tb"}},
		{"read", m{"path": "rodir", "offset": 1, "limit": int64(9223372036854775807)}, true, []string{"f"}},
		{"read", m{"path": "nonl", "offset": int64(9223372036854775807)}, false, []string{"past the end of nonl"}},
		{"edit", m{"path": "empty", "oldText": "x", "newText": "y"}, false, []string{"oldText was not found in empty"}},
		{"read", m{"path": "bomonly"}, true, []string{"is empty"}},
		{"edit", m{"path": "nonl", "oldText": "b", "newText": "c\n"}, true, []string{"Edited nonl"}},
		{"edit", m{"path": "blank.txt", "oldText": "\t\t\n", "newText": "x\n"}, true, []string{"line 2"}},
		// A name that looks like an option is shown so that bash takes it as a file.
		{"read", m{"path": "-rf"}, false, []string{"binary file", "`file ./-rf`"}},
		// Sockets and pipes are named, never opened for good.
		{"read", m{"path": "sock"}, false, []string{"sock is a socket"}},
		{"edit", m{"path": "sock", "oldText": "a", "newText": "b"}, false, []string{"sock is a socket"}},
		{"write", m{"path": "sock", "content": "b"}, false, []string{"sock is a socket"}},
		{"edit", m{"path": "fifo", "oldText": "a", "newText": "b"}, false, []string{"fifo is a named pipe"}},
		{"write", m{"path": "fifo", "content": "b"}, false, []string{"fifo is a named pipe"}},
		// Read-only files and directories stay as they are, even for root.
		{"edit", m{"path": "ro.txt", "oldText": "keep", "newText": "lost"}, false, []string{"Cannot edit ro.txt", "read-only (mode 0444)", "unchanged"}},
		{"write", m{"path": "ro.txt", "content": "lost\n"}, false, []string{"Cannot overwrite ro.txt", "read-only"}},
		{"write", m{"path": "rodir/f", "content": "lost\n"}, false, []string{"rodir is read-only (mode 0555)"}},
		{"write", m{"path": "rodir/new", "content": "lost\n"}, false, []string{"rodir is read-only"}},
		// A shell would have expanded these; the tools do not.
		{"write", m{"path": "~/.bashrc", "content": "x\n"}, false, []string{"starts with ~", "not the home directory", ws}},
		{"read", m{"path": "~/.ssh/id_rsa"}, false, []string{"starts with ~"}},
		{"write", m{"path": "$HOME/x", "content": "x\n"}, false, []string{"starts with $HOME", "not expanded"}},
		{"read", m{"path": ws + "/~user/x"}, false, []string{"starts with ~user"}},
		{"read", m{"path": "~lit/f"}, true, []string{"a literal tilde directory"}},
		// Names no one types on purpose are not created.
		{"write", m{"path": "main.go\n", "content": "x\n"}, false, []string{"control character", `'\n'`}},
		{"write", m{"path": "a\tb/c", "content": "x\n"}, false, []string{"control character"}},
		{"write", m{"path": " src/a.go", "content": "x\n"}, false, []string{"whitespace"}},
		{"write", m{"path": "with space/ok.txt", "content": "x\n"}, true, []string{"Created with space/ok.txt"}},
	}
	for _, tt := range tests {
		r := call(t, s, tt.tool, tt.args)
		if r.IsError == tt.ok {
			t.Errorf("%s %q: IsError = %v: %s", tt.tool, tt.args, r.IsError, r.Content)
			continue
		}
		wantFacts(t, r.Content, tt.facts...)
	}
	for name, want := range map[string]string{"ro.txt": "keep\n", "rodir/f": "keep\n", "nonl": "a\nc\n"} {
		if got := readFile(t, ws, name); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	for _, p := range []string{"~", "$HOME", "main.go\n", "a\tb", " src", "rodir/new"} {
		if _, err := os.Lstat(filepath.Join(ws, p)); err == nil {
			t.Errorf("%q was created", p)
		}
	}
	ents, _ := os.ReadDir(filepath.Join(ws, "rodir"))
	for _, e := range ents {
		if e.Name() != "f" {
			t.Errorf("rodir gained %q", e.Name())
		}
	}
	if !strings.HasSuffix(readFile(t, ws, "blank.txt"), "x\n  \n") {
		t.Errorf("blank.txt = %q", readFile(t, ws, "blank.txt"))
	}
}
