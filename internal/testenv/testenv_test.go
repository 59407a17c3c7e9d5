package testenv

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	os.Exit(Main(m))
}

// TestWaitFor: it returns once the condition holds, having looked until then,
// and not after.
func TestWaitFor(t *testing.T) {
	calls := 0
	WaitFor(t, time.Minute, "the third look", func() bool {
		calls++
		return calls == 3
	})
	if calls != 3 {
		t.Errorf("the condition was looked at %d times, want 3", calls)
	}
}

// TestWaitForFails: a condition that never holds fails the test, saying what
// was waited for and how long, and stops it there.
func TestWaitForFails(t *testing.T) {
	rec := &recorder{TB: t}
	done := make(chan struct{})
	after := false
	go func() {
		defer close(done)
		WaitFor(rec, 50*time.Millisecond, "the pool to fill", func() bool { return false })
		after = true
	}()
	<-done
	if !rec.failed || after {
		t.Fatalf("failed %v, went on after the wait %v", rec.failed, after)
	}
	if want := "the pool to fill: not within 50ms"; rec.msg != want {
		t.Errorf("message %q, want %q", rec.msg, want)
	}
}

// recorder is a test that records its failure, as a test does, without
// failing the real one.
type recorder struct {
	testing.TB
	failed bool
	msg    string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.failed, r.msg = true, fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// TestAgentBuiltLazily: the agent is built on first use, into the temporary
// directory the process started with, and survives a test that moved TMPDIR.
func TestAgentBuiltLazily(t *testing.T) {
	if agent != "" {
		t.Fatalf("the agent was built before any test asked for it: %s", agent)
	}
	if testing.Short() {
		t.Skip("builds corral: skipped with -short")
	}
	moved := t.TempDir()
	t.Setenv("TMPDIR", moved)
	path := Agent(t)
	if strings.HasPrefix(path, moved) || !strings.HasPrefix(path, tmpRoot) {
		t.Errorf("the agent is %s, want it under %s, not under the test's TMPDIR", path, tmpRoot)
	}
	if again := Agent(t); again != path {
		t.Errorf("a second call gave %s, the first %s", again, path)
	}
}
