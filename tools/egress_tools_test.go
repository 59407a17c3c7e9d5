package tools

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/egress"
	"github.com/corralhq/corral/internal/testenv"
	"github.com/corralhq/corral/sandbox"
)

// The tools an agent installs and fetches with reach the hosts a session
// allows, through the egress proxy and nothing else, each against a server
// the test starts (nothing here reaches a registry): as a session with
// --network allow, --allow-host and --add-host.

// toolSession is a session whose sandbox reaches the network only through a
// proxy that allows allow and resolves hosts ("NAME:IP") as --add-host does.
type toolSession struct {
	t       *testing.T
	s       *Session
	ws      string
	records *recordLog
}

func newToolSession(t *testing.T, image, runtime string, allow, hosts, env []string) *toolSession {
	t.Helper()
	testenv.NeedsDocker(t)
	ts := &toolSession{t: t, records: &recordLog{}}
	calls := &egress.Calls{}
	proxy, err := egress.New(egress.Config{
		Allow:  allow,
		Hosts:  hosts,
		CallID: calls.Current,
		Record: func(r egress.Record) { calls.Observe(r); ts.records.add(r) },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	var box *sandbox.Container
	ts.s, ts.ws = newTestSession(t, nil, func(o *Options) {
		o.Policy = allowAll{}
		o.Network = calls
		if runtime == "runsc" && os.Getuid() == 0 {
			// gVisor before 2023 has no ambient capabilities: commands
			// could not write a workspace of root's.
			if err := os.Chown(o.Workspace, 65532, 65532); err != nil {
				t.Fatal(err)
			}
		}
		box, err = sandbox.New(sandbox.Config{
			Workspace: o.Workspace, Image: image, Agent: testenv.Agent(t),
			Memory: 1 << 30, Runtime: runtime, Egress: proxy, Env: env,
		})
		if err != nil {
			t.Fatal(err)
		}
		o.Sandbox = box
	})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		box.Close(ctx)
	})
	return ts
}

// run runs a command and checks its exit status (any failure when want < 0)
// and that its result holds each fact.
func (ts *toolSession) run(command string, want int, facts ...string) string {
	ts.t.Helper()
	r := bash(ts.t, ts.s, command, 300)
	d := bashDetails(ts.t, r)
	if !d.Ran || (want >= 0 && d.ExitCode != want) || (want < 0 && d.ExitCode == 0) {
		ts.t.Fatalf("%s: ran %v, exit %d, want %d:\n%s", command, d.Ran, d.ExitCode, want, r.Content)
	}
	wantFacts(ts.t, r.Content, facts...)
	return r.Content
}

// write puts a file in the workspace.
func (ts *toolSession) write(name, content string) {
	ts.t.Helper()
	writeFile(ts.t, ts.ws, name, content)
}

// needRunsc skips a test when gVisor is not registered with the engine.
func needRunsc(t *testing.T) {
	t.Helper()
	testenv.NeedsDocker(t)
	out, _ := exec.Command("docker", "info", "--format", "{{json .Runtimes}}").Output()
	if !strings.Contains(string(out), `"runsc"`) {
		t.Skip("runsc is not registered with the Docker engine")
	}
}

// fixture runs a container of image on Docker's default bridge with dir at
// /fixture, running script, and returns its address there.
func fixture(t *testing.T, image, dir, script string) (id, ip string) {
	t.Helper()
	out, err := exec.Command("docker", "run", "-d", "--rm", "--network", "bridge", "--label", "corral.test=egress-fixture",
		"-v", dir+":/fixture", image, "sh", "-euc", script).CombinedOutput()
	if err != nil {
		t.Fatalf("starting a fixture container: %v\n%s", err, out)
	}
	id = strings.TrimSpace(string(out))
	t.Cleanup(func() { exec.Command("docker", "rm", "-f", id).Run() })
	out, err = exec.Command("docker", "inspect", "-f", "{{.NetworkSettings.IPAddress}}", id).Output()
	if err != nil {
		t.Fatal(err)
	}
	return id, strings.TrimSpace(string(out))
}

// waitFile waits for a fixture to write a file, and returns it.
func waitFile(t *testing.T, path, fixtureID string) string {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if b, err := os.ReadFile(path); err == nil {
			return string(b)
		}
		if time.Now().After(deadline) {
			logs, _ := exec.Command("docker", "logs", fixtureID).CombinedOutput()
			t.Fatalf("the fixture did not write %s:\n%s", path, logs)
		}
	}
}

