package kube

import (
	"bytes"
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/corralhq/corral/internal/testenv"
	"github.com/corralhq/corral/sandbox"
)

// BenchmarkRoundTrip: a bash command's round trip through the pod's attach
// stream (the agent) against the baseline, the same command by `kubectl
// exec` into the same pod (client-go's executor, WebSocket, as kubectl
// does): one new exec session per command. Compare ns/op in the same run.
func BenchmarkRoundTrip(b *testing.B) {
	testenv.NeedsKube(b)
	be, err := New(Options{AgentImage: testenv.KubeAgentImage(b)})
	if err != nil {
		b.Fatal(err)
	}
	p, err := be.NewPod(sandbox.Config{Workspace: b.TempDir(), Image: testenv.Image, Memory: 512 << 20})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	defer p.Close(ctx)
	if err := p.Start(ctx); err != nil {
		b.Fatal(err)
	}
	b.Run("stream", func(b *testing.B) {
		for b.Loop() {
			res, err := p.Exec(ctx, sandbox.ExecRequest{Command: "true"})
			if err != nil || res.ExitCode != 0 {
				b.Fatal(res, err)
			}
		}
	})
	b.Run("kubectl-exec", func(b *testing.B) {
		u := be.api.podURL(p.Name(), "exec", &corev1.PodExecOptions{Container: sandboxContainer, Command: []string{"bash", "-c", "true"}, Stdout: true, Stderr: true})
		for b.Loop() {
			exec, err := be.executor(u)
			if err != nil {
				b.Fatal(err)
			}
			var out bytes.Buffer
			if err := exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out, Stderr: &out}); err != nil {
				b.Fatal(err, out.String())
			}
		}
	})
}
