package docker

import (
	"io"
	"testing"
)

// NewConformanceSandbox makes a started sandbox for the conformance suite
// (package sandboxtest), with the engine's default runtime or another, and
// removes it when the test ends; it skips (locally) or fails (in CI) without
// the engine, and skips when the runtime is not registered.
func NewConformanceSandbox(t *testing.T, runtime string) *Container {
	cfg := testConfig(t)
	if runtime != "" {
		if !hasRuntime(t, runtime) {
			t.Skipf("%s is not registered with the Docker engine", runtime)
		}
		cfg.Runtime = runtime
		gVisorWorkspace(t, cfg)
	}
	return newSandbox(t, cfg)
}

// NewNoBashConformanceSandbox makes a sandbox of an image without bash:
// commands run in its sh.
func NewNoBashConformanceSandbox(t *testing.T) *Container {
	cfg := testConfig(t)
	cfg.Image = buildImage(t, "FROM "+testImage+"\nRUN rm -f /bin/bash /usr/bin/bash /usr/local/bin/bash\n")
	return newSandbox(t, cfg)
}

// NewPipedConformanceSandbox is NewConformanceSandbox with the agent's
// stream carried through io.Pipes, as a pod's attach stream is: no write
// deadlines, writes that block until the stream takes them.
func NewPipedConformanceSandbox(t *testing.T) *Container {
	cfg := testConfig(t)
	need(t)
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.transport = pipeTransport
	t.Cleanup(func() { _ = c.Close(t.Context()) })
	return c
}

// pipeTransport carries inner through two io.Pipes and two copying
// goroutines.
func pipeTransport(inner io.ReadWriteCloser) io.ReadWriteCloser {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	go func() {
		_, err := io.Copy(inner, inR)
		inR.CloseWithError(err)
		inner.Close()
	}()
	go func() {
		_, err := io.Copy(outW, inner)
		outW.CloseWithError(err)
	}()
	return &piped{r: outR, w: inW, inner: inner}
}

type piped struct {
	r     *io.PipeReader
	w     *io.PipeWriter
	inner io.Closer
}

func (p *piped) Read(b []byte) (int, error)  { return p.r.Read(b) }
func (p *piped) Write(b []byte) (int, error) { return p.w.Write(b) }

func (p *piped) Close() error {
	p.w.Close()
	p.r.Close()
	return p.inner.Close()
}
