package docker

import (
	"bytes"
	"encoding/binary"
	"io"
	"slices"
	"testing"

	"github.com/corralhq/corral/sandbox"
)

func TestDemuxReader(t *testing.T) {
	var b bytes.Buffer
	put := func(stream byte, s string) {
		var h [8]byte
		h[0] = stream
		binary.BigEndian.PutUint32(h[4:], uint32(len(s)))
		b.Write(h[:])
		b.WriteString(s)
	}
	put(1, "hello ")
	put(2, "agent says\nhi\n")
	put(1, "")
	put(1, "world")
	log := sandbox.NewAgentLog(nil)
	got, err := io.ReadAll(&demuxReader{r: &b, stderr: log})
	if err != nil || string(got) != "hello world" {
		t.Errorf("stdout %q %v", got, err)
	}
	if tail := log.Tail(); tail != "agent says; hi" {
		t.Errorf("stderr tail %q", tail)
	}
}

func TestCommandEnv(t *testing.T) {
	env := CommandEnv(
		[]string{"PATH=/image/bin", "LANG=en_US.UTF-8", "HOME=/root", "GOPATH=/go"},
		[]string{"FOO=bar", "PATH=/mine"},
	)
	want := []string{"LANG=en_US.UTF-8", "GOPATH=/go", "HOME=/tmp/home", "TERM=xterm-256color", "FOO=bar", "PATH=/mine"}
	if !slices.Equal(env, want) {
		t.Errorf("env %q, want %q", env, want)
	}
	env = CommandEnv(nil, nil)
	for _, w := range []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8", "HOME=/tmp/home", "TERM=xterm-256color"} {
		if !slices.Contains(env, w) {
			t.Errorf("default env %q lacks %q", env, w)
		}
	}
}
