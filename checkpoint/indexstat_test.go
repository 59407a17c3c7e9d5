package checkpoint

import (
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// indexStat is what git ls-files --debug says of path's entry in the index
// of env: its mtime's seconds and its size.
func indexStat(t *testing.T, s *Store, env []string, path string) (mtime, size int64) {
	t.Helper()
	out, err := s.git.run(context.Background(), env, nil, "ls-files", "--debug", "--", path)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`mtime: (\d+):\d+`).FindStringSubmatch(string(out))
	z := regexp.MustCompile(`size: (\d+)`).FindStringSubmatch(string(out))
	if m == nil || z == nil {
		t.Fatalf("ls-files --debug %s:\n%s", path, out)
	}
	mtime, _ = strconv.ParseInt(m[1], 10, 64)
	size, _ = strconv.ParseInt(z[1], 10, 64)
	return mtime, size
}

// The files corral reads and stores itself get their descriptor's stat data
// in corral's index: without it, every later ls-files reads and hashes them
// again (git gives the entries of update-index --index-info none).
func TestCheckpointEntriesHaveStatData(t *testing.T) {
	ctx := context.Background()
	ws := newRepo(t)
	s := open(t, ws)
	r, err := s.Begin(ctx, "s1")
	must(t, err)
	defer r.Close()
	_, err = r.Checkpoint(ctx, Call{Tool: "bash"})
	must(t, err)
	writeFile(t, filepath.Join(ws, "README.md"), "hello, changed\n", 0o644)
	writeFile(t, filepath.Join(ws, "new/file.txt"), "a new file\n", 0o644)
	writeFile(t, filepath.Join(ws, "just-now.txt"), "written as the checkpoint begins\n", 0o644)
	time.Sleep(recentWindow + 100*time.Millisecond) // older than recentWindow...
	writeFile(t, filepath.Join(ws, "just-now.txt"), "written as the checkpoint begins, again\n", 0o644)
	c, err := r.Checkpoint(ctx, Call{Tool: "bash"})
	must(t, err)
	// ...but for the file written just before the checkpoint: it may change
	// again within the same tick of the filesystem's clock.
	if _, size := indexStat(t, s, s.git.worktreeEnv(), "just-now.txt"); size != 0 {
		t.Errorf("a file changed just before the checkpoint has stat data (size %d)", size)
	}
	for _, p := range []string{"README.md", "new/file.txt"} {
		fi, err := os.Stat(filepath.Join(ws, p))
		must(t, err)
		mtime, size := indexStat(t, s, s.git.worktreeEnv(), p)
		if size != fi.Size() || mtime != fi.ModTime().Unix() {
			t.Errorf("%s: corral's index has mtime %d, size %d; the file has %d, %d", p, mtime, size, fi.ModTime().Unix(), fi.Size())
		}
	}
	// Without: notes.txt, written just before the first checkpoint, and
	// just-now.txt.
	if b, _ := os.ReadFile(filepath.Join(s.dir, "unrefreshed")); strings.TrimSpace(string(b)) != "2" {
		t.Errorf("entries counted as without stat data: %q", b)
	}

	// The same size and mtime with other bytes: the ctime tells, and the
	// next checkpoint records them.
	fi, err := os.Stat(filepath.Join(ws, "README.md"))
	must(t, err)
	writeFile(t, filepath.Join(ws, "README.md"), "HELLO, CHANGED\n", 0o644)
	must(t, os.Chtimes(filepath.Join(ws, "README.md"), fi.ModTime(), fi.ModTime()))
	c2, err := r.Checkpoint(ctx, Call{Tool: "bash"})
	must(t, err)
	if c2.Commit == c.Commit {
		t.Fatal("a file rewritten with its size and mtime kept was not recorded")
	}
	if got := storeGit(t, s, "cat-file", "-p", c2.Commit+":README.md"); got != "HELLO, CHANGED\n" {
		t.Errorf("README.md recorded as %q", got)
	}
}

