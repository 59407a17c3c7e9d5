package tools

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/corralhq/corral/fsys"
)

// 200 concurrent edits to one file, each inserting its own line through one of
// several spellings of the path, all land.
func TestConcurrentEditsAllLand(t *testing.T) {
	s, ws := newTestSession(t, map[string]string{"src/f.txt": "START\nEND\n"})
	if err := os.Symlink("src/f.txt", filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	spellings := []string{"src/f.txt", "./src/f.txt", "src//f.txt", "link", filepath.Join(ws, "src/f.txt"), "src/../src/f.txt"}
	mustOK(t, s, "read", m{"path": "src/f.txt"})
	const n = 200
	var wg sync.WaitGroup
	errs := make(chan string, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := s.Edit(context.Background(), EditParams{
				Path:    spellings[i%len(spellings)],
				OldText: "END\n",
				NewText: fmt.Sprintf("line %d\nEND\n", i),
			})
			switch {
			case err != nil:
				errs <- err.Error()
			case r.IsError:
				errs <- r.Content
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Errorf("edit failed: %s", e)
	}
	got := readFile(t, ws, "src/f.txt")
	for i := range n {
		if !strings.Contains(got, fmt.Sprintf("\nline %d\n", i)) {
			t.Errorf("line %d was lost", i)
		}
	}
	if lines := strings.Count(got, "\n"); lines != n+2 {
		t.Errorf("%d lines, want %d", lines, n+2)
	}
	if k := s.queue.size(); k != 0 {
		t.Errorf("%d queue keys held after the edits", k)
	}
}

// size is the number of keys held.
func (q *writeQueue) size() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.keys)
}

// waiters returns how many callers wait for key.
func (q *writeQueue) waiters(key string) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	if k := q.keys[key]; k != nil {
		return len(k.waiters)
	}
	return 0
}

func waitFor(cond func() bool) {
	for !cond() {
		runtime.Gosched()
	}
}

func TestQueueFIFO(t *testing.T) {
	q := newWriteQueue()
	ctx := context.Background()
	release, _ := q.acquire(ctx, "k")
	var (
		mu    sync.Mutex // guards order
		order []int
		wg    sync.WaitGroup
	)
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rel, err := q.acquire(ctx, "k")
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			rel()
		}()
		waitFor(func() bool { return q.waiters("k") == i+1 }) // i is queued
	}
	release()
	wg.Wait()
	for i, v := range order {
		if v != i {
			t.Fatalf("order %v, want arrival order", order)
		}
	}
	if q.size() != 0 {
		t.Errorf("%d keys left", q.size())
	}
}

func TestQueueKeysIndependent(t *testing.T) {
	q := newWriteQueue()
	ctx := context.Background()
	ra, _ := q.acquire(ctx, "a")
	// b is free while a is held: this would deadlock otherwise.
	rb, err := q.acquire(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	rb()
	ra()
	if q.size() != 0 {
		t.Errorf("%d keys left", q.size())
	}
}

func TestQueueCancel(t *testing.T) {
	q := newWriteQueue()
	release, _ := q.acquire(context.Background(), "k")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		_, err := q.acquire(ctx, "k")
		done <- err
	}()
	waitFor(func() bool { return q.waiters("k") == 1 })
	cancel()
	if err := <-done; err != context.Canceled {
		t.Errorf("err = %v", err)
	}
	if q.waiters("k") != 0 {
		t.Error("the cancelled waiter is still queued")
	}
	release()
	// The key is free again.
	r, err := q.acquire(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	r()
	if q.size() != 0 {
		t.Errorf("%d keys left", q.size())
	}
}

// Case-insensitive filesystems fold keys, so A.TXT and a.txt share a queue and a
// read-state entry.
func TestKeyFoldsCase(t *testing.T) {
	ws := &workspace{foldCase: true}
	if ws.keyOf("Src/A.TXT") != ws.keyOf("src/a.txt") {
		t.Error("keys differ by case on a case-insensitive filesystem")
	}
	ws.foldCase = false
	if ws.keyOf("Src/A.TXT") == ws.keyOf("src/a.txt") {
		t.Error("keys fold case on a case-sensitive filesystem")
	}
}

func TestStoredName(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "README.md", "x")
	root, err := fsys.OpenLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	for in, want := range map[string]string{"README.md": "README.md", "readme.MD": "README.md", "new.txt": "new.txt"} {
		if got := storedName(root, in); got != want {
			t.Errorf("storedName(%q) = %q, want %q", in, got, want)
		}
	}
}
