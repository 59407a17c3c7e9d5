package tools

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestEditMessages(t *testing.T) {
	parser := numbered(1, 41) + "  return parse(input, options);\n" + numbered(43, 60)
	tests := []struct {
		name  string
		files map[string]string
		read  []string // files read first
		args  m
		want  string   // the whole message, when set
		facts []string // facts it must carry
	}{
		{
			name:  "not read: the chapter's message",
			files: map[string]string{"src/config.ts": "x\n"},
			args:  m{"path": "src/config.ts", "oldText": "x", "newText": "y"},
			want:  "Cannot edit src/config.ts because it has not been read in this session. Read the file first, then retry with exact oldText.",
		},
		{
			name:  "not found: the chapter's form",
			files: map[string]string{"src/parser.ts": parser},
			read:  []string{"src/parser.ts"},
			args:  m{"path": "src/parser.ts", "oldText": "return parse(input, opts);", "newText": "x"},
			want: "oldText was not found in src/parser.ts.\n" +
				"The file currently contains a similar line:\n" +
				"  42:   return parse(input, options);\n" +
				"Read the latest file contents and retry with exact oldText.",
		},
		{
			name:  "not found, several lines",
			files: map[string]string{"a.go": "func f() {\n\tx := 1\n\treturn x\n}\n"},
			read:  []string{"a.go"},
			args:  m{"path": "a.go", "oldText": "func f() {\n\tx := 2\n\treturn x\n}\n", "newText": "x"},
			facts: []string{"oldText was not found in a.go.", "similar lines:", "  1: func f() {", "  2: \tx := 1", "Line 2 is where it first differs", "Read the latest file contents and retry with exact oldText."},
		},
		{
			name:  "not found, nothing similar",
			files: map[string]string{"a.txt": "alpha\nbeta\n"},
			read:  []string{"a.txt"},
			args:  m{"path": "a.txt", "oldText": "zzzzzzzz", "newText": "x"},
			facts: []string{"oldText was not found in a.txt.", "No line of the file resembles it.", "retry with exact oldText"},
		},
		{
			name:  "several matches",
			files: map[string]string{"a.txt": "x = 1\ny\nx = 1\nz\nx = 1\n"},
			read:  []string{"a.txt"},
			args:  m{"path": "a.txt", "oldText": "x = 1", "newText": "x = 2"},
			want:  "oldText occurs 3 times in a.txt, at lines 1, 3 and 5. Include more surrounding lines in oldText so that it matches exactly one place, or set replaceAll to true to replace every occurrence.",
		},
		{
			name:  "empty oldText",
			files: map[string]string{"a.txt": "x\n"},
			read:  []string{"a.txt"},
			args:  m{"path": "a.txt", "oldText": "", "newText": "y"},
			facts: []string{"oldText is empty", "a.txt", "write"},
		},
		{
			name:  "identical texts",
			files: map[string]string{"a.txt": "x\n"},
			read:  []string{"a.txt"},
			args:  m{"path": "a.txt", "oldText": "x", "newText": "x"},
			facts: []string{"identical", "would not change a.txt"},
		},
		{
			name:  "directory",
			files: map[string]string{"d/a.txt": "x\n"},
			args:  m{"path": "d", "oldText": "x", "newText": "y"},
			facts: []string{"d is a directory", "edit changes files"},
		},
		{
			name:  "missing file suggests write",
			args:  m{"path": "new.txt", "oldText": "x", "newText": "y"},
			facts: []string{"new.txt does not exist", "Use write"},
		},
		{
			name:  "binary file",
			files: map[string]string{"a.bin": "\x00\x01\x02"},
			args:  m{"path": "a.bin", "oldText": "\x01", "newText": "y"},
			facts: []string{"a.bin is a binary file", "3 B", "text files only"},
		},
		{
			name:  "protected",
			files: map[string]string{".git/config": "[core]\n"},
			read:  []string{".git/config"},
			args:  m{"path": ".git/config", "oldText": "[core]", "newText": "[x]"},
			facts: []string{"Cannot edit .git/config", "it is a protected path (**/.git)", "git on the host runs a repository's hooks", "Ask the user"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, ws := newTestSession(t, tt.files)
			for _, p := range tt.read {
				mustOK(t, s, "read", m{"path": p})
			}
			r := mustFail(t, s, "edit", tt.args, tt.facts...)
			if tt.want != "" && r.Content != tt.want {
				t.Errorf("message:\n%s\nwant:\n%s", r.Content, tt.want)
			}
			for name, content := range tt.files {
				if got := readFile(t, ws, name); got != content {
					t.Errorf("%s changed to %q", name, got)
				}
			}
		})
	}
}

