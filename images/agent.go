package images

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// DefaultAgent is the agent image of the Kubernetes backend: corral's static
// binary at /corral, FROM scratch. It equals kube.DefaultAgentImage.
const DefaultAgent = "corral/agent:latest"

// AgentOptions tells BuildAgent what to build.
type AgentOptions struct {
	// Name is the image's tag; DefaultAgent when empty.
	Name string
	// Binary is a static (cgo off) corral-agent (or corral) binary for the
	// sandbox's architecture; when empty, corral-agent beside the running
	// binary, else the running one.
	Binary string
	// Stdout and Stderr receive docker build's output; discarded when nil.
	Stdout, Stderr io.Writer
}

// BuildAgent builds the agent image with docker build: a scratch image
// holding only the binary, which a sandbox pod's init container copies into
// a volume the sandbox's own image runs it from.
func BuildAgent(ctx context.Context, o AgentOptions) error {
	if o.Name == "" {
		o.Name = DefaultAgent
	}
	bin := o.Binary
	if bin == "" {
		self, err := os.Executable()
		if err != nil {
			return fmt.Errorf("agent image: find this binary: %w", err)
		}
		// corral-agent, the agent alone, when it is installed beside this
		// binary; else this one, larger and slower to start.
		bin = self
		if alone := filepath.Join(filepath.Dir(self), "corral-agent"); fileExists(alone) {
			bin = alone
		}
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		return fmt.Errorf("agent image: %w", err)
	}
	if bytes.Contains(b[:min(len(b), 64<<10)], []byte("/lib64/ld-linux")) || bytes.Contains(b[:min(len(b), 64<<10)], []byte("/lib/ld-linux")) {
		return fmt.Errorf("agent image: %s is dynamically linked (built with cgo): give --binary of a static build (CGO_ENABLED=0 go build ./cmd/corral)", bin)
	}
	dir, err := os.MkdirTemp("", "corral-agent-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "corral"), b, 0o555); err != nil {
		return err
	}
	df := "FROM scratch\nCOPY corral /corral\nUSER 65532:65532\nLABEL " + RoleLabel + "=agent\nENTRYPOINT [\"/corral\"]\n"
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(df), 0o644); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "docker", "build", "-q", "-t", o.Name, dir)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = o.Stdout, io.MultiWriter(&stderr, orDiscard(o.Stderr))
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("agent image: docker build: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

func fileExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}
