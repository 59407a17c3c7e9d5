package tools

import (
	"os"
	"testing"

	"github.com/corralhq/corral/internal/testenv"
)

func TestMain(m *testing.M) {
	if agentMode {
		os.Exit(runThroughAgent(m))
	}
	os.Exit(testenv.Main(m))
}
