package kube_test

import (
	"archive/tar"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/corralhq/corral/egress"
	"github.com/corralhq/corral/internal/testenv"
	"github.com/corralhq/corral/sandbox"
	"github.com/corralhq/corral/sandbox/kube"
	"github.com/corralhq/corral/sandbox/sandboxtest"
)

// This file tests the pod's workspace as a user meets it: seeded from a tar
// file or a git revision, brought back by Download without what the host's
// tools would run, and the pod as the API server holds it (its resources,
// its security, its runtime class); and --network allow's proxy reached
// through the pod's agent.

// testCPUs is the CPU of these tests' pods: the node's two cores are shared
// with the other packages' tests, and a pod that does not fit is refused at
// once (a pod asks for a whole core by default).
const testCPUs = 0.25

// shell runs command in the pod through pipes and returns its stdout,
// failing the test on a status other than 0.
func shell(t *testing.T, p *kube.Pod, command string) string {
	t.Helper()
	res, out, errOut := sandboxtest.Exec(t, p, sandbox.ExecRequest{Command: command, Pipes: true})
	if res.ExitCode != 0 {
		t.Fatalf("%s: status %d\n%s%s", command, res.ExitCode, out, errOut)
	}
	return out
}

func TestSeedTar(t *testing.T) {
	tarFile := filepath.Join(t.TempDir(), "seed.tar")
	f, err := os.Create(tarFile)
	if err != nil {
		t.Fatal(err)
	}
	tw := tar.NewWriter(f)
	add := func(h *tar.Header, body string) {
		h.Size = int64(len(body))
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	add(&tar.Header{Name: "src/", Typeflag: tar.TypeDir, Mode: 0o755}, "")
	add(&tar.Header{Name: "src/main.py", Typeflag: tar.TypeReg, Mode: 0o644}, "print('seeded')\r\n")
	add(&tar.Header{Name: "run.sh", Typeflag: tar.TypeReg, Mode: 0o755}, "#!/bin/sh\necho ran\n")
	add(&tar.Header{Name: "link", Typeflag: tar.TypeSymlink, Linkname: "src/main.py"}, "")
	// A hostile entry: a seed is data, and may not name a place outside.
	add(&tar.Header{Name: "../escaped", Typeflag: tar.TypeReg, Mode: 0o644}, "out\n")
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()

	b := backend(t, kube.Options{Source: &kube.Source{Tar: tarFile}})
	ws := t.TempDir()
	// The host's directory is not what the pod gets when a source is given.
	if err := os.WriteFile(filepath.Join(ws, "host-only.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := newPod(t, b, sandbox.Config{Workspace: ws, CPUs: testCPUs})
	err = p.Start(context.Background())
	if err == nil {
		out := shell(t, p, "ls -A; ls -A ..")
		t.Fatalf("a seed with an entry outside the workspace was unpacked:\n%s", out)
	}
	if !strings.Contains(err.Error(), "escaped") {
		t.Errorf("the refusal does not name the entry: %v", err)
	}

	// Without the hostile entry, the pod's workspace is the tar's.
	rewrite := func() {
		f, err := os.Create(tarFile)
		if err != nil {
			t.Fatal(err)
		}
		tw = tar.NewWriter(f)
		add(&tar.Header{Name: "src/", Typeflag: tar.TypeDir, Mode: 0o755}, "")
		add(&tar.Header{Name: "src/main.py", Typeflag: tar.TypeReg, Mode: 0o644}, "print('seeded')\r\n")
		add(&tar.Header{Name: "run.sh", Typeflag: tar.TypeReg, Mode: 0o755}, "#!/bin/sh\necho ran\n")
		add(&tar.Header{Name: "link", Typeflag: tar.TypeSymlink, Linkname: "src/main.py"}, "")
		if err := tw.Close(); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	rewrite()
	p = newPod(t, b, sandbox.Config{Workspace: t.TempDir(), CPUs: testCPUs})
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	out := shell(t, p, "ls -A | sort | tr '\\n' ' '; ./run.sh; readlink link; python3 -c 'print(repr(open(\"src/main.py\", \"rb\").read()))'")
	for _, want := range []string{"link run.sh src ", "ran\n", "src/main.py\n", `b"print('seeded')\r\n"`} {
		if !strings.Contains(out, want) {
			t.Errorf("workspace from the tar: want %q in\n%s", want, out)
		}
	}
}

func TestSeedGit(t *testing.T) {
	repo := t.TempDir()
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", repo, "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q", "-b", "main")
	os.WriteFile(filepath.Join(repo, "a.txt"), []byte("first\n"), 0o644)
	git("add", "a.txt")
	git("commit", "-qm", "first")
	first := git("rev-parse", "HEAD")
	os.WriteFile(filepath.Join(repo, "a.txt"), []byte("second\n"), 0o644)
	os.WriteFile(filepath.Join(repo, "b.txt"), []byte("new\n"), 0o644)
	git("add", ".")
	git("commit", "-qm", "second")

	b := backend(t, kube.Options{Source: &kube.Source{Git: repo, Rev: first}})
	p := newPod(t, b, sandbox.Config{Workspace: t.TempDir(), CPUs: testCPUs})
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	out := shell(t, p, "cat a.txt; ls; git log --format=%s 2>&1; git status --porcelain 2>&1; echo end")
	if want := "first\na.txt\nfirst\nend\n"; out != want {
		t.Errorf("the workspace at the first revision, with its history:\n%s\nwant\n%s", out, want)
	}

	// A revision that does not exist fails the start, and says which.
	b = backend(t, kube.Options{Source: &kube.Source{Git: repo, Rev: "no-such-rev"}})
	p = newPod(t, b, sandbox.Config{Workspace: t.TempDir(), CPUs: testCPUs})
	if err := p.Start(context.Background()); err == nil || !strings.Contains(err.Error(), "no-such-rev") {
		t.Errorf("a start at a missing revision: %v", err)
	}
}

// TestDownload: the pod's final workspace comes back whole — files, modes,
// links as links — and without what the host's tools would run or trust
// that a command wrote: hooks, a repository's config, the user's agent
// tooling.
func TestDownload(t *testing.T) {
	b := backend(t, kube.Options{})
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "seeded.txt"), []byte("from the host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := newPod(t, b, sandbox.Config{Workspace: ws, CPUs: testCPUs})
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	// What a hostile command leaves for the host's git: a hook and an
	// fsmonitor that would touch marker, a path on the host.
	marker := filepath.Join(t.TempDir(), "pwned")
	shell(t, p, fmt.Sprintf(`set -e
git init -q .
printf 'made\r\n' > made.txt
mkdir -p deep/er && printf '#!/bin/sh\n' > deep/er/tool.sh && chmod 755 deep/er/tool.sh
ln -s /etc/passwd abs-link
ln -s ../../../../etc/shadow up-link
printf '#!/bin/sh\ntouch %[1]s\n' > .git/hooks/post-checkout && chmod +x .git/hooks/post-checkout
printf '[core]\n\tfsmonitor = touch %[1]s\n' >> .git/config
mkdir -p .vscode .claude && echo '{}' > .vscode/tasks.json && echo '{"hooks":{}}' > .claude/settings.json
rm seeded.txt`, marker))
	dir := filepath.Join(t.TempDir(), "back")
	got, err := p.Download(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("downloaded %+v", got)
	read := func(rel string) string {
		data, err := os.ReadFile(filepath.Join(dir, rel))
		if err != nil {
			t.Errorf("%s: %v", rel, err)
		}
		return string(data)
	}
	if s := read("made.txt"); s != "made\r\n" {
		t.Errorf("made.txt = %q", s)
	}
	if fi, err := os.Stat(filepath.Join(dir, "deep/er/tool.sh")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("deep/er/tool.sh: %v, %v; want mode 0755", fi, err)
	}
	for link, target := range map[string]string{"abs-link": "/etc/passwd", "up-link": "../../../../etc/shadow"} {
		if got, err := os.Readlink(filepath.Join(dir, link)); err != nil || got != target {
			t.Errorf("%s: %q, %v; want a link to %s, not followed", link, got, err, target)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "seeded.txt")); !os.IsNotExist(err) {
		t.Errorf("seeded.txt, removed in the pod, came back: %v", err)
	}
	for rel, listed := range map[string]string{
		".git/hooks/post-checkout": ".git/hooks (",
		".git/config":              ".git/config (",
		".vscode/tasks.json":       ".vscode/tasks.json (",
		".claude/settings.json":    ".claude (", // the whole directory is agent configuration
	} {
		if _, err := os.Lstat(filepath.Join(dir, rel)); !os.IsNotExist(err) {
			t.Errorf("%s was downloaded: %v", rel, err)
		}
		if !strings.Contains(strings.Join(got.Skipped, "\n"), listed) {
			t.Errorf("%s is not listed as skipped: %q", listed, got.Skipped)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, ".git/HEAD")); err != nil {
		t.Errorf("the repository's HEAD did not come back: %v", err)
	}
	// The host's git in what came back runs neither.
	for _, args := range [][]string{{"status"}, {"checkout", "-q", "-b", "other"}} {
		cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_SYSTEM=/dev/null")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Logf("git %v in the download: %v\n%s", args, err, out)
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the host's git ran what the pod planted")
	}
}

// TestPodAsCreated reads the pod back from the API server: requests equal
// limits for memory, CPU and ephemeral storage (the Guaranteed class), the
// pod's and the container's security, and the runtime class asked for.
func TestPodAsCreated(t *testing.T) {
	testenv.NeedsKube(t)
	// A runtime class of the node's own runc: what --runtime names on a
	// cluster with gVisor's, without needing it.
	const rc = "corral-test-runc"
	manifest := filepath.Join(t.TempDir(), "rc.yaml")
	os.WriteFile(manifest, []byte("apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata:\n  name: "+rc+"\nhandler: runc\n"), 0o644)
	kubectl(t, "apply", "-f", manifest)
	t.Cleanup(func() { exec.Command(testenv.Kubectl(), "delete", "runtimeclass", rc, "--ignore-not-found").Run() })
	b := backend(t, kube.Options{EphemeralStorage: 300 << 20})
	p := newPod(t, b, sandbox.Config{Memory: 384 << 20, CPUs: 0.5, Runtime: rc})
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	pod := podJSON(t, p.Name())
	if pod.Spec.RuntimeClassName == nil || *pod.Spec.RuntimeClassName != rc {
		t.Errorf("runtimeClassName %v, want %s", pod.Spec.RuntimeClassName, rc)
	}
	if pod.Status.QOSClass != corev1.PodQOSGuaranteed {
		t.Errorf("QoS class %s, want Guaranteed (requests equal to limits in every container)", pod.Status.QOSClass)
	}
	var sb *corev1.Container
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == "sandbox" {
			sb = &pod.Spec.Containers[i]
		}
	}
	if sb == nil {
		t.Fatalf("no sandbox container in %+v", pod.Spec.Containers)
	}
	for name, want := range map[corev1.ResourceName]string{
		corev1.ResourceMemory:           "384Mi",
		corev1.ResourceCPU:              "500m",
		corev1.ResourceEphemeralStorage: "300Mi",
	} {
		req, lim := sb.Resources.Requests[name], sb.Resources.Limits[name]
		if req.String() != want || lim.String() != want {
			t.Errorf("%s: request %s, limit %s; want both %s", name, req.String(), lim.String(), want)
		}
	}
	sc, psc := sb.SecurityContext, pod.Spec.SecurityContext
	switch {
	case psc == nil || psc.FSGroup == nil || *psc.FSGroup != 65532 || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot:
		t.Errorf("pod security %+v: want fsGroup 65532 and runAsNonRoot", psc)
	case sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != 65532 || sc.RunAsGroup == nil || *sc.RunAsGroup != 65532:
		t.Errorf("container user %+v: want 65532:65532", sc)
	case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
		t.Error("allowPrivilegeEscalation is not false")
	case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
		t.Error("the root filesystem is writable")
	case sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" || len(sc.Capabilities.Add) > 0:
		t.Errorf("capabilities %+v: want ALL dropped, none added", sc.Capabilities)
	case sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
		t.Errorf("seccomp %+v: want RuntimeDefault", sc.SeccompProfile)
	case pod.Spec.AutomountServiceAccountToken == nil || *pod.Spec.AutomountServiceAccountToken:
		t.Error("the service account token is mounted")
	}
	// And the sandbox's memory is the limit the kernel enforces.
	out := shell(t, p, "cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes")
	if strings.TrimSpace(out) != fmt.Sprint(384<<20) {
		t.Errorf("memory.max %q, want %d", out, 384<<20)
	}
}

// podJSON is the pod named name, as the API server holds it.
func podJSON(t *testing.T, name string) *corev1.Pod {
	t.Helper()
	out, err := exec.Command(testenv.Kubectl(), "-n", "default", "get", "pod", name, "-o", "json").Output()
	if err != nil {
		t.Fatalf("kubectl get pod %s: %v", name, err)
	}
	pod := new(corev1.Pod)
	if err := json.Unmarshal(out, pod); err != nil {
		t.Fatal(err)
	}
	return pod
}

// TestEgressThroughPod: with --network allow a pod's only way out is the
// host's proxy, reached through the pod's agent over its attach stream: an
// allowed name answers, a name not allowed is refused with the reason, and a
// program that ignores the proxy settings gets no connection.
func TestEgressThroughPod(t *testing.T) {
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from the host %s\n", r.URL.Path)
	})
	srv := httptest.NewServer(hello)
	t.Cleanup(srv.Close)
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	// httptest's certificate names example.com.
	tlsSrv := httptest.NewTLSServer(hello)
	t.Cleanup(tlsSrv.Close)
	tlsPort := tlsSrv.Listener.Addr().(*net.TCPAddr).Port
	var records []egress.Record
	recorded := make(chan egress.Record, 64)
	proxy, err := egress.New(egress.Config{
		Allow:  []string{fmt.Sprintf("example.com:%d", port), fmt.Sprintf("example.com:%d", tlsPort)},
		Hosts:  []string{"example.com:127.0.0.1"},
		Record: func(r egress.Record) { recorded <- r },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	b := backend(t, kube.Options{})
	p := newPod(t, b, sandbox.Config{Network: "none", Egress: proxy, CPUs: testCPUs})
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	out := shell(t, p, fmt.Sprintf("curl -sS --max-time 30 http://example.com:%d/through-the-pod", port))
	if out != "hello from the host /through-the-pod\n" {
		t.Errorf("an allowed host through the pod's proxy: %q", out)
	}
	// TLS through SOCKS5h (the name resolved on the host); -k: the test's
	// certificate authority is not the pod's, the server name still is
	// example.com's.
	out = shell(t, p, fmt.Sprintf("curl -sSk --max-time 30 -x socks5h://127.0.0.1:1080 https://example.com:%d/socks", tlsPort))
	if out != "hello from the host /socks\n" {
		t.Errorf("an allowed host through SOCKS5h: %q", out)
	}
	// Plain HTTP inside a tunnel is refused: its Host header would go
	// unjudged.
	res, out, errOut := sandboxtest.Exec(t, p, sandbox.ExecRequest{Command: fmt.Sprintf("curl -sS --max-time 30 -x socks5h://127.0.0.1:1080 http://example.com:%d/", port), Pipes: true})
	if res.ExitCode == 0 || strings.Contains(out, "hello") {
		t.Errorf("plain HTTP through a SOCKS tunnel: status %d, %q %q", res.ExitCode, out, errOut)
	}
	res, out, errOut = sandboxtest.Exec(t, p, sandbox.ExecRequest{Command: "curl -sS --max-time 30 http://elsewhere.example/", Pipes: true})
	if !strings.Contains(out+errOut, "corral: blocked elsewhere.example:80 (not in the allowlist)") {
		t.Errorf("a host not allowed: status %d, %q %q", res.ExitCode, out, errOut)
	}
	// A program that ignores the proxy: no name, no route. (The test
	// cluster's pods have no route anywhere, and its network plugin does
	// not enforce NetworkPolicies: what corral owes is a pod that the
	// deny-all policy selects.)
	pod := podJSON(t, p.Name())
	if pod.Labels["corral.network"] != "none" {
		t.Errorf("the pod's labels %v: want corral.network=none, which the deny-all NetworkPolicy selects", pod.Labels)
	}
	if out, err := exec.Command(testenv.Kubectl(), "-n", "default", "get", "networkpolicy", "corral-sandbox-deny-all", "-o", "jsonpath={.spec.podSelector.matchLabels.corral\\.network} {.spec.policyTypes}").Output(); err != nil || string(out) != `none ["Ingress","Egress"]` {
		t.Errorf("the deny-all NetworkPolicy: %q, %v", out, err)
	}
	res, out, errOut = sandboxtest.Exec(t, p, sandbox.ExecRequest{Command: fmt.Sprintf("NO_PROXY='*' curl -sS --max-time 10 http://example.com:%d/", port), Pipes: true})
	if res.ExitCode == 0 || strings.Contains(out, "hello") {
		t.Errorf("around the proxy: status %d, %q %q", res.ExitCode, out, errOut)
	}
	res, out, errOut = sandboxtest.Exec(t, p, sandbox.ExecRequest{Command: "python3 -c 'import socket; socket.create_connection((\"10.96.0.1\", 443), timeout=5); print(\"CONNECTED\")'", Pipes: true})
	if strings.Contains(out, "CONNECTED") {
		t.Errorf("a raw connection left the pod: %q %q", out, errOut)
	}
	deadline := time.After(10 * time.Second)
	for len(records) < 4 {
		select {
		case r := <-recorded:
			records = append(records, r)
		case <-deadline:
			t.Fatalf("the proxy recorded %d connections, want 4: %+v", len(records), records)
		}
	}
	var allowed int
	var reasons []string
	for _, r := range records {
		if r.Verdict == egress.Allowed {
			allowed++
		} else {
			reasons = append(reasons, r.Reason)
		}
	}
	got := strings.Join(reasons, "\n")
	if allowed != 2 || !strings.Contains(got, "plain HTTP inside a tunnel") || !strings.Contains(got, "not in the allowlist") {
		t.Errorf("records %+v: want two allowed, and refusals of plain HTTP in a tunnel and of a host not allowed", records)
	}
}
