package sandbox

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The container is hardened by default; checked from inside and through the
// engine.
func TestHardening(t *testing.T) {
	cfg := testConfig(t)
	cfg.CPUs = 1.5
	cfg.PidsLimit = 300
	c := newSandbox(t, cfg)

	status := sh(t, c, "cat /proc/self/status")
	for _, want := range []string{"CapEff:\t0000000000000000", "CapPrm:\t0000000000000000", "CapBnd:\t0000000000000000", "NoNewPrivs:\t1"} {
		if !strings.Contains(status, want) {
			t.Errorf("/proc/self/status lacks %q", want)
		}
	}
	if got := sh(t, c, "ls /sys/class/net"); got != "lo" {
		t.Errorf("network interfaces %q, want only lo", got)
	}
	if got := sh(t, c, "cat /sys/fs/cgroup/pids/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids.max"); got != "300" {
		t.Errorf("pids.max %q", got)
	}
	if got := sh(t, c, "cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || cat /sys/fs/cgroup/memory.max"); got != strconv.Itoa(512<<20) {
		t.Errorf("memory limit %q", got)
	}
	if got := sh(t, c, "tr '\\0' ' ' < /proc/1/cmdline"); !strings.Contains(got, "init") {
		t.Errorf("pid 1 is %q, want docker's init", got)
	}
	mounts := sh(t, c, "cat /proc/self/mounts")
	if !strings.Contains(mounts, " /tmp tmpfs ") {
		t.Errorf("/tmp is not a tmpfs:\n%s", mounts)
	}
	if strings.Contains(mounts, "docker.sock") {
		t.Errorf("the docker socket is mounted:\n%s", mounts)
	}
	if res, _ := run(t, c, ExecRequest{Command: "test -e /var/run/docker.sock || test -e /run/docker.sock"}); res.ExitCode == 0 {
		t.Error("a docker socket is reachable")
	}
	if res, out := run(t, c, ExecRequest{Command: "touch /.corral/corral"}); res.ExitCode == 0 {
		t.Errorf("the agent binary is writable: %s", out)
	}
	// The root can be written by default (by root, not by another uid).
	if os.Getuid() == 0 {
		sh(t, c, "touch /rootfs-writable")
	}

	api, _ := engine()
	in, err := api.ContainerInspect(context.Background(), containerID(t, c))
	if err != nil {
		t.Fatal(err)
	}
	hc := in.HostConfig
	if !slices.Equal(hc.CapDrop, []string{"ALL"}) || len(hc.CapAdd) != 0 {
		t.Errorf("capabilities: drop %v add %v", hc.CapDrop, hc.CapAdd)
	}
	if !slices.Contains(hc.SecurityOpt, "no-new-privileges") {
		t.Errorf("security options %v", hc.SecurityOpt)
	}
	if hc.NetworkMode != "none" || hc.LogConfig.Type != "none" || hc.Init == nil || !*hc.Init || hc.Privileged {
		t.Errorf("network %q, log %q, init %v, privileged %v", hc.NetworkMode, hc.LogConfig.Type, hc.Init, hc.Privileged)
	}
	if hc.Memory != 512<<20 || hc.MemorySwap != hc.Memory || hc.NanoCPUs != 1.5e9 || hc.PidsLimit == nil || *hc.PidsLimit != 300 {
		t.Errorf("limits: memory %d swap %d cpus %d pids %v", hc.Memory, hc.MemorySwap, hc.NanoCPUs, hc.PidsLimit)
	}
	if len(in.Config.Env) > 2 { // the image's PATH, maybe HOSTNAME; never the host's
		for _, e := range in.Config.Env {
			if strings.HasPrefix(e, "CORRAL") || strings.HasPrefix(e, "GOPATH") {
				t.Errorf("host variable %q in the container's environment", e)
			}
		}
	}
	for _, m := range in.Mounts {
		switch m.Destination {
		case c.Workspace():
			if !m.RW {
				t.Error("the workspace is read-only")
			}
		default:
			if m.Type == "bind" && m.RW {
				t.Errorf("bind mount %s is writable", m.Destination)
			}
		}
	}
	labels := in.Config.Labels
	for _, k := range []string{LabelSession, LabelPID, LabelCreated, LabelHost} {
		if labels[k] == "" {
			t.Errorf("label %s missing", k)
		}
	}
	if labels[LabelSession] != c.Session() || labels[LabelPID] != strconv.Itoa(os.Getpid()) {
		t.Errorf("labels %v", labels)
	}
	if in.Name != "/corral-"+c.Session() {
		t.Errorf("name %q", in.Name)
	}
}