func TestEditSuccess(t *testing.T) {
	tests := []struct {
		name    string
		content string
		mode    os.FileMode
		args    m
		want    string // the file afterwards
		msg     string // the model's line
		facts   []string
	}{
		{
			name:    "the chapter's summary",
			content: numbered(1, 50),
			args:    m{"oldText": "line 40\n", "newText": "forty\nforty-one\nforty-two\n"},
			want:    numbered(1, 39) + "forty\nforty-one\nforty-two\n" + numbered(41, 50),
			msg:     "Edited f: 1 replacement at lines 40-42 (+3 -1).",
		},
		{
			name:    "replaceAll",
			content: "x = 1\ny\nx = 1\nz\nx = 1\n",
			args:    m{"oldText": "x = 1", "newText": "x = 2", "replaceAll": true},
			want:    "x = 2\ny\nx = 2\nz\nx = 2\n",
			msg:     "Edited f: 3 replacements at lines 1, 3 and 5 (+3 -3).",
		},
		{
			name:    "CRLF kept",
			content: "a\r\nb\r\nc\r\n",
			args:    m{"oldText": "a\nb\n", "newText": "A\nB\nB2\n"},
			want:    "A\r\nB\r\nB2\r\nc\r\n",
			msg:     "Edited f: 1 replacement at lines 1-3 (+3 -2).",
		},
		{
			name:    "BOM kept",
			content: "\uFEFFa\nb\n",
			args:    m{"oldText": "a", "newText": "x"},
			want:    "\uFEFFx\nb\n",
		},
		{
			name:    "mode kept",
			content: "#!/bin/sh\necho hi\n",
			mode:    0o751,
			args:    m{"oldText": "hi", "newText": "bye"},
			want:    "#!/bin/sh\necho bye\n",
		},
		{
			name:    "final newline kept",
			content: "a\nb\n",
			args:    m{"oldText": "b\n", "newText": "c"},
			want:    "a\nc\n",
			facts:   []string{"final newline was kept"},
		},
		{
			name:    "tolerant match says so",
			content: "say(\u201chi\u201d)   \nkeep \u2014 this\n",
			args:    m{"oldText": "say(\"hi\")\n", "newText": "say(\"bye\")\n"},
			want:    "say(\"bye\")\nkeep \u2014 this\n",
			facts:   []string{"matched only after normalising trailing whitespace and Unicode quotes", "only the matched text was replaced"},
		},
		{
			name:    "delete",
			content: "a\nb\nc\n",
			args:    m{"oldText": "b\n", "newText": ""},
			want:    "a\nc\n",
			msg:     "Edited f: 1 replacement at line 2 (+0 -1).",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, ws := newTestSession(t, map[string]string{"f": tt.content})
			if tt.mode != 0 {
				if err := os.Chmod(filepath.Join(ws, "f"), tt.mode); err != nil {
					t.Fatal(err)
				}
			}
			mustOK(t, s, "read", m{"path": "f"})
			tt.args["path"] = "f"
			r := mustOK(t, s, "edit", tt.args)
			if tt.msg != "" && r.Content != tt.msg {
				t.Errorf("message %q, want %q", r.Content, tt.msg)
			}
			wantFacts(t, r.Content, tt.facts...)
			if got := readFile(t, ws, "f"); got != tt.want {
				t.Errorf("file %q, want %q", got, tt.want)
			}
			if tt.mode != 0 {
				fi, _ := os.Stat(filepath.Join(ws, "f"))
				if fi.Mode().Perm() != tt.mode {
					t.Errorf("mode %v, want %v", fi.Mode().Perm(), tt.mode)
				}
			}
		})
	}
}

