package corral_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/corralhq/corral"
	"github.com/corralhq/corral/internal/testenv"
	"github.com/corralhq/corral/sandbox"
	"github.com/corralhq/corral/sandbox/docker"
	"github.com/corralhq/corral/sandbox/kube"
)

// backendCalls are tool calls whose results must be the same on every
// backend: the file tools through the agent in a pod give what they give on
// the host, staleness, confinement and the bash tool's header included.
var backendCalls = []struct{ tool, args string }{
	{"read", `{"path": "calc.py"}`},
	{"edit", `{"path": "calc.py", "oldText": "a * b", "newText": "a + b"}`},
	{"edit", `{"path": "calc.py", "oldText": "a - b", "newText": "a + b"}`},
	{"write", `{"path": "calc.py", "content": "x = 1\n"}`},
	{"write", `{"path": "new/dir/file.txt", "content": "héllo\r\nworld\r\n"}`},
	{"read", `{"path": "new/dir/file.txt"}`},
	{"read", `{"path": "new"}`},
	{"read", `{"path": "../outside"}`},
	{"read", `{"path": "/etc/passwd"}`},
	{"bash", `{"command": "cd new && printf '%s\\n' one two > list.txt && echo ok"}`},
	{"bash", `{"command": "pwd | sed 's|.*/||'; cat list.txt; exit 3"}`},
	{"read", `{"path": "new/list.txt"}`},
	{"bash", `{"command": "echo changed >> list.txt"}`},
	{"edit", `{"path": "new/list.txt", "oldText": "one", "newText": "uno"}`},
	{"bash", `{"command": "ln -s /etc/passwd pw; ln -s .. up"}`},
	{"read", `{"path": "new/pw"}`},
	{"write", `{"path": "new/up/escape.txt", "content": "x"}`},
	{"read", `{"path": "calc.py", "offset": 1, "limit": 1}`},
	{"bash", `{"command": "printf '\\x00\\x01binary' > bin.dat"}`},
	{"read", `{"path": "new/bin.dat"}`},
	{"read", `{"path": "missing.txt"}`},
	{"bash", `{"command": "rm list.txt"}`},
	{"edit", `{"path": "new/list.txt", "oldText": "uno", "newText": "one"}`},
}

// durations are the parts of a result that differ run to run.
var durations = regexp.MustCompile(`Duration: [0-9.]+(ms|s|µs)`)

func runCalls(t *testing.T, cfg corral.Config) []string {
	t.Helper()
	begin := time.Now()
	s, err := corral.Open(context.Background(), cfg)
	t.Logf("open: %v", time.Since(begin).Round(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var out []string
	for _, c := range backendCalls {
		begin := time.Now()
		res, err := s.Call(context.Background(), c.tool, json.RawMessage(c.args))
		t.Logf("%s %s: %v", c.tool, c.args, time.Since(begin).Round(time.Millisecond))
		if err != nil {
			t.Fatalf("%s %s: %v", c.tool, c.args, err)
		}
		b, _ := json.Marshal(struct {
			Content string
			IsError bool
		}{durations.ReplaceAllString(res.Content, "Duration: X"), res.IsError})
		out = append(out, string(b))
	}
	return out
}

// TestBackendsBehaveAlike runs the same calls on a Kubernetes pod and on a
// Docker container over the same workspace path and compares what the model
// sees.
func TestBackendsBehaveAlike(t *testing.T) {
	testenv.NeedsDocker(t)
	testenv.NeedsKube(t)
	b, err := kube.New(kube.Options{AgentImage: testenv.KubeAgentImage(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", t.TempDir())
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "calc.py"), []byte("def add(a, b):\n    return a - b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Kubernetes first: its workspace is a copy in the pod; Docker then
	// works on the directory itself.
	kcfg := corral.Config{Workspace: ws, Backend: b, Sandbox: sandbox.Config{Image: testenv.Image}}
	onKube := runCalls(t, kcfg)
	dcfg := corral.Config{Workspace: ws, Backend: docker.Backend, Sandbox: sandbox.Config{Agent: testenv.Agent(t), Image: testenv.Image}}
	onDocker := runCalls(t, dcfg)
	for i := range backendCalls {
		if onKube[i] != onDocker[i] {
			t.Errorf("%s %s:\n kubernetes: %s\n docker:     %s", backendCalls[i].tool, backendCalls[i].args, onKube[i], onDocker[i])
		}
	}
}
