package sandboxtest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync/atomic"
	"testing"

	"github.com/corralhq/corral/fsys"
	"github.com/corralhq/corral/fsys/fsystest"
	"github.com/corralhq/corral/sandbox"
)

// RunFiles runs the file cases (package fsystest: UTF-8 and binary round
// trips, large and empty files, missing, permission and is-a-directory
// errors, names kept as bytes, ...) against the workspace as sb gives it
// to the file tools (Sandbox.FS), each case in a fresh directory of it.
// The permission cases run when the filesystem's user is held by
// permissions (a probe file without read permission cannot be opened).
func RunFiles(t *testing.T, sb sandbox.Sandbox) {
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	root, err := sb.FS(ctx)
	if err != nil {
		t.Fatalf("the sandbox's filesystem: %v", err)
	}
	t.Cleanup(func() { root.Close() })
	var n atomic.Int64
	dir := func(t *testing.T) fsys.Root {
		name := fmt.Sprintf("corral-fsystest-%d", n.Add(1))
		if err := root.Mkdir(name, 0o755); err != nil {
			t.Fatal(err)
		}
		sub, err := root.OpenRoot(name)
		if err != nil {
			t.Fatal(err)
		}
		return sub
	}
	probe := dir(t)
	enforces := enforcesPermissions(t, probe)
	probe.Close()
	t.Logf("the filesystem's user is held by permissions: %v", enforces)
	fsystest.Run(t, fsystest.Target{Open: dir, EnforcesPermissions: enforces})
}

// enforcesPermissions reports whether r's user cannot open a file of its
// own without read permission.
func enforcesPermissions(t *testing.T, r fsys.Root) bool {
	f, err := r.OpenFile("probe", os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := r.Chmod("probe", 0); err != nil {
		t.Fatal(err)
	}
	g, err := r.OpenFile("probe", os.O_RDONLY, 0)
	if err == nil {
		g.Close()
	}
	return errors.Is(err, fs.ErrPermission)
}