func TestReadOnlyRoot(t *testing.T) {
	cfg := testConfig(t)
	cfg.ReadOnlyRoot = true
	c := newSandbox(t, cfg)
	if res, out := run(t, c, ExecRequest{Command: "touch /etc/x"}); res.ExitCode == 0 || !strings.Contains(out, "Read-only file system") {
		t.Errorf("exit %d, output %q", res.ExitCode, out)
	}
	sh(t, c, "echo ok > /tmp/x && echo ok > ~/x && echo ok > ws-file")
}

func TestNetworkBridge(t *testing.T) {
	cfg := testConfig(t)
	cfg.Network = "bridge"
	c := newSandbox(t, cfg)
	if got := sh(t, c, "ls /sys/class/net | tr '\\n' ' '"); !strings.Contains(got, "eth0") {
		t.Errorf("interfaces %q, want eth0", got)
	}
}

func TestReadOnlyMounts(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "log"), []byte("logged\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t)
	cfg.ReadOnlyMounts = []string{dir}
	c := newSandbox(t, cfg)
	if got := sh(t, c, "cat "+dir+"/log"); got != "logged" {
		t.Errorf("got %q", got)
	}
	if res, _ := run(t, c, ExecRequest{Command: "echo x >> " + dir + "/log || exit 1; touch " + dir + "/new"}); res.ExitCode == 0 {
		t.Error("the read-only mount is writable")
	}
}

