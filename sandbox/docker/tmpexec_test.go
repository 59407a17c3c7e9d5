package docker

import (
	"github.com/corralhq/corral/sandbox"

	"strings"
	"testing"
)

// /tmp, where HOME is, is executable unless TmpNoexec says otherwise; it is
// nosuid and nodev either way.
func TestTmpExec(t *testing.T) {
	for _, noexec := range []bool{false, true} {
		cfg := testConfig(t)
		cfg.TmpNoexec = noexec
		c := newSandbox(t, cfg)
		opts := sh(t, c, `awk '$2 == "/tmp" { print $4 }' /proc/self/mounts`)
		for _, o := range []string{"nosuid", "nodev"} {
			if !strings.Contains(","+opts+",", ","+o+",") {
				t.Errorf("noexec %v: /tmp is mounted %s, without %s", noexec, opts, o)
			}
		}
		if got := strings.Contains(","+opts+",", ",noexec,"); got != noexec {
			t.Errorf("noexec %v: /tmp is mounted %s", noexec, opts)
		}
		// A program put there, and a script in HOME, run or not.
		res, out := run(t, c, sandbox.ExecRequest{Command: `cp /bin/true /tmp/prog && /tmp/prog && mkdir -p ~/.local/bin && printf '#!/bin/sh\necho ran\n' > ~/.local/bin/tool && chmod +x ~/.local/bin/tool && ~/.local/bin/tool`})
		switch {
		case !noexec && (res.ExitCode != 0 || out != "ran\n"):
			t.Errorf("/tmp executable: exit %d, %q", res.ExitCode, out)
		case noexec && res.ExitCode != 126:
			t.Errorf("/tmp noexec: exit %d, %q; want 126", res.ExitCode, out)
		}
	}
}
