package fsys_test

import (
	"os"
	"testing"

	"github.com/corralhq/corral/fsys"
	"github.com/corralhq/corral/fsys/fsystest"
)

func TestLocalConformance(t *testing.T) {
	fsystest.Run(t, fsystest.Target{
		Open: func(t *testing.T) fsys.Root {
			r, err := fsys.OpenLocal(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			return r
		},
		EnforcesPermissions: os.Geteuid() != 0,
	})
}