// A command cannot plant a hook or a config that git on the host would run,
// while git add and git commit still work.
func TestGitHooksAndConfigReadOnly(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git on the host")
	}
	cfg := testConfig(t)
	ws := cfg.Workspace
	gitCmd := exec.Command("git", "init", "-q", ws)
	if out, err := gitCmd.CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	configBefore, err := os.ReadFile(filepath.Join(ws, ".git", "config"))
	if err != nil {
		t.Fatal(err)
	}
	// A submodule's repository lives in .git/modules/NAME, hooks and config
	// included; this one has no hooks directory yet.
	sub := filepath.Join(ws, ".git", "modules", "lib")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{"HEAD": "ref: refs/heads/main\n", "config": "[core]\n\tbare = false\n"} {
		if err := os.WriteFile(filepath.Join(sub, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c := newSandbox(t, cfg)
	if !hasTool(t, c, "git") {
		t.Skip("no git in the image")
	}
	attacks := []string{
		// Move the repository aside and put one with a hook in its place.
		"mv .git .git-aside",
		"mv .git/hooks .git/hooks-aside",
		"echo 'touch /tmp/pwned' > .git/modules/lib/hooks/post-checkout",
		"echo '[core] fsmonitor = touch /tmp/pwned' >> .git/modules/lib/config",
		"echo 'touch /tmp/pwned' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit",
		"git config core.fsmonitor 'touch /tmp/pwned'",
		"git config core.pager 'touch /tmp/pwned'",
		"echo '[core] hooksPath = /tmp' >> .git/config",
		"rm -rf .git/hooks",
		"mv .git/config .git/config.old",
		"rm -f .git/config",
	}
	for _, a := range attacks {
		if res, out := run(t, c, ExecRequest{Command: a}); res.ExitCode == 0 {
			t.Errorf("%q succeeded: %s", a, out)
		}
	}
	if after, err := os.ReadFile(filepath.Join(ws, ".git", "config")); err != nil || string(after) != string(configBefore) {
		t.Errorf(".git/config changed: %v\n%s", err, after)
	}
	if _, err := os.Stat(filepath.Join(ws, ".git", "hooks", "pre-commit")); err == nil {
		t.Error("a pre-commit hook was planted")
	}
	if _, err := os.Stat(filepath.Join(ws, ".git-aside")); err == nil {
		t.Error("the repository was moved aside")
	}
	if entries, _ := os.ReadDir(filepath.Join(sub, "hooks")); len(entries) > 0 {
		t.Errorf("a submodule hook was planted: %v", entries)
	}
	out := sh(t, c, "echo hello > f && git add f && git commit -q -m first && git log --oneline | wc -l && git status --porcelain | wc -l")
	if out != "1\n0" {
		t.Errorf("git commit: %q", out)
	}
	// git log on a terminal does not wait in a pager.
	if res, out := run(t, c, ExecRequest{Command: "git log", Timeout: time.Minute}); res.ExitCode != 0 || res.InputWait || !strings.Contains(out, "first") {
		t.Errorf("git log: %+v %q", res, out)
	}
}

// git on the host reads a repository's config and hooks from wherever the
// repository's own files send it: a commondir, a submodule's .git file, a
// linked worktree's directory, a submodule's repository moved aside. None of
// these may let a command make git on the host run a program of its choice;
// git add and commit still work.
func TestGitCannotBeSentElsewhere(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git on the host")
	}
	cfg := testConfig(t)
	ws := cfg.Workspace
	marks := t.TempDir() // planted programs would touch files here, on the host
	other := t.TempDir() // a library repository and a linked worktree, outside
	hostGit := func(dir string, args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "protocol.file.allow=always", "-c", "user.name=u", "-c", "user.email=u@x"}, args...)...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	lib := filepath.Join(other, "lib")
	os.Mkdir(lib, 0o755)
	hostGit(lib, "init", "-q")
	hostGit(lib, "commit", "-q", "--allow-empty", "-m", "lib")
	hostGit(ws, "init", "-q")
	hostGit(ws, "commit", "-q", "--allow-empty", "-m", "init")
	hostGit(ws, "submodule", "add", "-q", lib, "lib")
	hostGit(ws, "commit", "-q", "-m", "submodule")
	hostGit(ws, "worktree", "add", "-q", filepath.Join(other, "wt"))

	c := newSandbox(t, cfg)
	if !hasTool(t, c, "git") {
		t.Skip("no git in the image")
	}
	// A repository directory whose config runs a program on the host.
	evil := fmt.Sprintf(`mkdir -p EVIL/objects EVIL/refs && echo 'ref: refs/heads/x' > EVIL/HEAD && printf '[core]\n\trepositoryformatversion = 0\n\tfsmonitor = "touch %s/$$; false"\n' > EVIL/config`, marks)
	plant := func(dir string) string { return strings.ReplaceAll(evil, "EVIL", dir) }
	sh(t, c, plant(".git/evil")+" && "+plant("evil"))

	// Planted redirections are removed when the command ends, and said.
	for _, tt := range []struct{ cmd, path string }{
		{"echo evil > .git/commondir", ".git/commondir"},
		{"echo ../../evil > .git/modules/lib/commondir", ".git/modules/lib/commondir"},
		{"echo '[core] fsmonitor = touch /x' > .git/config.worktree", ".git/config.worktree"},
	} {
		res, out := run(t, c, ExecRequest{Command: tt.cmd})
		if res.ExitCode != 0 || !slices.Contains(res.Removed, tt.path) {
			t.Errorf("%q: exit %d, removed %q: %s", tt.cmd, res.ExitCode, res.Removed, out)
		}
		if _, err := os.Lstat(filepath.Join(ws, tt.path)); err == nil {
			t.Errorf("%s is still there", tt.path)
		}
	}
	// So is one a background process plants later, at the next command.
	sh(t, c, "(sleep 0.2; echo evil > .git/commondir) >/dev/null 2>&1 &")
	waitFor(t, time.Minute, "the background process planting .git/commondir", func() bool {
		_, err := os.Lstat(filepath.Join(ws, ".git/commondir"))
		return err == nil
	})
	if res, _ := run(t, c, ExecRequest{Command: "true"}); !slices.Contains(res.Removed, ".git/commondir") {
		t.Errorf("the next command did not remove .git/commondir: %q", res.Removed)
	}

	// The rest cannot be changed at all.
	for _, a := range []string{
		"echo 'gitdir: ../evil' > lib/.git",
		"mv .git/modules/lib .git/modules/lib-aside",
		"echo ../../../evil > .git/worktrees/wt/commondir",
		"echo " + filepath.Join(ws, "evil") + " > .git/worktrees/wt/gitdir",
		"mv .git/worktrees .git/worktrees-aside",
	} {
		if res, out := run(t, c, ExecRequest{Command: a}); res.ExitCode == 0 {
			t.Errorf("%q succeeded: %s", a, out)
		}
	}

	// Ordinary git still works, submodule included.
	out := sh(t, c, "echo hello > f && git add f && git commit -q -m first && git submodule status | wc -l && git status --porcelain | wc -l")
	if out != "1\n1" { // the submodule; the untracked evil/
		t.Errorf("git in the sandbox: %q", out)
	}
	// A workspace that is a linked worktree keeps the .git file naming its
	// repository.
	wtCfg := testConfig(t)
	wtCfg.Workspace = filepath.Join(other, "wt")
	wt := newSandbox(t, wtCfg)
	sh(t, wt, plant("evil"))
	if res, out := run(t, wt, ExecRequest{Command: "echo 'gitdir: evil' > .git"}); res.ExitCode == 0 {
		t.Errorf("the worktree's .git file was rewritten: %s", out)
	}

	hostGit(ws, "status")
	hostGit(ws, "submodule", "status")
	hostGit(filepath.Join(other, "wt"), "status")
	if ents, _ := os.ReadDir(marks); len(ents) > 0 {
		t.Errorf("git on the host ran a planted program (%d times)", len(ents))
	}
}
