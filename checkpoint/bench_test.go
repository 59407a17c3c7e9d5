package checkpoint

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// benchFiles is the size of the benchmark's repository.
const benchFiles = 100_000

var (
	benchOnce sync.Once
	benchRepo string
	benchErr  error
)

// bigRepo makes, once per process, a repository of benchFiles small files in
// 1000 directories, committed, with the index refreshed as a user's is.
func bigRepo(b *testing.B) string {
	benchOnce.Do(func() {
		dir, err := os.MkdirTemp("", "corral-bench-repo-")
		if err != nil {
			benchErr = err
			return
		}
		benchRepo = dir
		for d := range benchFiles / 100 {
			sub := filepath.Join(dir, fmt.Sprintf("pkg%03d/sub%d", d/10, d%10))
			if err := os.MkdirAll(sub, 0o755); err != nil {
				benchErr = err
				return
			}
			for f := range 100 {
				content := fmt.Sprintf("package p%d\n\n// file %d of directory %d\nfunc F%d() int { return %d }\n", d, f, d, f, d*f)
				if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%03d.go", f)), []byte(content), 0o644); err != nil {
					benchErr = err
					return
				}
			}
		}
		// Packed, as a repository of that size is, and with no automatic gc
		// running in the background while it is measured.
		for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"-c", "gc.auto=0", "commit", "-q", "-m", "big"}, {"gc", "-q"}, {"status", "--short"}} {
			cmd := exec.Command("git", args...)
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
				"GIT_AUTHOR_NAME=b", "GIT_AUTHOR_EMAIL=b@b", "GIT_COMMITTER_NAME=b", "GIT_COMMITTER_EMAIL=b@b")
			if out, err := cmd.CombinedOutput(); err != nil {
				benchErr = fmt.Errorf("git %v: %v\n%s", args, err, out)
				return
			}
		}
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	return benchRepo
}

func stashCreate(b *testing.B, ws string) {
	cmd := exec.Command("git", "stash", "create")
	cmd.Dir = ws
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=b", "GIT_AUTHOR_EMAIL=b@b", "GIT_COMMITTER_NAME=b", "GIT_COMMITTER_EMAIL=b@b")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("git stash create: %v\n%s", err, out)
	}
}

// BenchmarkCheckpoint100k: a checkpoint of a 100,000-file repository when
// nothing changed and when one file did, against git stash create on the same
// tree in the same run (which records tracked files only: corral also looks
// for untracked ones).
func BenchmarkCheckpoint100k(b *testing.B) {
	ws := bigRepo(b)
	ctx := context.Background()
	state := b.TempDir()
	s, err := Open(ctx, Options{Workspace: ws, StateDir: state})
	if err != nil {
		b.Fatal(err)
	}
	r, err := s.Begin(ctx, "bench")
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	// The first checkpoint of a workspace checks every file against the
	// repository's index once.
	b.Run("first", func(b *testing.B) {
		for range b.N {
			os.RemoveAll(s.git.index)
			if _, err := r.Checkpoint(ctx, Call{Tool: "bash"}); err != nil {
				b.Fatal(err)
			}
		}
	})
	target := filepath.Join(ws, "pkg050/sub5/f050.go")
	n := 0
	change := func() {
		n++
		if err := os.WriteFile(target, []byte(fmt.Sprintf("package p\n// change %d\n", n)), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("corral-unchanged", func(b *testing.B) {
		for range b.N {
			if _, err := r.Checkpoint(ctx, Call{Tool: "bash"}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("corral-one-file", func(b *testing.B) {
		for range b.N {
			b.StopTimer()
			change()
			b.StartTimer()
			if _, err := r.Checkpoint(ctx, Call{Tool: "bash"}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("stash-create-unchanged", func(b *testing.B) {
		stashCreate(b, ws) // lets git refresh its index after the changes above
		for range b.N {
			stashCreate(b, ws)
		}
	})
	b.Run("stash-create-one-file", func(b *testing.B) {
		for range b.N {
			b.StopTimer()
			change()
			b.StartTimer()
			stashCreate(b, ws)
		}
	})
}

// BenchmarkCheckpoint200Calls: the disk 200 checkpoints take, each after a
// one-file change, in the 100,000-file repository: what the repository and
// corral's state directory grew by, and, as the baseline of the same run, the
// size of the repository's .git before them.
func BenchmarkCheckpoint200Calls(b *testing.B) {
	ws := bigRepo(b)
	ctx := context.Background()
	for range b.N {
		state := b.TempDir()
		s, err := Open(ctx, Options{Workspace: ws, StateDir: state})
		if err != nil {
			b.Fatal(err)
		}
		r, err := s.Begin(ctx, "bench200")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := r.Checkpoint(ctx, Call{Tool: "bash"}); err != nil {
			b.Fatal(err)
		}
		gitBefore := du(b, filepath.Join(ws, ".git"))
		stateBefore := du(b, state)
		for i := range 200 {
			p := filepath.Join(ws, fmt.Sprintf("pkg%03d/sub%d/f%03d.go", i%100, i%10, i%100))
			if err := os.WriteFile(p, []byte(fmt.Sprintf("package p\n// call %d\n", i)), 0o644); err != nil {
				b.Fatal(err)
			}
			if _, err := r.Checkpoint(ctx, Call{Tool: "bash"}); err != nil {
				b.Fatal(err)
			}
		}
		usage, err := s.DiskUsage(ctx)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(gitBefore)/1024, "repo-KiB")
		b.ReportMetric(float64(du(b, filepath.Join(ws, ".git"))-gitBefore)/1024, "repo-growth-KiB")
		b.ReportMetric(float64(du(b, state)-stateBefore)/1024, "state-growth-KiB")
		b.ReportMetric(float64(usage)/1024, "disk-usage-KiB")
		b.ReportMetric(float64(du(b, filepath.Join(ws, ".git", "index")))/1024, "git-index-KiB")
		// The checkpoints' objects are loose, a few small ones each; the
		// repository's next gc packs them.
		gc := exec.Command("git", "-c", "gc.reflogExpire=now", "gc", "-q")
		gc.Dir = ws
		gc.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
		if out, err := gc.CombinedOutput(); err != nil {
			b.Fatalf("git gc: %v\n%s", err, out)
		}
		b.ReportMetric(float64(du(b, filepath.Join(ws, ".git"))-gitBefore)/1024, "repo-growth-after-gc-KiB")
		r.Close()
	}
}

// du is the space the files under p take on disk, in bytes.
func du(b *testing.B, p string) int64 {
	out, err := exec.Command("du", "-s", "-B1", p).Output()
	if err != nil {
		b.Fatal(err)
	}
	var n int64
	fmt.Sscan(strings.Fields(string(out))[0], &n)
	return n
}