// patchIndexStat writes stat data into the entries of every index version
// git writes, with a checksum git accepts, and leaves the others alone.
func TestPatchIndexStatVersions(t *testing.T) {
	for _, version := range []string{"2", "3", "4"} {
		t.Run("v"+version, func(t *testing.T) {
			ws := t.TempDir()
			hostGit(t, ws, "init", "-q")
			for _, p := range []string{"a.txt", "dir/b.txt", "dir/c.txt", "dir/sub/d.txt", "e.txt"} {
				writeFile(t, filepath.Join(ws, p), "content of "+p+"\n", 0o644)
			}
			hostGit(t, ws, "add", "a.txt", "dir")
			if version == "3" {
				hostGit(t, ws, "add", "-N", "e.txt") // an extended flag: version 3
			}
			hostGit(t, ws, "update-index", "--index-version", version)
			index := filepath.Join(ws, ".git", "index")
			data, err := os.ReadFile(index)
			must(t, err)
			if got := data[7]; fmt.Sprint(got) != version {
				t.Fatalf("index version %d", got)
			}
			want := map[string]statEntry{}
			st := statData{ok: true, ctimeS: 1000, mtimeS: 2000, mtimeNs: 5, ino: 7, uid: 8, gid: 9, size: 12345}
			for _, line := range strings.Split(strings.TrimSpace(hostGit(t, ws, "ls-files", "-s", "dir/c.txt", "a.txt")), "\n") {
				f := strings.Fields(line)
				raw, _ := hex.DecodeString(f[1])
				want[f[3]] = statEntry{oid: raw, stat: st}
			}
			before := hostGit(t, ws, "ls-files", "--debug", "dir/b.txt", "dir/sub/d.txt")
			n, err := setIndexStat(index, 20, want)
			must(t, err)
			if n != 2 {
				t.Fatalf("%d entries given stat data, want 2", n)
			}
			got := hostGit(t, ws, "ls-files", "--debug", "a.txt", "dir/c.txt")
			if strings.Count(got, "mtime: 2000:5") != 2 || strings.Count(got, "size: 12345") != 2 || strings.Count(got, "uid: 8\tgid: 9") != 2 {
				t.Errorf("the entries after:\n%s", got)
			}
			if after := hostGit(t, ws, "ls-files", "--debug", "dir/b.txt", "dir/sub/d.txt"); after != before {
				t.Errorf("other entries changed:\n%s\nwas\n%s", after, before)
			}
			hostGit(t, ws, "ls-files", "-s") // git reads it: its checksum holds

			// An object other than the entry's: no stat data.
			wrong := map[string]statEntry{"dir/b.txt": {oid: make([]byte, 20), stat: st}}
			if n, err := setIndexStat(index, 20, wrong); n != 0 || err != nil {
				t.Errorf("an entry of another object was given stat data: %d, %v", n, err)
			}
		})
	}
	// Not an index: left alone.
	junk := filepath.Join(t.TempDir(), "index")
	must(t, os.WriteFile(junk, []byte("DIRC\x00\x00\x00\x02\x00\x00\x00\x05garbage"+strings.Repeat("x", 20)), 0o600))
	fi, _ := os.Stat(junk)
	if _, err := setIndexStat(junk, 20, map[string]statEntry{"x": {stat: statData{ok: true}}}); err == nil {
		t.Error("a truncated index was taken")
	}
	if fi2, _ := os.Stat(junk); fi2.Size() != fi.Size() {
		t.Error("a truncated index was rewritten")
	}
}

// The first checkpoint of a repository's workspace starts from a copy of
// the repository's index and brings over the blobs it names in one pack:
// the files that match their entries are not read and stored one by one.
func TestFirstCheckpointReusesIndex(t *testing.T) {
	ctx := context.Background()
	ws := newRepo(t)
	s := open(t, ws)
	r, err := s.Begin(ctx, "s1")
	must(t, err)
	defer r.Close()
	c, err := r.Checkpoint(ctx, Call{Tool: "bash"})
	must(t, err)
	packs, _ := filepath.Glob(filepath.Join(s.git.objects, "pack", "*.pack"))
	if len(packs) == 0 {
		t.Error("no pack of the repository's blobs in corral's store")
	}
	oid := strings.TrimSpace(storeGit(t, s, "rev-parse", c.Commit+":src/main.go"))
	if _, err := os.Lstat(filepath.Join(s.git.objects, oid[:2], oid[2:])); err == nil {
		t.Error("a file that matched the repository's index was read and stored anew")
	}
	if oid != strings.TrimSpace(hostGit(t, ws, "rev-parse", "HEAD:src/main.go")) {
		t.Error("src/main.go recorded as another blob")
	}
}
