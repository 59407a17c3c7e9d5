package tools

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// swapping exchanges the directory d and the symbolic link link atomically,
// again and again until the test ends — so that d is never missing — and
// returns the count of swaps made.
func swapping(t *testing.T, d, link string) *atomic.Int64 {
	t.Helper()
	if err := unix.Renameat2(unix.AT_FDCWD, d, unix.AT_FDCWD, link, unix.RENAME_EXCHANGE); err != nil {
		t.Skip("no RENAME_EXCHANGE:", err)
	}
	stop := make(chan struct{})
	var swaps atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if unix.Renameat2(unix.AT_FDCWD, d, unix.AT_FDCWD, link, unix.RENAME_EXCHANGE) == nil {
				swaps.Add(1)
			}
		}
	})
	t.Cleanup(func() {
		close(stop)
		wg.Wait()
	})
	return &swaps
}

// A directory swapped for a symbolic link to the outside, atomically and again
// and again while the tools run, never lets a read or a write out.
func TestConfinementRace(t *testing.T) {
	s, ws, outside := confinementWorkspace(t)
	writeFile(t, ws, "d/secret", "inside\n")
	d, link := filepath.Join(ws, "d"), filepath.Join(ws, "d.link")
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	swaps := swapping(t, d, link)
	for range 500 {
		r := call(t, s, "read", m{"path": "d/secret"})
		if strings.Contains(r.Content, "top secret") {
			t.Fatalf("read escaped: %s", r.Content)
		}
		call(t, s, "write", m{"path": "d/secret", "content": "pwned\n"})
		call(t, s, "write", m{"path": "d/new", "content": "pwned\n"})
	}
	if got := readFile(t, outside, "secret"); got != "top secret\n" {
		t.Errorf("the secret outside was overwritten: %q", got)
	}
	ents, _ := os.ReadDir(outside)
	for _, e := range ents {
		if e.Name() != "secret" {
			t.Errorf("a file appeared outside: %s", e.Name())
		}
	}
	t.Logf("%d swaps during 1500 calls", swaps.Load())
	if swaps.Load() == 0 {
		t.Error("no swap happened during the calls: the race was not exercised")
	}
}

// A directory swapped for a symbolic link to a protected directory — or to a
// directory below one, such as a submodule's hooks — while the tools run never
// lets a write into it: the directory actually opened is checked, not only the
// path resolved before.
func TestProtectedRace(t *testing.T) {
	s, ws := newTestSession(t, map[string]string{
		".git/modules/lib/hooks/README": "hooks\n",
		"d/x":                           "x\n",
	})
	d, link := filepath.Join(ws, "d"), filepath.Join(ws, "d.link")
	if err := os.Symlink(".git/modules/lib/hooks", link); err != nil {
		t.Fatal(err)
	}
	swaps := swapping(t, d, link)
	for range 1000 {
		call(t, s, "write", m{"path": "d/post-checkout", "content": "#!/bin/sh\ntouch /tmp/pwned\n"})
	}
	if swaps.Load() == 0 {
		t.Error("no swap happened during the writes: the race was not exercised")
	}
	if _, err := os.Lstat(filepath.Join(ws, ".git/modules/lib/hooks/post-checkout")); err == nil {
		t.Error("a hook was written into a submodule's hooks through a swapped directory")
	}
}
