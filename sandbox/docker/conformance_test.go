package docker_test

import (
	"testing"

	"github.com/corralhq/corral/sandbox"
	"github.com/corralhq/corral/sandbox/docker"
	"github.com/corralhq/corral/sandbox/sandboxtest"
)

// The conformance suite against the Docker backend: under runc and, where
// it is registered, gVisor; in an image without bash; over a stream without
// write deadlines.
func TestConformance(t *testing.T) {
	for _, runtime := range []string{"", "runsc"} {
		name := runtime
		if name == "" {
			name = "default"
		}
		t.Run(name, func(t *testing.T) {
			sandboxtest.Run(t, func(t *testing.T) sandbox.Sandbox { return docker.NewConformanceSandbox(t, runtime) })
		})
	}
	// An image without bash: commands run in its sh.
	t.Run("nobash", func(t *testing.T) {
		sandboxtest.Run(t, func(t *testing.T) sandbox.Sandbox { return docker.NewNoBashConformanceSandbox(t) })
	})
	// The client over a stream without write deadlines, as a pod's.
	t.Run("piped", func(t *testing.T) {
		sandboxtest.Run(t, func(t *testing.T) sandbox.Sandbox { return docker.NewPipedConformanceSandbox(t) })
	})
}
