package docker

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

	"github.com/corralhq/corral/sandbox"
)

// The container is hardened by default; checked from inside and through the
// engine.
func TestHardening(t *testing.T) {
	cfg := testConfig(t)
	cfg.CPUs = 1.5
	cfg.PidsLimit = 300
	c := newSandbox(t, cfg)

	status := sh(t, c, "cat /proc/self/status")
	// Commands have no capability, but for CAP_DAC_OVERRIDE (bit 1) when the
	// workspace belongs to root, so that they can write it.
	caps := "0000000000000000"
	if os.Getuid() == 0 {
		caps = "0000000000000002"
	}
	for _, want := range []string{"CapEff:\t" + caps, "CapPrm:\t" + caps, "NoNewPrivs:\t1"} {
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
	if res, _ := run(t, c, sandbox.ExecRequest{Command: "test -e /var/run/docker.sock || test -e /run/docker.sock"}); res.ExitCode == 0 {
		t.Error("a docker socket is reachable")
	}
	if res, out := run(t, c, sandbox.ExecRequest{Command: "touch /.corral/corral"}); res.ExitCode == 0 {
		t.Errorf("the agent binary is writable: %s", out)
	}
	// The root can be written by default (by root's files' permissions, which
	// a command overrides only when the workspace is root's).
	if os.Getuid() == 0 {
		sh(t, c, "touch /rootfs-writable")
	}

	api, _ := engine()
	in, err := api.ContainerInspect(context.Background(), containerID(t, c))
	if err != nil {
		t.Fatal(err)
	}
	hc := in.HostConfig
	// The agent's five, and DAC_OVERRIDE for commands in a root workspace.
	if !slices.Equal(hc.CapDrop, []string{"ALL"}) || len(hc.CapAdd) < 5 || len(hc.CapAdd) > 6 {
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
	for _, k := range []string{sandbox.LabelSession, sandbox.LabelPID, sandbox.LabelCreated, sandbox.LabelHost} {
		if labels[k] == "" {
			t.Errorf("label %s missing", k)
		}
	}
	if labels[sandbox.LabelSession] != c.Session() || labels[sandbox.LabelPID] != strconv.Itoa(os.Getpid()) {
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
	if res, out := run(t, c, sandbox.ExecRequest{Command: "touch /etc/x"}); res.ExitCode == 0 || !strings.Contains(out, "Read-only file system") {
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
	if res, _ := run(t, c, sandbox.ExecRequest{Command: "echo x >> " + dir + "/log || exit 1; touch " + dir + "/new"}); res.ExitCode == 0 {
		t.Error("the read-only mount is writable")
	}
}

// A command cannot plant a hook or a config that git on the host would run:
// it works on a shadow of the repository, and the host's files never change;
// git add, commit, checkout -b and stash still work, and their effects reach
// the host.
func TestGitShadow(t *testing.T) {
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
		"mkdir -p .git/modules/lib/hooks && echo 'touch /tmp/pwned' > .git/modules/lib/hooks/post-checkout",
		"echo '[core] fsmonitor = touch /tmp/pwned' >> .git/modules/lib/config",
		"echo 'touch /tmp/pwned' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit",
		"git config core.fsmonitor 'touch /tmp/pwned'",
		"echo '[core] hooksPath = /tmp' >> .git/config",
		"echo evil > .git/commondir",
		"echo /tmp > .git/objects/info/alternates",
		"echo '* filter=x' > .git/info/attributes",
	}
	for _, a := range attacks {
		run(t, c, sandbox.ExecRequest{Command: a})
	}
	if after, err := os.ReadFile(filepath.Join(ws, ".git", "config")); err != nil || string(after) != string(configBefore) {
		t.Errorf(".git/config changed: %v\n%s", err, after)
	}
	for _, p := range []string{".git/hooks/pre-commit", ".git-aside", ".git/commondir", ".git/objects/info/alternates", ".git/info/attributes", ".git/modules/lib/hooks"} {
		if _, err := os.Lstat(filepath.Join(ws, p)); err == nil {
			t.Errorf("%s reached the host", p)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(sub, "config")); strings.Contains(string(b), "fsmonitor") {
		t.Error("the submodule's config changed")
	}
	sh(t, c, "rm -f .git/config .git/commondir .git/info/attributes && git init -q . && git config core.hooksPath .git/hooks && rm -f .git/hooks/pre-commit")
	out := sh(t, c, "echo hello > f && git add f && git commit -q -m first && git checkout -q -b topic && echo more >> f && git stash -q && git log --oneline | wc -l && git stash list | wc -l && git status --porcelain | wc -l")
	if out != "1\n1\n0" {
		t.Errorf("git in the sandbox: %q", out)
	}
	// git log on a terminal does not wait in a pager.
	if res, out := run(t, c, sandbox.ExecRequest{Command: "git log", Timeout: time.Minute}); res.ExitCode != 0 || res.InputWait || !strings.Contains(out, "first") {
		t.Errorf("git log: %+v %q", res, out)
	}
	// The host sees the commit, the branch, the stash and a clean index.
	host := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = ws
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v on the host: %v %s", args, err, b)
		}
		return strings.TrimSpace(string(b))
	}
	if got := host("rev-parse", "--abbrev-ref", "HEAD"); got != "topic" {
		t.Errorf("host HEAD is %q", got)
	}
	if got := host("log", "--format=%s"); got != "first" {
		t.Errorf("host log %q", got)
	}
	if got := host("stash", "list"); !strings.Contains(got, "stash@{0}") {
		t.Errorf("host stash %q", got)
	}
	if got := host("status", "--porcelain"); got != "" {
		t.Errorf("host status %q", got)
	}
	// What the user does on the host between commands reaches the sandbox.
	host("-c", "user.name=u", "-c", "user.email=u@x", "commit", "-q", "--allow-empty", "-m", "by the user")
	if out := sh(t, c, "git log -1 --format=%s"); out != "by the user" {
		t.Errorf("the sandbox sees %q", out)
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

	// Redirections stay in the shadow, also when a background process plants
	// them after its command ended.
	for _, cmd := range []string{
		"echo evil > .git/commondir",
		"echo ../../evil > .git/modules/lib/commondir",
		"git config extensions.worktreeConfig true && echo '[core] fsmonitor = touch /x' > .git/config.worktree",
		"(sleep 0.2; echo evil > .git/commondir) >/dev/null 2>&1 &",
	} {
		sh(t, c, cmd)
	}
	time.Sleep(300 * time.Millisecond) // not an assertion: the background writer's chance
	for _, p := range []string{".git/commondir", ".git/modules/lib/commondir", ".git/config.worktree"} {
		if _, err := os.Lstat(filepath.Join(ws, p)); err == nil {
			t.Errorf("%s reached the host", p)
		}
	}

	// The rest cannot be changed at all.
	for _, a := range []string{
		"echo 'gitdir: ../evil' > lib/.git",
		"mv .git/modules/lib .git/modules/lib-aside",
		"mv lib lib-aside",
	} {
		if res, out := run(t, c, sandbox.ExecRequest{Command: a}); res.ExitCode == 0 {
			t.Errorf("%q succeeded: %s", a, out)
		}
	}
	// These change only the shadow.
	for _, a := range []string{
		"echo ../../../evil > .git/worktrees/wt/commondir",
		"echo " + filepath.Join(ws, "evil") + " > .git/worktrees/wt/gitdir",
		"cp .git/modules/lib/config /tmp/lib-config && cp evil/config .git/modules/lib/config",
	} {
		run(t, c, sandbox.ExecRequest{Command: a})
	}
	if b, err := os.ReadFile(filepath.Join(ws, ".git/worktrees/wt/gitdir")); err != nil || strings.Contains(string(b), "evil") {
		t.Errorf("the worktree's gitdir changed: %v %s", err, b)
	}
	sh(t, c, "cp /tmp/lib-config .git/modules/lib/config")

	// Ordinary git still works, submodule included.
	// Inside, they are the commands' own business; they are undone here.
	sh(t, c, "rm -f .git/commondir .git/modules/lib/commondir .git/config.worktree")
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
	if res, out := run(t, wt, sandbox.ExecRequest{Command: "echo 'gitdir: evil' > .git"}); res.ExitCode == 0 {
		t.Errorf("the worktree's .git file was rewritten: %s", out)
	}

	hostGit(ws, "status")
	hostGit(ws, "submodule", "status")
	hostGit(filepath.Join(other, "wt"), "status")
	if ents, _ := os.ReadDir(marks); len(ents) > 0 {
		t.Errorf("git on the host ran a planted program (%d times)", len(ents))
	}
}