// sshdImage is the sandbox image with an OpenSSH server, for the fixture.
const sshdImage = `ARG BASE
FROM ${BASE}
RUN apt-get -o Acquire::Languages=none update && \
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends openssh-server && \
    rm -rf /var/lib/apt/lists/*
`

// sshdScript serves a repository over ssh; once sshd listens it writes its
// host key to /fixture/hostkey.pub, and once the test put the key it lets in
// in /fixture/authorized_keys, /fixture/keyed.
const sshdScript = `ssh-keygen -A >/dev/null
git init -q --bare /srv/repo.git
git clone -q /srv/repo.git /tmp/seed 2>/dev/null
cd /tmp/seed && echo 'hello over ssh' > README && git add README && git commit -qm seed && git push -q origin HEAD:main
mkdir -p /run/sshd /root/.ssh
/usr/sbin/sshd -D -e &
until python3 -c 'import socket; socket.create_connection(("127.0.0.1", 22), 1)' 2>/dev/null; do sleep 0.1; done
cp /etc/ssh/ssh_host_ed25519_key.pub /fixture/hostkey.tmp && mv /fixture/hostkey.tmp /fixture/hostkey.pub
until [ -e /fixture/authorized_keys ]; do sleep 0.1; done
install -m 600 /fixture/authorized_keys /root/.ssh/authorized_keys
touch /fixture/keyed
wait
`

// git over ssh goes through the proxy on its own (GIT_SSH_COMMAND's
// ProxyCommand runs the corral binary in the sandbox): clone and push to an
// sshd the test runs, allowed as git.test:22; a host not allowed is refused
// with the reason on git's stderr and in the result's header.
func testGitOverSSH(t *testing.T, runtime string) {
	image := testenv.DerivedImage(t, "sshd", sshdImage)
	dir := t.TempDir()
	id, ip := fixture(t, image, dir, sshdScript)
	ts := newToolSession(t, testenv.Image, runtime, []string{"git.test:22"}, []string{"git.test:" + ip}, nil)
	ts.write("known_hosts", "git.test "+waitFile(t, filepath.Join(dir, "hostkey.pub"), id))
	ts.run(`echo "$GIT_SSH_COMMAND"`, 0, "ProxyCommand=", " agent connect 127.0.0.1:3128 %h %p")
	ts.run(`mkdir -p -m 700 ~/.ssh && ssh-keygen -q -t ed25519 -N '' -f ~/.ssh/id_ed25519 && cp ~/.ssh/id_ed25519.pub client.pub && cp known_hosts ~/.ssh/`, 0)
	if err := os.WriteFile(filepath.Join(dir, "authorized_keys.tmp"), []byte(readFile(t, ts.ws, "client.pub")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "authorized_keys.tmp"), filepath.Join(dir, "authorized_keys")); err != nil {
		t.Fatal(err)
	}
	waitFile(t, filepath.Join(dir, "keyed"), id)
	ts.run(`git clone -q ssh://root@git.test/srv/repo.git clone && cat clone/README`, 0, "hello over ssh")
	ts.run(`cd clone && echo pushed > new && git add new && git commit -qm 'from the sandbox' && git push -q origin HEAD:main`, 0)
	out, err := exec.Command("docker", "exec", id, "git", "-C", "/srv/repo.git", "log", "--format=%s", "main").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "from the sandbox") {
		t.Errorf("the push did not reach the server: %v\n%s", err, out)
	}
	if rec, ok := ts.records.find("git.test", egress.Allowed); !ok || rec.Port != 22 || rec.BytesIn == 0 || rec.BytesOut == 0 {
		t.Errorf("no record of the ssh tunnel: %+v", rec)
	}
	ts.run(`git ls-remote ssh://root@evil.test/srv/repo.git`, -1,
		"corral: blocked evil.test:22 (not in the allowlist)", "Network: blocked evil.test:22 (not in the allowlist)")
}

func TestGitOverSSH(t *testing.T) { testGitOverSSH(t, "") }

func TestGitOverSSHGVisor(t *testing.T) {
	needRunsc(t)
	testGitOverSSH(t, "runsc")
}
