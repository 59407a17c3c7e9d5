package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Labels every sandbox carries (a Docker container's labels, a pod's).
// `docker ps --filter label=corral.session` lists exactly corral's Docker
// sandboxes.
const (
	LabelSession   = "corral.session"   // the session id
	LabelPID       = "corral.pid"       // the owner process's pid
	LabelPIDStart  = "corral.pidstart"  // its start time in clock ticks since boot (tells a reused pid)
	LabelCreated   = "corral.created"   // creation time, RFC 3339
	LabelHost      = "corral.host"      // identity of the owner's host (machine and pid namespace)
	LabelBoot      = "corral.boot"      // the owner host's boot id
	LabelWorkspace = "corral.workspace" // the workspace directory
)

// Info describes one sandbox, as Backend.List gives it: a container, a pod.
type Info struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Session   string    `json:"session"`
	Image     string    `json:"image"`
	Workspace string    `json:"workspace"`
	State     string    `json:"state"`  // running, exited, ...
	Status    string    `json:"status"` // the engine's words ("Up 3 minutes")
	PID       int       `json:"pid"`    // the owner process
	Created   time.Time `json:"created"`
	// Local is set when the owner ran on this host (in this pid namespace);
	// only then is OwnerAlive known.
	Local      bool `json:"local"`
	OwnerAlive bool `json:"ownerAlive"`
}

var (
	identOnce            sync.Once
	hostIdent, bootIdent string
	selfPIDStart         string
)

// identity returns this host's identity (machine id and hostname: a container
// running corral has its own hostname and pid namespace), the boot id, and the
// start time of this process.
func identity() (host, boot, pidStart string) {
	identOnce.Do(func() {
		var machine string
		for _, p := range []string{"/etc/machine-id", "/var/lib/dbus/machine-id"} {
			if b, err := os.ReadFile(p); err == nil && len(strings.TrimSpace(string(b))) > 0 {
				machine = strings.TrimSpace(string(b))
				break
			}
		}
		name, _ := os.Hostname()
		sum := sha256.Sum256([]byte(machine + "\x00" + name))
		hostIdent = hex.EncodeToString(sum[:8])
		if b, err := os.ReadFile("/proc/sys/kernel/random/boot_id"); err == nil {
			bootIdent = strings.TrimSpace(string(b))
		}
		selfPIDStart = pidStartTime(os.Getpid())
	})
	return hostIdent, bootIdent, selfPIDStart
}

// pidStartTime is field 22 of /proc/<pid>/stat, or "" where there is no /proc.
func pidStartTime(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 {
		f := strings.Fields(s[i+1:])
		if len(f) > 19 {
			return f[19]
		}
	}
	return ""
}

// OwnerLabels are the labels that tie a sandbox (a container, a pod) to
// this process: its session, pid and start time, host, boot and workspace.
func OwnerLabels(session, workspace string) map[string]string {
	host, boot, start := identity()
	return map[string]string{
		LabelSession:   session,
		LabelPID:       strconv.Itoa(os.Getpid()),
		LabelPIDStart:  start,
		LabelCreated:   time.Now().UTC().Format(time.RFC3339),
		LabelHost:      host,
		LabelBoot:      boot,
		LabelWorkspace: workspace,
	}
}

// OwnerState says whether the owner of a sandbox with these labels ran on
// this host and, if so, whether it is still alive.
func OwnerState(labels map[string]string) (local, alive bool) {
	host, boot, _ := identity()
	if labels[LabelHost] != host {
		return false, false
	}
	if labels[LabelBoot] != boot {
		return true, false // the host rebooted since
	}
	pid, err := strconv.Atoi(labels[LabelPID])
	if err != nil || pid <= 0 {
		return true, false
	}
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return true, false
	}
	if want := labels[LabelPIDStart]; want != "" {
		if got := pidStartTime(pid); got != "" && got != want {
			return true, false // the pid was reused
		}
	}
	return true, true
}
