package kube_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/sandbox"
	"github.com/corralhq/corral/sandbox/kube"
	"github.com/corralhq/corral/sandbox/sandboxtest"
)

// The trust boundary on Kubernetes, tested the way an attacker works: each
// hostile step is a script the policy cannot read, run through the bash
// tool's path (a terminal, the session's directory). The agent and the
// commands share a user there: what holds is that the agent is its
// container's PID 1, deaf to their signals, not dumpable, and that every
// process of a command is found under its tracker — or killed with it.

// script writes a file into the workspace and returns its path.
func script(t *testing.T, ws, name, body string) string {
	t.Helper()
	p := filepath.Join(ws, name)
	if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// bash runs a command as the bash tool does (terminal, session directory).
func bash(t *testing.T, sb sandbox.Sandbox, command string, timeout time.Duration) (sandbox.ExecResult, string) {
	t.Helper()
	var out strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := sb.Exec(ctx, sandbox.ExecRequest{Command: command, Output: &out, Timeout: timeout})
	if err != nil {
		t.Fatalf("%s: %v", command, err)
	}
	return res, out.String()
}

// alive checks that the same pod's agent still serves: no restart.
func alive(t *testing.T, p *kube.Pod, name string) {
	t.Helper()
	res, out := bash(t, p, "echo still-here", 30*time.Second)
	if res.Restarted || !strings.Contains(out, "still-here") || p.Name() != name {
		t.Fatalf("the agent did not survive: restarted %v (%s), pod %s (was %s), output %q", res.Restarted, res.RestartReason, p.Name(), name, out)
	}
}

func TestAgentDeafToSignals(t *testing.T) {
	b := backend(t, kube.Options{})
	ws := t.TempDir()
	// Every signal, by kill, by tgkill (SI_TKILL) and by sigqueue (SI_QUEUE:
	// the Go runtime takes a SIGSEGV with that code for a fault of its own).
	script(t, ws, "signals.py", `
import ctypes, os, signal, sys
libc = ctypes.CDLL(None, use_errno=True)
class sigval(ctypes.Union):
    _fields_ = [("sival_int", ctypes.c_int), ("sival_ptr", ctypes.c_void_p)]
SYS_tgkill = 234 if os.uname().machine == "x86_64" else 131
sent = 0
for how in ("kill", "tgkill", "sigqueue"):
    for s in range(1, 65):
        if s in (signal.SIGSTOP,):
            continue
        if how == "kill":
            try:
                os.kill(1, s); sent += 1
            except OSError as e:
                print("kill", s, e)
        elif how == "tgkill":
            if libc.syscall(SYS_tgkill, 1, 1, s) == 0:
                sent += 1
        else:
            if libc.sigqueue(1, s, sigval(0)) == 0:
                sent += 1
print("sent", sent)
`)
	// The workspace is uploaded when the pod starts.
	p := newPod(t, b, sandbox.Config{Workspace: ws})
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	name := p.Name()
	res, out := bash(t, p, "python3 signals.py", time.Minute)
	t.Logf("%s", out)
	if res.ExitCode != 0 || !strings.Contains(out, "sent ") {
		t.Fatalf("the script did not run: exit %d, %q", res.ExitCode, out)
	}
	time.Sleep(500 * time.Millisecond)
	alive(t, p, name)
	// SIGSTOP and SIGKILL from inside the namespace, to PID 1 and to all.
	bash(t, p, "kill -STOP 1; kill -KILL 1; kill -9 -1; true", time.Minute)
	alive(t, p, name)
}

func TestAgentNotReadable(t *testing.T) {
	b := backend(t, kube.Options{})
	ws := t.TempDir()
	p := newPod(t, b, sandbox.Config{Workspace: ws, Env: []string{"CORRAL_SECRETISH=x"}})
	script(t, ws, "peek.py", `
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
for f in ("environ", "mem", "maps", "fd/0", "fd/1", "root/.corral/corral", "cwd/x"):
    try:
        with open("/proc/1/" + f, "rb") as fh:
            fh.read(1)
        print("OPENED", f)
    except OSError as e:
        print("denied", f, e.errno)
try:
    os.listdir("/proc/1/fd"); print("OPENED fd dir")
except OSError as e:
    print("denied fd dir", e.errno)
PTRACE_ATTACH = 16
r = libc.ptrace(PTRACE_ATTACH, 1, 0, 0)
print("ptrace", r, ctypes.get_errno())
with open("/proc/1/cmdline", "rb") as fh:
    print("pid1", fh.read().replace(b"\0", b" ").decode())
`)
	_, out := bash(t, p, "python3 peek.py", time.Minute)
	t.Logf("%s", out)
	if strings.Contains(out, "OPENED") {
		t.Errorf("a command opened the agent's files:\n%s", out)
	}
	if !strings.Contains(out, "ptrace -1 1") {
		t.Errorf("a command could ptrace the agent (want -1, EPERM):\n%s", out)
	}
	if !strings.Contains(out, "pid1 /.corral/corral agent") {
		t.Errorf("PID 1 is not the agent:\n%s", out)
	}
}

// A command that kills its own tracker loses every process it started,
// however it hid them, and is told so.
func TestTrackerKilled(t *testing.T) {
	b := backend(t, kube.Options{})
	ws := t.TempDir()
	p := newPod(t, b, sandbox.Config{Workspace: ws})
	script(t, ws, "escape.py", `
import os, time, sys
# a daemon: double fork, new session
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execvp("sleep", ["sleep", "4711"])
    os._exit(0)
os.wait()
# the tracker is the parent of the command's shell
shell = os.getppid()
with open("/proc/%d/stat" % shell) as f:
    tracker = int(f.read().rsplit(")", 1)[1].split()[1])
os.kill(tracker, 9)
time.sleep(1)
print("survived")
`)
	res, out := bash(t, p, "sleep 4712 & python3 escape.py; sleep 4713", 30*time.Second)
	t.Logf("%+v %q", res, out)
	if !res.TrackerKilled {
		t.Errorf("the result does not say the tracker was killed: %+v", res)
	}
	_, left := bash(t, p, `for d in /proc/[0-9]*; do { tr '\0' ' ' < $d/cmdline; echo; } 2>/dev/null; done | grep '^sleep 471' || true`, 30*time.Second)
	if strings.TrimSpace(left) != "" {
		t.Errorf("processes of the command survived its tracker:\n%s", left)
	}
}

// A command that stops its tracker (SIGSTOP) still ends at its timeout,
// with everything it started.
func TestTrackerStopped(t *testing.T) {
	b := backend(t, kube.Options{})
	p := newPod(t, b, sandbox.Config{})
	res, _ := bash(t, p, `t=$(awk '{print $4}' /proc/$$/stat); kill -STOP $t; setsid sleep 4721 & sleep 4722`, 2*time.Second)
	// -1: the agent never reported the command's end, and the host gave up
	// waiting for it.
	if !res.TimedOut || res.ExitCode == -1 {
		t.Errorf("the command did not end at its timeout, or its end was not reported: %+v", res)
	}
	_, left := bash(t, p, `for d in /proc/[0-9]*; do { tr '\0' ' ' < $d/cmdline; echo; } 2>/dev/null; done | grep '^sleep 472' || true`, 30*time.Second)
	if strings.TrimSpace(left) != "" {
		t.Errorf("processes outlived the timeout:\n%s", left)
	}
}

// Background processes a command leaves (a server) are found, listed, and
// keep running for the next command, as on Docker.
func TestBackgroundKept(t *testing.T) {
	b := backend(t, kube.Options{})
	p := newPod(t, b, sandbox.Config{})
	res, _ := bash(t, p, "(setsid sleep 4731 &) ; sleep 4732 &", 10*time.Second)
	var cmds []string
	for _, bp := range res.Background {
		cmds = append(cmds, bp.Command)
	}
	if got := strings.Join(cmds, ","); !strings.Contains(got, "sleep 4731") || !strings.Contains(got, "sleep 4732") {
		t.Errorf("background: %q", got)
	}
	_, out := bash(t, p, "pgrep -fa 'sleep 473' | wc -l", 10*time.Second)
	if strings.TrimSpace(out) != "2" {
		t.Errorf("background processes did not outlive the command: %q", out)
	}
}

// What a command sees of its pod: no capability, no new privileges, the
// runtime's seccomp filter, a read-only root, no service account token,
// the workspace and /tmp writable.
func TestHardened(t *testing.T) {
	b := backend(t, kube.Options{})
	p := newPod(t, b, sandbox.Config{})
	res, out, errOut := sandboxtest.Exec(t, p, sandbox.ExecRequest{Pipes: true, Command: `
grep -E '^(CapEff|CapPrm|CapBnd|CapAmb|NoNewPrivs|Seccomp):' /proc/self/status
touch /usr/corral-x 2>/dev/null && echo ROOT-WRITABLE
ls /var/run/secrets/kubernetes.io 2>/dev/null && echo TOKEN
touch ./w /tmp/t "$HOME/h" && echo writable
`})
	t.Logf("%s %s", out, errOut)
	if res.ExitCode != 0 {
		t.Fatalf("exit %d", res.ExitCode)
	}
	for _, want := range []string{"CapEff:\t0000000000000000", "CapPrm:\t0000000000000000", "CapBnd:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2", "writable"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q", want)
		}
	}
	for _, bad := range []string{"ROOT-WRITABLE", "TOKEN"} {
		if strings.Contains(out, bad) {
			t.Errorf("%s", bad)
		}
	}
}
