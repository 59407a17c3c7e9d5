package testenv

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// The Kubernetes backend's tests run against the cluster KUBECONFIG names —
// scripts/kube/cluster.sh's, which `make kube-up` starts and .ci/run
// brings up. Locally they skip when there is none; in CI they fail.

var (
	kubeOnce     sync.Once
	kubeErr      error
	agentImgOnce sync.Once
	agentImg     string
	agentImgErr  error
)

// KubeErr says why there is no cluster to test against; nil when there is.
func KubeErr() error {
	kubeOnce.Do(func() {
		kc := os.Getenv("KUBECONFIG")
		if kc == "" {
			kubeErr = fmt.Errorf("KUBECONFIG is not set: start the test cluster with `make kube-up` and eval \"$(scripts/kube/cluster.sh env)\"")
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if out, err := exec.CommandContext(ctx, kubectl(), "get", "--raw", "/readyz").CombinedOutput(); err != nil {
			kubeErr = fmt.Errorf("the cluster of KUBECONFIG=%s does not answer: %v: %s", kc, err, strings.TrimSpace(string(out)))
		}
	})
	return kubeErr
}

// NeedsKube skips the test when there is no cluster, and fails it in CI,
// where .ci/run brings one up. With -short it skips.
func NeedsKube(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: skipped with -short")
	}
	if runtime.GOOS != "linux" {
		t.Skip("the sandbox needs Linux")
	}
	err := KubeErr()
	if err == nil {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true and there is no Kubernetes cluster to test on: %v", err)
	}
	t.Skipf("skipping: %v", err)
}

// kubectl is the cluster's kubectl when cluster.sh built one, else the
// PATH's.
func kubectl() string {
	for _, v := range []string{os.Getenv("CORRAL_KUBE_VERSION"), "v1.34.4"} {
		if v == "" {
			continue
		}
		p := filepath.Join(envOr("CORRAL_KUBE_CACHE", "/var/cache/corral-kube"), v, "bin", "kubectl")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return "kubectl"
}

// Kubectl returns the path of kubectl for the test cluster.
func Kubectl() string { return kubectl() }

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// KubeAgentImage returns the agent image for the tests' pods:
// $CORRAL_KUBE_AGENT_IMAGE when set (a cluster that pulls from a registry),
// else an image built from Agent's binary, tagged with its hash, and loaded
// into the local cluster with scripts/kube/cluster.sh load (which needs
// root).
func KubeAgentImage(t testing.TB) string {
	t.Helper()
	if img := os.Getenv("CORRAL_KUBE_AGENT_IMAGE"); img != "" {
		return img
	}
	agentImgOnce.Do(func() {
		var corral, bin string
		if corral, agentImgErr = BuildAgent(); agentImgErr != nil {
			return
		}
		// The image holds the agent alone (cmd/corral-agent): a copy of it
		// starts with each command.
		bin = filepath.Join(filepath.Dir(corral), "corral-agent")
		cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "github.com/corralhq/corral/cmd/corral-agent")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			agentImgErr = fmt.Errorf("build corral-agent: %v\n%s", err, out)
			return
		}
		f, err := os.Open(bin)
		if err != nil {
			agentImgErr = err
			return
		}
		h := sha256.New()
		_, _ = io.Copy(h, f)
		f.Close()
		agentImg = "corral/agent:test-" + hex.EncodeToString(h.Sum(nil))[:12]
		if exec.Command("docker", "image", "inspect", agentImg).Run() != nil {
			if out, err := exec.Command(corral, "image", "build", "--agent", "--binary", bin, "--name", agentImg).CombinedOutput(); err != nil {
				agentImgErr = fmt.Errorf("build the agent image: %v: %s", err, out)
				return
			}
		}
		agentImgErr = LoadKube(agentImg, Image)
	})
	if agentImgErr != nil {
		t.Fatal(agentImgErr)
	}
	return agentImg
}

// LoadKube loads Docker images into the local test cluster
// (scripts/kube/cluster.sh load).
func LoadKube(images ...string) error {
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "..", "..", "scripts", "kube", "cluster.sh")
	out, err := exec.Command("bash", append([]string{script, "load"}, images...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("load %s into the test cluster: %v: %s", strings.Join(images, " "), err, out)
	}
	return nil
}
