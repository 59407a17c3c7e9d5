package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

// dockerErr says why the tests that need a sandbox cannot run here; nil when
// they can.
var dockerErr error

func TestMain(m *testing.M) {
	if filepath.Base(os.Args[0]) != "corral" {
		// The test process itself, not a corral it started: the test binary
		// is not static, so build a static corral for the sandbox's agent.
		dir, err := os.MkdirTemp("", "corral-cmd-test-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		defer os.RemoveAll(dir)
		agent := filepath.Join(dir, "corral")
		build := exec.Command("go", "build", "-o", agent, ".")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "building a static corral for the sandbox: %v\n%s", err, out)
			os.Exit(1)
		}
		os.Setenv("CORRAL_AGENT", agent)
		dockerErr = checkDocker()
	}
	testscript.Main(m, map[string]func(){
		"corral": func() { main() },
	})
}

// checkDocker says whether the engine and the default image are there.
func checkDocker() error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "docker", "image", "inspect", "--format", "{{.Id}}", "corral/dev:bookworm").CombinedOutput(); err != nil {
		return fmt.Errorf("no Docker engine with the image corral/dev:bookworm (run `make image`): %v: %s", err, out)
	}
	return nil
}

// needsDocker skips a test that needs the sandbox when Docker or the image is
// missing, and fails it in CI, where they must be there.
func needsDocker(t testing.TB) {
	t.Helper()
	if dockerErr == nil {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true and the sandbox cannot run: %v", dockerErr)
	}
	t.Skipf("skipping: %v", dockerErr)
}

// TestScripts drives the corral command end to end with the scripts in
// testdata/script. Scripts that run bash start with [docker].
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script",
		RequireExplicitExec: true,
		Setup: func(env *testscript.Env) error {
			env.Setenv("CI", os.Getenv("CI"))
			env.Setenv("CORRAL_AGENT", os.Getenv("CORRAL_AGENT"))
			return nil
		},
		Condition: func(cond string) (bool, error) {
			switch cond {
			case "docker":
				// In CI the sandbox must be there: the script runs, and fails.
				return dockerErr == nil || os.Getenv("CI") == "true", nil
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
	})
}
