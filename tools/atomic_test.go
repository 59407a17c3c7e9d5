package tools

import (
	"bufio"
	"bytes"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/corralhq/corral/fsys"
)

// crashContents are the two versions the crash helper writes in turn; each is
// big enough that a write takes a while.
func crashContents() [2][]byte {
	return [2][]byte{bytes.Repeat([]byte("old content line\n"), 1<<14), bytes.Repeat([]byte("NEW CONTENT LINE, LONGER\n"), 1<<14)}
}

// TestAtomicWriteHelper is the child process of TestAtomicWriteSurvivesKill: it
// rewrites a file forever, printing a dot after each write.
func TestAtomicWriteHelper(t *testing.T) {
	dir := os.Getenv("CORRAL_CRASH_DIR")
	if dir == "" {
		t.Skip("helper process only")
	}
	root, err := fsys.OpenLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	c := crashContents()
	for i := 0; ; i++ {
		if _, err := writeAtomic(root, "f", c[i%2], 0o644, nil, nil); err != nil {
			t.Fatal(err)
		}
		os.Stdout.Write([]byte("."))
	}
}

// A process killed at any instant of a write leaves the old content or the new
// one, never a torn file.
func TestAtomicWriteSurvivesKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dir := t.TempDir()
	c := crashContents()
	if err := os.WriteFile(filepath.Join(dir, "f"), c[1], 0o644); err != nil {
		t.Fatal(err)
	}
	leftovers := 0
	for round := range 25 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestAtomicWriteHelper$")
		cmd.Env = append(os.Environ(), "CORRAL_CRASH_DIR="+dir)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Let it finish a random number of writes, then kill it in the
		// middle of the next one, wherever that is.
		br := bufio.NewReader(out)
		for range 1 + rand.IntN(5) {
			if _, err := br.ReadByte(); err != nil {
				t.Fatalf("round %d: helper: %v", round, err)
			}
		}
		cmd.Process.Kill()
		cmd.Wait()

		got, err := os.ReadFile(filepath.Join(dir, "f"))
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if !bytes.Equal(got, c[0]) && !bytes.Equal(got, c[1]) {
			t.Fatalf("round %d: torn file of %d bytes", round, len(got))
		}
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			if isTempName(e.Name()) {
				leftovers++
				os.Remove(filepath.Join(dir, e.Name()))
			}
		}
	}
	t.Logf("%d temporary files left by killed writes (hidden, named .f%s*.tmp)", leftovers, tempMarker)
}
