package kube_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"

	"github.com/corralhq/corral/internal/testenv"
	"github.com/corralhq/corral/sandbox"
	"github.com/corralhq/corral/sandbox/kube"
)

func TestMain(m *testing.M) {
	// client-go reports on klog what it cannot return (a stream closed
	// under it); the tests check the errors corral returns.
	klog.SetLogger(logr.Discard())
	os.Exit(testenv.Main(m))
}

// backend returns a backend on the test cluster with the test agent image.
func backend(t testing.TB, opts kube.Options) *kube.Backend {
	t.Helper()
	testenv.NeedsKube(t)
	if opts.AgentImage == "" {
		opts.AgentImage = testenv.KubeAgentImage(t)
	}
	if opts.PullPolicy == "" {
		opts.PullPolicy = "IfNotPresent"
	}
	b, err := kube.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// newPod returns a pod sandbox on a fresh workspace, closed at the end.
func newPod(t testing.TB, b *kube.Backend, cfg sandbox.Config) *kube.Pod {
	t.Helper()
	if cfg.Workspace == "" {
		cfg.Workspace = t.TempDir()
	}
	if cfg.Image == "" {
		cfg.Image = testenv.Image
	}
	if cfg.Memory == 0 {
		cfg.Memory = 512 << 20
	}
	p, err := b.NewPod(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := p.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return p
}
