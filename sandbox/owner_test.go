package sandbox

import (
	"os"
	"os/exec"
	"strconv"
	"testing"
)

// A dead owner is told apart from a pid that was reused.
func TestOwnerState(t *testing.T) {
	host, boot, start := identity()
	self := map[string]string{LabelHost: host, LabelBoot: boot, LabelPID: strconv.Itoa(os.Getpid()), LabelPIDStart: start}
	if local, alive := OwnerState(self); !local || !alive {
		t.Errorf("self: local %v alive %v", local, alive)
	}
	reused := map[string]string{LabelHost: host, LabelBoot: boot, LabelPID: strconv.Itoa(os.Getpid()), LabelPIDStart: "1"}
	if _, alive := OwnerState(reused); alive {
		t.Error("a reused pid counts as alive")
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	dead := map[string]string{LabelHost: host, LabelBoot: boot, LabelPID: strconv.Itoa(cmd.Process.Pid)}
	if _, alive := OwnerState(dead); alive {
		t.Error("a dead pid counts as alive")
	}
	rebooted := map[string]string{LabelHost: host, LabelBoot: "another-boot", LabelPID: strconv.Itoa(os.Getpid())}
	if _, alive := OwnerState(rebooted); alive {
		t.Error("an owner from before a reboot counts as alive")
	}
	if local, _ := OwnerState(map[string]string{LabelHost: "elsewhere", LabelPID: "1"}); local {
		t.Error("another host's container counts as local")
	}
}
