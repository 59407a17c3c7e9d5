package sandbox

import (
	"context"
	"io"
	"os/exec"
	"testing"

	"github.com/docker/docker/api/types/container"
)

// BenchmarkExecTrue is the round trip of `true` through the agent.
func BenchmarkExecTrue(b *testing.B) {
	c := shared(b)
	ctx := context.Background()
	b.ResetTimer()
	for b.Loop() {
		res, err := c.Exec(ctx, ExecRequest{Command: "true"})
		if err != nil || res.ExitCode != 0 {
			b.Fatal(res, err)
		}
	}
}

// BenchmarkDockerExecTrue is `docker exec CONTAINER true` through the Go
// client, into the same container: create, attach, start, inspect.
func BenchmarkDockerExecTrue(b *testing.B) {
	c := shared(b)
	id := containerID(b, c)
	api, err := engine()
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ResetTimer()
	for b.Loop() {
		ex, err := api.(interface {
			ContainerExecCreate(context.Context, string, container.ExecOptions) (container.ExecCreateResponse, error)
		}).ContainerExecCreate(ctx, id, container.ExecOptions{Cmd: []string{"true"}, AttachStdout: true, AttachStderr: true})
		if err != nil {
			b.Fatal(err)
		}
		cl := dockerClient
		hj, err := cl.ContainerExecAttach(ctx, ex.ID, container.ExecAttachOptions{})
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, hj.Reader)
		hj.Close()
		in, err := cl.ContainerExecInspect(ctx, ex.ID)
		if err != nil || in.ExitCode != 0 || in.Running {
			b.Fatal(in, err)
		}
	}
}

// BenchmarkNativeTrue is a fork/exec of `true` on the host.
func BenchmarkNativeTrue(b *testing.B) {
	for b.Loop() {
		if err := exec.Command("true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFlood streams `yes | head -c 100M` through Exec into io.Discard.
func BenchmarkFlood(b *testing.B) {
	c := shared(b)
	ctx := context.Background()
	b.SetBytes(100 << 20)
	b.ResetTimer()
	for b.Loop() {
		res, err := c.Exec(ctx, ExecRequest{Command: "yes | head -c 100M", Output: io.Discard})
		if err != nil || res.ExitCode != 0 {
			b.Fatal(res, err)
		}
	}
}
