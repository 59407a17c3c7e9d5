package checkpoint

import (
	"os"
	"testing"

	"github.com/corralhq/corral/internal/testenv"
)

func TestMain(m *testing.M) {
	code := testenv.Main(m)
	if benchRepo != "" {
		os.RemoveAll(benchRepo)
	}
	os.Exit(code)
}
