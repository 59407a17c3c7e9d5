package kube_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/testenv"
	"github.com/corralhq/corral/sandbox"
	"github.com/corralhq/corral/sandbox/kube"
)

// The errors a user meets, each saying what to do.

func TestNoCluster(t *testing.T) {
	testenv.NeedsKube(t)
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	// A cluster that does not answer: a closed port.
	os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:9"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600)
	b, err := kube.New(kube.Options{Kubeconfig: kc})
	if err != nil {
		t.Fatal(err)
	}
	p := newPod(t, b, sandbox.Config{})
	err = p.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), "is the cluster up") {
		t.Errorf("no cluster: %v", err)
	}
	if _, err := kube.New(kube.Options{Kubeconfig: filepath.Join(dir, "missing")}); err == nil {
		t.Error("a missing kubeconfig was accepted")
	}
	t.Setenv("KUBECONFIG", filepath.Join(dir, "none"))
	t.Setenv("HOME", dir)
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	if _, err := kube.New(kube.Options{}); !errors.Is(err, kube.ErrNoCluster) {
		t.Errorf("no kubeconfig at all: %v, want ErrNoCluster", err)
	}
}

// lowPrivilege mints a client certificate for a user with no RBAC rules,
// signed by the test cluster's CA, and returns its kubeconfig.
func lowPrivilege(t *testing.T, user string) string {
	t.Helper()
	pki := "/var/lib/corral-kube/pki"
	if _, err := os.Stat(filepath.Join(pki, "ca.key")); err != nil {
		t.Skipf("not the local test cluster (no %s/ca.key): %v", pki, err)
	}
	dir := t.TempDir()
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("openssl", args...).CombinedOutput(); err != nil {
			t.Fatalf("openssl %v: %v\n%s", args, err, out)
		}
	}
	key, csr, crt := filepath.Join(dir, "u.key"), filepath.Join(dir, "u.csr"), filepath.Join(dir, "u.crt")
	run("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", key)
	run("req", "-new", "-key", key, "-subj", "/CN="+user, "-out", csr)
	run("x509", "-req", "-in", csr, "-CA", filepath.Join(pki, "ca.crt"), "-CAkey", filepath.Join(pki, "ca.key"), "-CAcreateserial", "-days", "1", "-out", crt)
	kc := filepath.Join(dir, "kubeconfig")
	os.WriteFile(kc, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:16443", certificate-authority: %s}}]
users: [{name: u, user: {client-certificate: %s, client-key: %s}}]
contexts: [{name: c, context: {cluster: c, user: u, namespace: default}}]
current-context: c
`, filepath.Join(pki, "ca.crt"), crt, key)), 0o600)
	return kc
}

func kubectl(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command(testenv.Kubectl(), args...).CombinedOutput(); err != nil {
		t.Fatalf("kubectl %v: %v\n%s", args, err, out)
	}
}

func TestNoPermission(t *testing.T) {
	testenv.NeedsKube(t)
	user := fmt.Sprintf("corral-test-%d", time.Now().UnixNano()%100000)
	kc := lowPrivilege(t, user)
	b := backend(t, kube.Options{Kubeconfig: kc})
	err := b.Ping(context.Background())
	var pe *kube.PermissionError
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "create pods") || !strings.Contains(err.Error(), "create pods/attach") {
		t.Errorf("Ping as a user without rules: %v", err)
	}
	p := newPod(t, b, sandbox.Config{})
	err = p.Start(context.Background())
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "pods/attach: create") {
		t.Errorf("start as a user without rules: %v; want a PermissionError naming the verbs", err)
	}
	// With the rules docs/kubernetes.md names (RBAC), it works.
	role := user + "-role"
	kubectl(t, "-n", "default", "create", "role", role, "--verb=create,get,list,watch,delete", "--resource=pods", "--resource=pods/attach", "--resource=networkpolicies.networking.k8s.io")
	t.Cleanup(func() { exec.Command(testenv.Kubectl(), "-n", "default", "delete", "role", role).Run() })
	kubectl(t, "-n", "default", "create", "rolebinding", role, "--role="+role, "--user="+user)
	t.Cleanup(func() { exec.Command(testenv.Kubectl(), "-n", "default", "delete", "rolebinding", role).Run() })
	if err := b.Ping(context.Background()); err != nil {
		t.Errorf("Ping with the rules: %v", err)
	}
	p2 := newPod(t, b, sandbox.Config{})
	res, err := p2.Exec(context.Background(), sandbox.ExecRequest{Command: "true"})
	if err != nil || res.ExitCode != 0 {
		t.Errorf("with the rules: %+v, %v", res, err)
	}
}

func TestImageMissing(t *testing.T) {
	b := backend(t, kube.Options{})
	p := newPod(t, b, sandbox.Config{Image: "corral/no-such-image:1"})
	err := p.Start(context.Background())
	sessions := []string{p.Session()}
	var ie *kube.ImageError
	if !errors.As(err, &ie) || ie.Agent || !strings.Contains(err.Error(), "corral/no-such-image:1 is not on the node") {
		t.Errorf("a missing image: %v", err)
	}
	b2 := backend(t, kube.Options{AgentImage: "corral/no-such-agent:1"})
	p2 := newPod(t, b2, sandbox.Config{})
	sessions = append(sessions, p2.Session())
	err = p2.Start(context.Background())
	if !errors.As(err, &ie) || !ie.Agent || !strings.Contains(err.Error(), "corral image build --agent") {
		t.Errorf("a missing agent image: %v", err)
	}
	if n := podsOf(t, b, sessions); n != 0 {
		t.Errorf("%d pods left after failed starts", n)
	}
}

func TestUnschedulable(t *testing.T) {
	b := backend(t, kube.Options{})
	p := newPod(t, b, sandbox.Config{Memory: 1 << 40})
	err := p.Start(context.Background())
	var ue *kube.UnschedulableError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "Insufficient memory") {
		t.Errorf("a pod that asks for 1 TiB: %v", err)
	}
}

// A pod deleted or killed under a session is reported like a dead
// container, and the next command starts a new one and says why.
func TestPodDied(t *testing.T) {
	b := backend(t, kube.Options{})
	p := newPod(t, b, sandbox.Config{})
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	first := p.Name()
	ctx := context.Background()
	done := make(chan error, 1)
	go func() {
		_, err := p.Exec(ctx, sandbox.ExecRequest{Command: "sleep 60"})
		done <- err
	}()
	time.Sleep(time.Second)
	kubectl(t, "-n", b.Namespace(), "delete", "pod", first, "--grace-period=0", "--force", "--wait=false")
	var d *sandbox.DiedError
	select {
	case err := <-done:
		if !errors.As(err, &d) {
			t.Fatalf("the running command: %v, want a *sandbox.DiedError", err)
		}
		t.Logf("died: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("the running command did not end with its pod")
	}
	res, err := p.Exec(ctx, sandbox.ExecRequest{Command: "echo again"})
	if err != nil || !res.Restarted || !strings.Contains(res.RestartReason, "workspace went with it") || p.Name() == first {
		t.Errorf("after the death: %+v, %v, pod %s", res, err, p.Name())
	}
	t.Logf("restart reason: %s", res.RestartReason)
	// Out of memory: the agent's cgroup is the container's.
	res, err = p.Exec(ctx, sandbox.ExecRequest{Command: "head -c 2000000000 /dev/zero | tail -n 1 >/dev/null; echo $?"})
	t.Logf("memory hog: %+v, %v", res, err)
	if err == nil && !res.OOMKilled {
		t.Errorf("a command over the memory limit: %+v", res)
	}
}

// podsOf counts the pods of these sessions that are not being deleted.
func podsOf(t *testing.T, b *kube.Backend, sessions []string) int {
	t.Helper()
	infos, err := b.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, in := range infos {
		if slices.Contains(sessions, in.Session) && in.State != "deleting" {
			n++
		}
	}
	return n
}
