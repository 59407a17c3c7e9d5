package tools

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/fsys"
	"github.com/corralhq/corral/sandbox"
)

// bigText is 200,000 lines of 50 bytes: 10 MB.
func bigText() string {
	var b strings.Builder
	filler := strings.Repeat("abcdefghij", 4)[:37]
	for i := range 200_000 {
		fmt.Fprintf(&b, "line %06d %s\n", i, filler)
	}
	return b.String()
}

// BenchmarkEdit10MB is one replacement in a 10 MB, 200,000-line file, diff
// included, against reading and rewriting the same file once: plainly, and with
// the fsyncs and rename that make the edit durable and atomic. The goal is at
// most 3x the plain rewrite.
func BenchmarkEdit10MB(b *testing.B) {
	text := bigText()
	const a, z = "line 100000 ", "LINE 100000 "

	b.Run("edit", func(b *testing.B) {
		s, _ := newTestSession(b, map[string]string{"big.txt": text})
		mustOK(b, s, "read", m{"path": "big.txt", "limit": 1})
		b.SetBytes(int64(len(text)))
		i := 0
		for b.Loop() {
			old, new := a, z
			if i%2 == 1 {
				old, new = z, a
			}
			r, err := s.Edit(context.Background(), EditParams{Path: "big.txt", OldText: old, NewText: new})
			if err != nil || r.IsError {
				b.Fatal(err, r.Content)
			}
			i++
		}
	})
	b.Run("rewrite", func(b *testing.B) {
		p := filepath.Join(b.TempDir(), "big.txt")
		os.WriteFile(p, []byte(text), 0o644)
		b.SetBytes(int64(len(text)))
		for b.Loop() {
			data, err := os.ReadFile(p)
			if err != nil {
				b.Fatal(err)
			}
			if err := os.WriteFile(p, data, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("rewrite+fsync", func(b *testing.B) {
		dir := b.TempDir()
		root, _ := fsys.OpenLocal(dir)
		defer root.Close()
		os.WriteFile(filepath.Join(dir, "big.txt"), []byte(text), 0o644)
		b.SetBytes(int64(len(text)))
		for b.Loop() {
			data, err := root.OS().ReadFile("big.txt")
			if err != nil {
				b.Fatal(err)
			}
			if _, err := writeAtomic(root, "big.txt", data, 0o644, nil, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// sparseHuge makes a file of size bytes whose first 200 KB are text lines and
// the rest a hole (zeros), costing no disk.
func sparseHuge(tb testing.TB, dir string, size int64) string {
	tb.Helper()
	p := filepath.Join(dir, "huge.log")
	f, err := os.Create(p)
	if err != nil {
		tb.Fatal(err)
	}
	w := bufio.NewWriter(f)
	for i := 0; i < 20_000; i++ {
		fmt.Fprintf(w, "%05d log\n", i)
	}
	if err := w.Flush(); err != nil {
		tb.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		tb.Fatal(err)
	}
	f.Close()
	return p
}

// BenchmarkReadHead2GB reads the first 2000 lines of a 2 GB file: only the
// lines shown are read (a file over 64 MB is not counted or hashed), in
// constant memory (see allocs/op and B/op).
func BenchmarkReadHead2GB(b *testing.B) {
	dir := b.TempDir()
	sparseHuge(b, dir, 2<<30)
	s, err := NewSession(context.Background(), Options{Workspace: dir})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	b.SetBytes(2 << 30)
	for b.Loop() {
		r, err := s.Read(context.Background(), ReadParams{Path: "huge.log"})
		if err != nil || r.IsError {
			b.Fatal(err, r.Content)
		}
	}
}

// TestReadHugeFileHelper is the child of TestReadHugeFileMemory: it reads the
// head of the file and prints its peak RSS in kB and the time taken.
func TestReadHugeFileHelper(t *testing.T) {
	dir := os.Getenv("CORRAL_HUGE_DIR")
	if dir == "" {
		t.Skip("helper process only")
	}
	s, err := NewSession(context.Background(), Options{Workspace: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	start := time.Now()
	r, err := s.Read(context.Background(), ReadParams{Path: "huge.log"})
	if err != nil || r.IsError {
		t.Fatal(err, r.Content)
	}
	took := time.Since(start)
	if !strings.HasSuffix(r.Content, "[Showing lines 1-2000 of a 2.1 GB file, too large to count its lines. Use offset=2001 to continue.]") {
		t.Fatalf("read: %s", clip(r.Content))
	}
	fmt.Printf("hwm_kb=%d took_ms=%d\n", vmHWM(), took.Milliseconds())
}

func vmHWM() int {
	b, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return n
		}
	}
	return -1
}

// Reading the first lines of a 2 GB file does not load it: the whole process
// stays under 64 MB of peak RSS.
func TestReadHugeFileMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("streams 2 GB")
	}
	if runtime.GOOS != "linux" {
		t.Skip("reads VmHWM from /proc")
	}
	dir := t.TempDir()
	sparseHuge(t, dir, 2<<30)
	cmd := exec.Command(os.Args[0], "-test.run=^TestReadHugeFileHelper$")
	cmd.Env = append(os.Environ(), "CORRAL_HUGE_DIR="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	var hwm, ms int
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "hwm_kb=") {
			fmt.Sscanf(l, "hwm_kb=%d took_ms=%d", &hwm, &ms)
		}
	}
	if hwm <= 0 {
		t.Fatalf("no measurement:\n%s", out)
	}
	t.Logf("peak RSS %d MB reading the head of a 2 GB file (%d ms)", hwm>>10, ms)
	if hwm > 64<<10 {
		t.Errorf("peak RSS %d kB, over 64 MB", hwm)
	}
}

// BenchmarkSmallFile is the tools' everyday work on a 4 KB source file, where
// the cost per call (resolving the path, opening, the read-state, the atomic
// rename) dominates: a read of the whole file, an edit, a write.
func BenchmarkSmallFile(b *testing.B) {
	var text strings.Builder
	for i := range 100 {
		fmt.Fprintf(&text, "\tx%03d := compute(%d) // some code\n", i, i)
	}
	ctx := context.Background()
	b.Run("read", func(b *testing.B) {
		s, _ := newTestSession(b, map[string]string{"src/pkg/a.go": text.String()})
		for b.Loop() {
			if r, err := s.Read(ctx, ReadParams{Path: "src/pkg/a.go"}); err != nil || r.IsError {
				b.Fatal(err, r.Content)
			}
		}
	})
	b.Run("edit", func(b *testing.B) {
		s, _ := newTestSession(b, map[string]string{"src/pkg/a.go": text.String()})
		mustOK(b, s, "read", m{"path": "src/pkg/a.go"})
		i := 0
		for b.Loop() {
			old, new := "x050 :=", "y050 :="
			if i%2 == 1 {
				old, new = new, old
			}
			if r, err := s.Edit(ctx, EditParams{Path: "src/pkg/a.go", OldText: old, NewText: new}); err != nil || r.IsError {
				b.Fatal(err, r.Content)
			}
			i++
		}
	})
	b.Run("write", func(b *testing.B) {
		s, _ := newTestSession(b, map[string]string{"src/pkg/a.go": text.String()})
		mustOK(b, s, "read", m{"path": "src/pkg/a.go"})
		for b.Loop() {
			if r, err := s.Write(ctx, WriteParams{Path: "src/pkg/a.go", Content: text.String()}); err != nil || r.IsError {
				b.Fatal(err, r.Content)
			}
		}
	})
}

// instantExec is a sandbox that answers at once.
type instantExec struct{}

func (instantExec) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	return sandbox.ExecResult{}, nil
}

// BenchmarkBashCallPath is one bash call on the host's side alone — the
// policy, the log file, output shaping, events, the record of the running
// command that host approvals use — with a sandbox that answers at once.
// Compare it with the same benchmark at another commit, in the same run.
func BenchmarkBashCallPath(b *testing.B) {
	s, _ := newTestSession(b, nil, func(o *Options) { o.Sandbox, o.Policy = instantExec{}, allowAll{} })
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Bash(ctx, BashParams{Command: "true"}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadHeadSparseHole reads the first lines of sparse files of
// 1 GiB and 64 GiB whose hole (one line of NULs without end) starts at
// line 1901, among the 2000 lines asked for: the time is the same for both,
// as read stops 16 MB into the hole's line.
func BenchmarkReadHeadSparseHole(b *testing.B) {
	for _, size := range []int64{1 << 30, 64 << 30} {
		b.Run(fmt.Sprintf("%dGiB", size>>30), func(b *testing.B) {
			dir := b.TempDir()
			var text strings.Builder
			for i := 1; i <= 1900; i++ {
				fmt.Fprintf(&text, "%d\n", i)
			}
			p := filepath.Join(dir, "hole.txt")
			if err := os.WriteFile(p, []byte(text.String()), 0o644); err != nil {
				b.Fatal(err)
			}
			if err := os.Truncate(p, size); err != nil {
				b.Fatal(err)
			}
			s, err := NewSession(context.Background(), Options{Workspace: dir})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			for b.Loop() {
				r, err := s.Read(context.Background(), ReadParams{Path: "hole.txt"})
				if err != nil || r.IsError {
					b.Fatal(err, r.Content)
				}
			}
		})
	}
}