func TestEditDetails(t *testing.T) {
	events := &eventLog{}
	s, _ := newTestSession(t, map[string]string{"src/a.ts": "one\ntwo\nthree\n"}, func(o *Options) { o.Events = events })
	mustOK(t, s, "read", m{"path": "src/a.ts"})
	r := mustOK(t, s, "edit", m{"path": "src/a.ts", "oldText": "two", "newText": "2"})
	d, ok := r.Details.(*EditDetails)
	if !ok {
		t.Fatalf("details %T", r.Details)
	}
	want := EditDetails{
		Path:         "src/a.ts",
		Diff:         "--- a/src/a.ts\n+++ b/src/a.ts\n@@ -1,3 +1,3 @@\n one\n-two\n+2\n three\n",
		Replacements: 1, FirstLine: 2, LastLine: 2, Added: 1, Removed: 1,
		OldContent: "one\ntwo\nthree\n", NewContent: "one\n2\nthree\n",
	}
	if fmt.Sprint(*d) != fmt.Sprint(want) {
		t.Errorf("details\n%+v\nwant\n%+v", *d, want)
	}
	// The call_end event carries the same details, as JSON a UI can read.
	var end *Event
	for _, e := range events.all() {
		if e.Type == EventCallEnd && e.Tool == "edit" {
			end = &e
		}
	}
	if end == nil || end.Result == nil {
		t.Fatal("no call_end event for edit")
	}
	b, _ := json.Marshal(end)
	wantFacts(t, string(b), `"diff":"--- a/src/a.ts`, `"replacements":1`, `"first_line":2`, `"old_content":"one\ntwo\nthree\n"`)
	if strings.Contains(r.Content, "-two") {
		t.Errorf("the model's text carries the diff: %q", r.Content)
	}
}

// After an edit the read-state holds the new hash: a second edit needs no read.
func TestEditTwiceWithoutRereading(t *testing.T) {
	s, ws := newTestSession(t, map[string]string{"a.txt": "a\nb\nc\n"})
	mustOK(t, s, "read", m{"path": "a.txt"})
	mustOK(t, s, "edit", m{"path": "a.txt", "oldText": "a", "newText": "A"})
	mustOK(t, s, "edit", m{"path": "a.txt", "oldText": "b", "newText": "B"})
	if got := readFile(t, ws, "a.txt"); got != "A\nB\nc\n" {
		t.Errorf("file %q", got)
	}
}

// Staleness is judged by content hash, not by mtime: touching a file does not
// make it stale, changing it behind an unchanged mtime and size does.
func TestEditStaleness(t *testing.T) {
	s, ws := newTestSession(t, map[string]string{"src/a.ts": "const a = 1;\n"})
	p := filepath.Join(ws, "src", "a.ts")
	mustOK(t, s, "read", m{"path": "src/a.ts"})

	future := time.Now().Add(time.Hour)
	if err := os.Chtimes(p, future, future); err != nil {
		t.Fatal(err)
	}
	mustOK(t, s, "edit", m{"path": "src/a.ts", "oldText": "1", "newText": "2"})

	fi, _ := os.Stat(p)
	if err := os.WriteFile(p, []byte("const a = 3;\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chtimes(p, fi.ModTime(), fi.ModTime())
	r := mustFail(t, s, "edit", m{"path": "src/a.ts", "oldText": "3", "newText": "4"},
		"src/a.ts", "changed since", "by the user, a formatter or a command", "Read the file again")
	if got := readFile(t, ws, "src/a.ts"); got != "const a = 3;\n" {
		t.Errorf("the user's change was overwritten: %q (%s)", got, r.Content)
	}
	// A fresh read makes it editable again.
	mustOK(t, s, "read", m{"path": "src/a.ts"})
	mustOK(t, s, "edit", m{"path": "src/a.ts", "oldText": "3", "newText": "4"})
}

// Reading a file by one spelling makes it editable by any other that resolves
// to it.
func TestEditPathSpellings(t *testing.T) {
	s, ws := newTestSession(t, map[string]string{"src/a.txt": "a\n"})
	if err := os.Symlink("src/a.txt", filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	mustOK(t, s, "read", m{"path": "./src//a.txt"})
	for i, p := range []string{"src/a.txt", "link", filepath.Join(ws, "src", "a.txt"), "src/../src/a.txt"} {
		mustOK(t, s, "edit", m{"path": p, "oldText": "\n", "newText": fmt.Sprintf("%d\n", i), "replaceAll": false})
	}
	if got := readFile(t, ws, "src/a.txt"); got != "a0123\n" {
		t.Errorf("file %q", got)
	}
	if fi, err := os.Lstat(filepath.Join(ws, "link")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the symlink was replaced: %v %v", fi, err)
	}
}

func TestEditTooLarge(t *testing.T) {
	s, ws := newTestSession(t, map[string]string{"huge.txt": "text\n"})
	if err := os.Truncate(filepath.Join(ws, "huge.txt"), maxEditBytes+1); err != nil {
		t.Fatal(err)
	}
	mustFail(t, s, "edit", m{"path": "huge.txt", "oldText": "text", "newText": "x"},
		"huge.txt is 64.0 MB, more than the 64.0 MB that edit and write change in memory", "bash")
}
