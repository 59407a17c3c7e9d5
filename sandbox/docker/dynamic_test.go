package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/image"

	"github.com/corralhq/corral/egress"
	"github.com/corralhq/corral/sandbox"
)

var (
	cgoOnce  sync.Once
	cgoAgent string
	cgoErr   error
)

// dynamicAgent builds corral with cgo on, as a plain go build or go install
// does where a C compiler exists: dynamically linked.
func dynamicAgent(t *testing.T) string {
	t.Helper()
	cgoOnce.Do(func() {
		dir, err := os.MkdirTemp("", "corral-cgo-agent-")
		if err != nil {
			cgoErr = err
			return
		}
		cgoAgent = filepath.Join(dir, "corral")
		cmd := exec.Command("go", "build", "-o", cgoAgent, "./cmd/corral")
		cmd.Dir = "../.."
		cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			cgoErr = errors.New("go build with CGO_ENABLED=1 (needs gcc): " + err.Error() + "\n" + string(out))
		}
	})
	if cgoErr != nil {
		t.Fatal(cgoErr)
	}
	f, err := elf.Open(cgoAgent)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if libs, _ := f.ImportedLibraries(); len(libs) == 0 {
		t.Fatalf("%s built with cgo is not dynamically linked", cgoAgent)
	}
	return cgoAgent
}

// busyboxImage is an image of nothing but a static busybox: no libc, no bash.
func busyboxImage(t *testing.T) string {
	t.Helper()
	bb, err := exec.LookPath("busybox")
	if err == nil {
		var f *elf.File
		if f, err = elf.Open(bb); err == nil {
			if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
				err = errors.New(bb + " is not static")
			}
			f.Close()
		}
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("a static busybox is needed (apt-get install busybox-static; scripts/setup.sh does): %v", err)
		}
		t.Skipf("no static busybox (apt-get install busybox-static): %v", err)
	}
	data, err := os.ReadFile(bb)
	if err != nil {
		t.Fatal(err)
	}
	dockerfile := "FROM scratch\nCOPY busybox /bin/busybox\nRUN [\"/bin/busybox\", \"--install\", \"-s\", \"/bin\"]\n"
	var ctxTar bytes.Buffer
	tw := tar.NewWriter(&ctxTar)
	for _, f := range []struct {
		name string
		mode int64
		data []byte
	}{{"Dockerfile", 0o644, []byte(dockerfile)}, {"busybox", 0o755, data}} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.data))}); err != nil {
			t.Fatal(err)
		}
		tw.Write(f.data)
	}
	tw.Close()
	tag := "corral-test/busybox:" + strconv.Itoa(os.Getpid())
	api, _ := engine()
	builder := api.(interface {
		ImageBuild(context.Context, io.Reader, build.ImageBuildOptions) (build.ImageBuildResponse, error)
		ImageRemove(context.Context, string, image.RemoveOptions) ([]image.DeleteResponse, error)
	})
	resp, err := builder.ImageBuild(context.Background(), &ctxTar, build.ImageBuildOptions{Tags: []string{tag}, Remove: true, ForceRemove: true, NetworkMode: "none"})
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Contains(string(out), `"error"`) {
		t.Fatalf("build: %s", out)
	}
	t.Cleanup(func() {
		_, _ = builder.ImageRemove(context.Background(), tag, image.RemoveOptions{Force: true, PruneChildren: true})
	})
	return tag
}

// TestDynamicAgent: corral built with cgo on (dynamically linked) is a working
// agent in the default image, in an image of nothing but a static busybox, and
// under gVisor: it brings the host's loader and libraries, and commands run it
// too (ssh's ProxyCommand with --network allow).
func TestDynamicAgent(t *testing.T) {
	need(t)
	agent := dynamicAgent(t)
	raw := rawUpstream(t)
	proxy, err := egress.New(egress.Config{Allow: []string{"up.test:*"}, Hosts: []string{"up.test:127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	cases := []struct{ name, image, runtime string }{
		{"default image", testImage, ""},
		{"busybox image", busyboxImage(t), ""},
	}
	if hasRuntime(t, "runsc") {
		cases = append(cases, struct{ name, image, runtime string }{"gVisor", testImage, "runsc"})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t)
			cfg.Agent, cfg.Image, cfg.Runtime, cfg.Egress = agent, tc.image, tc.runtime, proxy
			c := newSandbox(t, cfg)
			res, out := run(t, c, sandbox.ExecRequest{Command: "echo ran in $(pwd)"})
			if res.ExitCode != 0 || !strings.Contains(out, "ran in "+cfg.Workspace) {
				t.Errorf("exit %d, output %q", res.ExitCode, out)
			}
			if res, out := run(t, c, sandbox.ExecRequest{Command: fmt.Sprintf(proxyCommand, raw)}); res.ExitCode != 0 || !strings.Contains(out, "raw upstream says hi") {
				t.Errorf("ssh's ProxyCommand: exit %d, output %q", res.ExitCode, out)
			}
		})
	}
}

// TestDynamicAgentNeeds: checkAgent finds the loader and libc of a cgo build;
// an executable whose library is not on the host is refused, saying how to fix it.
func TestDynamicAgentNeeds(t *testing.T) {
	agent := dynamicAgent(t)
	_, rt, err := checkAgent(agent)
	if err != nil {
		t.Fatal(err)
	}
	if rt == nil || rt.libs["libc.so.6"] == "" {
		t.Fatalf("runtime of a cgo build: %+v, want libc.so.6 in it", rt)
	}
	if ep := rt.entrypoint(); ep[len(ep)-1] != agentPath || !strings.HasPrefix(ep[0], agentLibDir+"/") {
		t.Errorf("entrypoint %q", ep)
	}

	dir := t.TempDir()
	write := func(name, src string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("gone.c", "int gone(void) { return 0; }\n")
	write("main.c", "int gone(void);\nint main(void) { return gone(); }\n")
	for _, args := range [][]string{
		{"-shared", "-fPIC", "-o", "libgone.so", "gone.c"},
		{"-o", "main", "main.c", "-L.", "-lgone"},
	} {
		cmd := exec.Command("gcc", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("gcc %v: %v\n%s", args, err, out)
		}
	}
	os.Remove(filepath.Join(dir, "libgone.so"))
	_, _, err = checkAgent(filepath.Join(dir, "main"))
	var ae *sandbox.AgentError
	if !errors.As(err, &ae) || !strings.Contains(err.Error(), "libgone.so") || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
		t.Errorf("an agent whose library is missing: %v", err)
	}
}
