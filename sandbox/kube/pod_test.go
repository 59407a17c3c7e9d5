package kube_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corralhq/corral/sandbox"
	"github.com/corralhq/corral/sandbox/kube"
	"github.com/corralhq/corral/sandbox/sandboxtest"
)

func TestPodRuns(t *testing.T) {
	b := backend(t, kube.Options{})
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "hello.txt"), []byte("from the host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := newPod(t, b, sandbox.Config{Workspace: ws})
	ctx := context.Background()
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	res, out, _ := sandboxtest.Exec(t, p, sandbox.ExecRequest{Command: "id -u; id -g; cat hello.txt; pwd; echo $HOME", Pipes: true})
	t.Logf("%+v %q", res, out)
	want := "65532\n65532\nfrom the host\n" + ws + "\n/tmp/home\n"
	if res.ExitCode != 0 || out != want {
		t.Errorf("got exit %d, %q; want %q", res.ExitCode, out, want)
	}
	if !strings.HasPrefix(p.Name(), "corral-") {
		t.Errorf("pod name %q", p.Name())
	}
}

// The conformance suite of every backend, on a pod: the exec cases, and the
// file cases on its workspace through the agent.
func TestConformance(t *testing.T) {
	b := backend(t, kube.Options{})
	sandboxtest.RunWith(t, func(t *testing.T) sandbox.Sandbox {
		return newPod(t, b, sandbox.Config{})
	}, sandboxtest.Limits{OneUser: true, NoInputWait: true})
}
