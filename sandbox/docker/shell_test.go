package docker

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/testenv"
	"github.com/corralhq/corral/sandbox"
)

func TestShell(t *testing.T) {
	c := newSandbox(t, testConfig(t))
	sh(t, c, "mkdir -p sub && cd sub")
	inR, inW := io.Pipe()
	var out testenv.SyncBuffer
	resize := make(chan sandbox.WindowSize, 2)
	resize <- sandbox.WindowSize{Cols: 100, Rows: 30}
	type ret struct {
		code int
		err  error
	}
	done := make(chan ret, 1)
	go func() {
		code, err := c.Shell(context.Background(), inR, &out, resize)
		done <- ret{code, err}
	}()
	write := func(s string) {
		t.Helper()
		if _, err := io.WriteString(inW, s); err != nil {
			t.Fatal(err)
		}
	}
	write("stty size; pwd; echo marker-$((40+2))\n")
	waitFor(t, 30*time.Second, "the shell to answer", func() bool { return strings.Contains(out.String(), "marker-42") })
	o := out.String()
	if !strings.Contains(o, "30 100") || !strings.Contains(o, c.Workspace()+"/sub") {
		t.Errorf("output %q lacks the size or the directory", o)
	}
	resize <- sandbox.WindowSize{Cols: 70, Rows: 20}
	time.Sleep(200 * time.Millisecond)
	write("stty size\n")
	waitFor(t, 30*time.Second, "the new size", func() bool { return strings.Contains(out.String(), "20 70") })
	// Ctrl-C interrupts the foreground command, not the shell.
	write("sleep 100\n")
	time.Sleep(300 * time.Millisecond)
	write("\x03")
	write("echo after-$((1+1))\n")
	waitFor(t, 30*time.Second, "the shell after ^C", func() bool { return strings.Contains(out.String(), "after-2") })
	write("exit 7\n")
	select {
	case r := <-done:
		if r.err != nil || r.code != 7 {
			t.Errorf("shell returned %d %v", r.code, r.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("shell did not exit")
	}
	inW.Close()
	// End of input is ^D: the shell exits.
	inR2, inW2 := io.Pipe()
	go func() {
		io.WriteString(inW2, "true\n")
		inW2.Close()
	}()
	code, err := c.Shell(context.Background(), inR2, io.Discard, nil)
	if err != nil || code != 0 {
		t.Errorf("shell at end of input: %d %v", code, err)
	}
}
