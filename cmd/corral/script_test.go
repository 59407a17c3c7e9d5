package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/corralhq/corral/internal/testenv"
)

func TestMain(m *testing.M) {
	// The tests run a real, static corral — the one the sandbox's agent must be —
	// found first in PATH.
	agent, err := testenv.BuildAgent()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("CORRAL_AGENT", agent)
	os.Setenv("PATH", filepath.Dir(agent)+string(filepath.ListSeparator)+os.Getenv("PATH"))
	os.Exit(testenv.Main(m))
}

// TestScripts drives the corral command end to end with the scripts in
// testdata/script. Scripts that run bash start with [!docker] skip.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script",
		RequireExplicitExec: true,
		Setup: func(env *testscript.Env) error {
			env.Setenv("CI", os.Getenv("CI"))
			env.Setenv("CORRAL_AGENT", os.Getenv("CORRAL_AGENT"))
			// Checkpoints go outside the scripts' workspaces.
			state, err := os.MkdirTemp("", "corral-script-state-")
			if err != nil {
				return err
			}
			env.Defer(func() { os.RemoveAll(state) })
			env.Setenv("XDG_STATE_HOME", state)
			return nil
		},
		Condition: func(cond string) (bool, error) {
			switch cond {
			case "docker":
				// In CI the sandbox must be there: the script runs, and fails.
				if testing.Short() {
					return false, nil
				}
				return testenv.DockerErr() == nil || os.Getenv("CI") == "true", nil
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
	})
}

// needsDocker skips a test that needs the sandbox when Docker or the image is
// missing; in CI it fails.
func needsDocker(t *testing.T) {
	t.Helper()
	testenv.NeedsDocker(t)
}
