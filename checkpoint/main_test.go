package checkpoint

import (
	"os"
	"testing"

	"github.com/corralhq/corral/internal/testenv"
)

func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m))
}
