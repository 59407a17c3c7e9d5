//go:build !unix

package checkpoint

import (
	"os/exec"
	"time"
)

func killGroup(cmd *exec.Cmd) { cmd.WaitDelay = 5 * time.Second }
