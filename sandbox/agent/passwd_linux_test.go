package agent

import (
	"os"
	"path/filepath"
	"testing"
)

func TestAddEntry(t *testing.T) {
	p := filepath.Join(t.TempDir(), "passwd")
	os.WriteFile(p, []byte("root:x:0:0:root:/root:/bin/bash\nsandbox:x:5:5::/:/bin/sh"), 0o644)
	for range 2 { // the second time finds it
		if err := addEntry(p, 65532, "sandbox:x:65532:65532:corral sandbox:/tmp/home:/bin/sh\n"); err != nil {
			t.Fatal(err)
		}
	}
	if err := addEntry(p, 0, "sandbox:x:0:0::/:/bin/sh\n"); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	want := "root:x:0:0:root:/root:/bin/bash\nsandbox:x:5:5::/:/bin/sh\nsandbox-65532:x:65532:65532:corral sandbox:/tmp/home:/bin/sh\n"
	if string(b) != want {
		t.Errorf("got\n%s\nwant\n%s", b, want)
	}
}
