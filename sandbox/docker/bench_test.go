package docker

import (
	"context"
	"io"
	"os/exec"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/corralhq/corral/sandbox"
)

// BenchmarkExecTrue is the round trip of `true` through the agent, as an
// agent's session sees it: with a pause between calls (not timed), in which
// the agent readies the next shell.
func BenchmarkExecTrue(b *testing.B) {
	c := shared(b)
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		time.Sleep(20 * time.Millisecond)
		b.StartTimer()
		res, err := c.Exec(ctx, sandbox.ExecRequest{Command: "true"})
		if err != nil || res.ExitCode != 0 {
			b.Fatal(res, err)
		}
	}
}

// BenchmarkExecTrueBackToBack is the same without pauses: each call also
// pays for readying the next shell.
func BenchmarkExecTrueBackToBack(b *testing.B) {
	c := shared(b)
	ctx := context.Background()
	for b.Loop() {
		res, err := c.Exec(ctx, sandbox.ExecRequest{Command: "true"})
		if err != nil || res.ExitCode != 0 {
			b.Fatal(res, err)
		}
	}
}

// BenchmarkDockerExecTrue is `docker exec CONTAINER true` through the Go
// client, into the same container: create, attach, start, inspect; with the
// same pauses as BenchmarkExecTrue.
func BenchmarkDockerExecTrue(b *testing.B) {
	c := shared(b)
	id := containerID(b, c)
	// The exec calls are not in dockerAPI: use the whole client engine made.
	cl := dockerClient
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		time.Sleep(20 * time.Millisecond)
		b.StartTimer()
		ex, err := cl.ContainerExecCreate(ctx, id, container.ExecOptions{Cmd: []string{"true"}, AttachStdout: true, AttachStderr: true})
		if err != nil {
			b.Fatal(err)
		}
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

// BenchmarkFlood streams `yes | head -c 100M` through Exec into io.Discard and
// reports the test process's peak RSS.
func BenchmarkFlood(b *testing.B) {
	c := shared(b)
	ctx := context.Background()
	peak := rssPeak(b)
	b.SetBytes(100 << 20)
	b.ResetTimer()
	for b.Loop() {
		res, err := c.Exec(ctx, sandbox.ExecRequest{Command: "yes | head -c 100M", Output: io.Discard})
		if err != nil || res.ExitCode != 0 {
			b.Fatal(res, err)
		}
	}
	b.ReportMetric(float64(peak())/(1<<20), "peak-RSS-MiB")
}

// BenchmarkColdStart is a session's first command: New, the container's start
// and the first Exec of `true` (Close is not timed).
func BenchmarkColdStart(b *testing.B) {
	need(b)
	ws := b.TempDir()
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		c, err := New(sandbox.Config{Workspace: ws, Image: testImage, Agent: testAgent})
		if err != nil {
			b.Fatal(err)
		}
		res, err := c.Exec(ctx, sandbox.ExecRequest{Command: "true"})
		if err != nil || res.ExitCode != 0 {
			b.Fatal(res, err)
		}
		b.StopTimer()
		if err := c.Close(ctx); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// BenchmarkDockerRunTrue is `docker run IMAGE true` through the API: create,
// attach, start, wait (the removal is not timed).
func BenchmarkDockerRunTrue(b *testing.B) {
	need(b)
	api, err := engine()
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		cr, err := api.ContainerCreate(ctx, &container.Config{Image: testImage, Cmd: []string{"true"}, AttachStdout: true, AttachStderr: true},
			&container.HostConfig{NetworkMode: "none"}, nil, nil, "")
		if err != nil {
			b.Fatal(err)
		}
		hj, err := api.ContainerAttach(ctx, cr.ID, container.AttachOptions{Stream: true, Stdout: true, Stderr: true})
		if err != nil {
			b.Fatal(err)
		}
		waitC, errC := api.ContainerWait(ctx, cr.ID, container.WaitConditionNextExit)
		if err := api.ContainerStart(ctx, cr.ID, container.StartOptions{}); err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, hj.Reader)
		hj.Close()
		select {
		case w := <-waitC:
			if w.StatusCode != 0 {
				b.Fatal(w)
			}
		case err := <-errC:
			b.Fatal(err)
		}
		b.StopTimer()
		_ = api.ContainerRemove(ctx, cr.ID, container.RemoveOptions{Force: true})
		b.StartTimer()
	}
}
