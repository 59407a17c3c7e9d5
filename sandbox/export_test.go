package sandbox

import "testing"

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
