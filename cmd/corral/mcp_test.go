package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/corralhq/corral/internal/testenv"
)

// mcpClient starts `corral mcp` with args as a subprocess and connects the SDK's
// own client to it over stdio.
func mcpClient(t *testing.T, opts *mcp.ClientOptions, args ...string) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	cmd := exec.Command("corral", append([]string{"mcp"}, args...)...)
	cmd.Stderr = &testWriter{t: t, prefix: "corral mcp: "}
	c := mcp.NewClient(&mcp.Implementation{Name: "corral-test", Version: "v0"}, opts)
	cs, err := c.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connecting to corral mcp: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// testWriter logs what a subprocess writes, for failing tests.
type testWriter struct {
	t      *testing.T
	prefix string
	mu     sync.Mutex
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.t.Logf("%s%s", w.prefix, strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func callTool(t *testing.T, cs *mcp.ClientSession, name string, args any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s %v: %v", name, args, err)
	}
	return res
}

func resultText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func TestMCPListTools(t *testing.T) {
	ws := t.TempDir()
	cs := mcpClient(t, nil, "--workspace", ws)
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"read":  {"path"},
		"edit":  {"path", "oldText", "newText"},
		"write": {"path", "content"},
		"bash":  {"command"},
	}
	if len(res.Tools) != len(want) {
		t.Errorf("%d tools, want %d", len(res.Tools), len(want))
	}
	for _, tool := range res.Tools {
		req, ok := want[tool.Name]
		if !ok {
			t.Errorf("unexpected tool %q", tool.Name)
			continue
		}
		if len(tool.Description) < 100 {
			t.Errorf("%s: description %q is too short to teach the model the rules", tool.Name, tool.Description)
		}
		schema, _ := json.Marshal(tool.InputSchema)
		var s struct {
			Required   []string                  `json:"required"`
			Properties map[string]map[string]any `json:"properties"`
		}
		if err := json.Unmarshal(schema, &s); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(s.Required) != fmt.Sprint(req) {
			t.Errorf("%s: required = %v, want %v", tool.Name, s.Required, req)
		}
		for name, p := range s.Properties {
			if d, _ := p["description"].(string); d == "" {
				t.Errorf("%s: argument %s has no description", tool.Name, name)
			}
		}
	}
}

func TestMCPFileTools(t *testing.T) {
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("one\ntwo\nthree\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cs := mcpClient(t, nil, "--workspace", ws)

	// edit before read: a correctable error, flagged isError.
	res := callTool(t, cs, "edit", map[string]any{"path": "a.txt", "oldText": "two", "newText": "2"})
	if !res.IsError || !strings.Contains(resultText(res), "has not been read in this session") {
		t.Fatalf("edit before read: isError=%v %q", res.IsError, resultText(res))
	}
	res = callTool(t, cs, "read", map[string]any{"path": "a.txt"})
	if res.IsError || !strings.Contains(resultText(res), "2\ttwo") {
		t.Fatalf("read: isError=%v %q", res.IsError, resultText(res))
	}
	res = callTool(t, cs, "edit", map[string]any{"path": "a.txt", "oldText": "two", "newText": "2"})
	if res.IsError {
		t.Fatalf("edit: %q", resultText(res))
	}
	if !strings.HasPrefix(resultText(res), "Edited a.txt") {
		t.Errorf("edit result = %q, want the one-line summary", resultText(res))
	}
	// The diff is for the UI: structured content, not the model's text.
	details, _ := json.Marshal(res.StructuredContent)
	if !strings.Contains(string(details), `-two`) || !strings.Contains(string(details), `+2`) {
		t.Errorf("structured content has no diff: %s", details)
	}
	if strings.Contains(resultText(res), "-two") {
		t.Errorf("the model's text carries the diff: %q", resultText(res))
	}
	res = callTool(t, cs, "write", map[string]any{"path": "dir/new.txt", "content": "hello\n"})
	if res.IsError || !strings.HasPrefix(resultText(res), "Created dir/new.txt") {
		t.Errorf("write: isError=%v %q", res.IsError, resultText(res))
	}
	got, _ := os.ReadFile(filepath.Join(ws, "a.txt"))
	if string(got) != "one\n2\nthree\n" {
		t.Errorf("a.txt = %q", got)
	}
	// Arguments that do not fit the schema are the model's to correct.
	res = callTool(t, cs, "read", map[string]any{"path": 5})
	if !res.IsError {
		t.Errorf("read with a numeric path: not an error: %q", resultText(res))
	}
}

// TestMCPConcurrentEdits: 50 edits to one file from one client, at once, all land.
func TestMCPConcurrentEdits(t *testing.T) {
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "f.txt"), []byte("START\nEND\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cs := mcpClient(t, nil, "--workspace", ws)
	callTool(t, cs, "read", map[string]any{"path": "f.txt"})
	const n = 50
	var wg sync.WaitGroup
	errs := make(chan string, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "edit", Arguments: map[string]any{
				"path": "f.txt", "oldText": "END\n", "newText": fmt.Sprintf("line %d\nEND\n", i),
			}})
			if err != nil {
				errs <- err.Error()
			} else if res.IsError {
				errs <- resultText(res)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Errorf("edit failed: %s", e)
	}
	got, _ := os.ReadFile(filepath.Join(ws, "f.txt"))
	for i := range n {
		if !strings.Contains(string(got), fmt.Sprintf("line %d\n", i)) {
			t.Errorf("line %d was lost", i)
		}
	}
	if lines := strings.Count(string(got), "\n"); lines != n+2 {
		t.Errorf("f.txt has %d lines, want %d", lines, n+2)
	}
}

func TestMCPHTTPNeedsTokenBeyondLoopback(t *testing.T) {
	out, err := exec.Command("corral", "mcp", "--workspace", t.TempDir(), "--http", "0.0.0.0:0").CombinedOutput()
	if err == nil {
		t.Fatalf("corral mcp --http 0.0.0.0:0 without a token started: %s", out)
	}
	if !strings.Contains(string(out), "--auth-token") {
		t.Errorf("error does not say how to fix it: %s", out)
	}
}

// startHTTP starts `corral mcp --http` and returns its URL.
func startHTTP(t *testing.T, args ...string) string {
	t.Helper()
	url, _ := startHTTPCmd(t, nil, args...)
	return url
}

// startHTTPCmd is startHTTP with extra environment variables; it also returns
// the process, which the test may interrupt itself.
func startHTTPCmd(t *testing.T, env []string, args ...string) (string, *exec.Cmd) {
	t.Helper()
	cmd := exec.Command("corral", append([]string{"mcp", "--http", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			t.Errorf("corral mcp --http did not exit after SIGINT")
		}
	})
	sc := bufio.NewScanner(stderr)
	re := regexp.MustCompile(`at (http://\S+)`)
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			go func() {
				for sc.Scan() {
					t.Logf("corral mcp: %s", sc.Text())
				}
			}()
			return m[1], cmd
		}
		t.Logf("corral mcp: %s", sc.Text())
	}
	t.Fatal("corral mcp --http exited without serving")
	return "", nil
}

// TestMCPHTTPLeavesNothing: a server interrupted right after a client ended its
// session still removes that session's sandbox and log directory.
func TestMCPHTTPLeavesNothing(t *testing.T) {
	needsDocker(t)
	tmp, state, ws := t.TempDir(), t.TempDir(), t.TempDir()
	url, cmd := startHTTPCmd(t, []string{"TMPDIR=" + tmp, "XDG_STATE_HOME=" + state}, "--workspace", ws)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "corral-test", Version: "v0"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res := callTool(t, cs, "bash", map[string]any{"command": "cat /etc/hostname"})
	_, host, _ := strings.Cut(resultText(res), "\n\n")
	cs.Close()
	cmd.Process.Signal(os.Interrupt)
	cmd.Wait()
	if ents, _ := os.ReadDir(tmp); len(ents) > 0 {
		t.Errorf("left in the temporary directory: %v", ents)
	}
	// The session's command logs and shadows live in the state directory
	// while it runs, and go with it.
	for _, sub := range []string{"logs", "shadows"} {
		if ents, _ := os.ReadDir(filepath.Join(state, "corral", sub)); len(ents) > 0 {
			t.Errorf("left in the state directory's %s: %v", sub, ents)
		}
	}
	if out, _ := exec.Command("docker", "ps", "-aq", "--filter", "id="+strings.TrimSpace(host)).Output(); len(out) > 0 {
		t.Errorf("sandbox %s left behind", host)
	}
}

type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

func TestMCPHTTP(t *testing.T) {
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("alpha\n"), 0o644)
	url := startHTTP(t, "--workspace", ws, "--auth-token", "s3cret")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// Without the token: refused.
	resp, err := http.Post(url, "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("no token: status %d, want 401", resp.StatusCode)
	}

	c := mcp.NewClient(&mcp.Implementation{Name: "corral-test", Version: "v0"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearerTransport{"s3cret"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res := callTool(t, cs, "read", map[string]any{"path": "a.txt"})
	if res.IsError || !strings.Contains(resultText(res), "1\talpha") {
		t.Fatalf("read over HTTP: %q", resultText(res))
	}
	res = callTool(t, cs, "edit", map[string]any{"path": "a.txt", "oldText": "alpha", "newText": "beta"})
	if res.IsError {
		t.Fatalf("edit over HTTP: %q", resultText(res))
	}
	got, _ := os.ReadFile(filepath.Join(ws, "a.txt"))
	if string(got) != "beta\n" {
		t.Errorf("a.txt = %q", got)
	}
}

// TestMCPBashElicitation: corral mcp puts an approval to a client that can
// elicit, and a decision it gets runs the command or refuses it; rule adds
// to --policy's file; a client that cannot elicit gets --confirm. Every
// other answer a client can give is tested in process, in package mcp
// (TestApprovalAcceptedByElicitation, TestApprovalRefusedByElicitation).
func TestMCPBashElicitation(t *testing.T) {
	needsDocker(t)
	type answer struct {
		action  string
		content map[string]any
	}
	for _, tt := range []struct {
		name    string
		answers []answer
		// commands are run in turn; asks is how many elicitations they make.
		commands []string
		asks     int
		ran      []bool
		says     string
	}{
		{"once", []answer{{"accept", map[string]any{"decision": "once"}}, {"accept", map[string]any{"decision": "once"}}}, []string{"git push origin main", "git push origin main"}, 2, []bool{true, true}, ""},
		{"decline", []answer{{"decline", nil}}, []string{"git push origin main"}, 1, []bool{false}, "declined"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var asked []*mcp.ElicitParams
			var mu sync.Mutex
			cs := mcpClient(t, &mcp.ClientOptions{
				ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					mu.Lock()
					defer mu.Unlock()
					asked = append(asked, req.Params)
					a := tt.answers[min(len(asked), len(tt.answers))-1]
					return &mcp.ElicitResult{Action: a.action, Content: a.content}, nil
				},
			}, "--workspace", t.TempDir())
			for i, cmd := range tt.commands {
				res := callTool(t, cs, "bash", map[string]any{"command": cmd})
				text := resultText(res)
				if ran := strings.Contains(text, "Exit code:"); ran != tt.ran[i] {
					t.Errorf("command %d: ran=%v, want %v: %q", i, ran, tt.ran[i], text)
				}
				if !tt.ran[i] && (!res.IsError || !strings.Contains(text, tt.says)) {
					t.Errorf("command %d: isError=%v, want the text to say %q: %q", i, res.IsError, tt.says, text)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if len(asked) != tt.asks {
				t.Fatalf("%d elicitations, want %d", len(asked), tt.asks)
			}
			p := asked[0]
			for _, w := range []string{"git push origin main", "needs approval: git push origin main", "rule it would add: allow git push origin main", "--policy FILE"} {
				if !strings.Contains(p.Message, w) {
					t.Errorf("the elicitation lacks %q:\n%s", w, p.Message)
				}
			}
			schema, _ := json.Marshal(p.RequestedSchema)
			if !strings.Contains(string(schema), `"enum":["once","session","deny","abort"]`) || !strings.Contains(string(schema), `"reason"`) {
				t.Errorf("schema %s", schema)
			}
		})
	}
	t.Run("rule", func(t *testing.T) {
		rules := filepath.Join(t.TempDir(), "rules.toml")
		if err := os.WriteFile(rules, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		var schemas []string
		cs := mcpClient(t, &mcp.ClientOptions{
			ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				b, _ := json.Marshal(req.Params.RequestedSchema)
				schemas = append(schemas, string(b))
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "rule"}}, nil
			},
		}, "--workspace", t.TempDir(), "--policy", rules)
		for range 2 {
			if res := callTool(t, cs, "bash", map[string]any{"command": "git push origin main"}); !strings.Contains(resultText(res), "Exit code:") {
				t.Errorf("rule: %q", resultText(res))
			}
		}
		if len(schemas) != 1 || !strings.Contains(schemas[0], `"enum":["once","session","rule","deny","abort"]`) {
			t.Errorf("schemas %q", schemas)
		}
		b, _ := os.ReadFile(rules)
		if !strings.Contains(string(b), "match    = \"git push origin main\"") {
			t.Errorf("the policy file:\n%s", b)
		}
	})
	t.Run("no elicitation support", func(t *testing.T) {
		cs := mcpClient(t, nil, "--workspace", t.TempDir())
		res := callTool(t, cs, "bash", map[string]any{"command": "git push origin main"})
		if !res.IsError || !strings.Contains(resultText(res), "needs the user's approval") {
			t.Errorf("without elicitation and --confirm=deny: %q", resultText(res))
		}
		cs = mcpClient(t, nil, "--workspace", t.TempDir(), "--confirm", "allow")
		res = callTool(t, cs, "bash", map[string]any{"command": "git push origin main"})
		if !strings.Contains(resultText(res), "Exit code:") {
			t.Errorf("without elicitation and --confirm=allow: %q", resultText(res))
		}
	})
}

func TestMCPBashProgressAndCancel(t *testing.T) {
	needsDocker(t)
	progress := make(chan *mcp.ProgressNotificationParams, 100)
	ws := t.TempDir()
	cs := mcpClient(t, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			progress <- req.Params
		},
	}, "--workspace", ws)

	params := &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{
		"command": "for i in 1 2 3; do echo tick $i; sleep 0.4; done",
	}}
	params.SetProgressToken("tok-1")
	res, err := cs.CallTool(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(resultText(res), "tick 3") {
		t.Fatalf("result = %q", resultText(res))
	}
	var msgs []string
	var last float64
collect:
	for {
		select {
		case p := <-progress:
			if p.ProgressToken != "tok-1" {
				t.Errorf("progress token %v, want tok-1", p.ProgressToken)
			}
			if p.Progress <= last {
				t.Errorf("progress went from %v to %v: it must increase", last, p.Progress)
			}
			last = p.Progress
			msgs = append(msgs, p.Message)
		default:
			break collect
		}
	}
	all := strings.Join(msgs, "\n")
	if len(msgs) < 2 || !strings.Contains(all, "tick 1") || !strings.Contains(all, "tick 3") {
		t.Errorf("progress messages = %q, want the output as it arrived, in several notifications", msgs)
	}

	// Cancelling the call kills the command: the marker file never appears.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{
			"command": "sleep 3; touch survived",
		}})
		done <- err
	}()
	time.Sleep(time.Second)
	cancel()
	select {
	case err := <-done:
		if err == nil {
			t.Errorf("cancelled call returned no error")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("cancelled call did not return")
	}
	time.Sleep(4 * time.Second)
	if _, err := os.Stat(filepath.Join(ws, "survived")); err == nil {
		t.Errorf("the command ran on after its call was cancelled")
	}
	// The session still works.
	res = callTool(t, cs, "bash", map[string]any{"command": "echo still here"})
	if !strings.Contains(resultText(res), "still here") {
		t.Errorf("after a cancel: %q", resultText(res))
	}
}

// TestMCPTwoClients: each client gets its own sandbox container, removed when it
// goes away.
func TestMCPTwoClients(t *testing.T) {
	needsDocker(t)
	ws := t.TempDir()
	hostnames := make([]string, 2)
	var clients []*mcp.ClientSession
	for i := range 2 {
		cs := mcpClient(t, nil, "--workspace", ws)
		clients = append(clients, cs)
		res := callTool(t, cs, "bash", map[string]any{"command": "cat /etc/hostname"})
		_, body, _ := strings.Cut(resultText(res), "\n\n")
		hostnames[i] = strings.TrimSpace(body)
	}
	if hostnames[0] == "" || hostnames[0] == hostnames[1] {
		t.Errorf("containers' hostnames = %q, want two different containers", hostnames)
	}
	for _, cs := range clients {
		cs.Close()
	}
	// Once the clients are gone, their containers go too.
	testenv.WaitFor(t, time.Minute, fmt.Sprintf("containers %v gone after their clients left", hostnames), func() bool {
		for _, h := range hostnames {
			out, _ := exec.Command("docker", "ps", "-q", "--filter", "id="+h).Output()
			if strings.TrimSpace(string(out)) != "" {
				return false
			}
		}
		return true
	})
}

// TestMCPHTTPSessionContainer: over HTTP, each MCP session has its own sandbox,
// removed when the client ends the session.
func TestMCPHTTPSessionContainer(t *testing.T) {
	needsDocker(t)
	events := filepath.Join(t.TempDir(), "events.jsonl")
	url := startHTTP(t, "--workspace", t.TempDir(), "--events", events)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var hosts []string
	var sessions []*mcp.ClientSession
	for range 2 {
		c := mcp.NewClient(&mcp.Implementation{Name: "corral-test", Version: "v0"}, nil)
		cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, nil)
		if err != nil {
			t.Fatal(err)
		}
		sessions = append(sessions, cs)
		res := callTool(t, cs, "bash", map[string]any{"command": "cat /etc/hostname"})
		_, body, _ := strings.Cut(resultText(res), "\n\n")
		hosts = append(hosts, strings.TrimSpace(body))
	}
	if hosts[0] == "" || hosts[0] == hosts[1] {
		t.Fatalf("hostnames %q: want two sandboxes", hosts)
	}
	sessions[0].Close()
	testenv.WaitFor(t, time.Minute, "sandbox "+hosts[0]+" removed after its session ended", func() bool {
		out, _ := exec.Command("docker", "ps", "-aq", "--filter", "id="+hosts[0]).Output()
		return strings.TrimSpace(string(out)) == ""
	})
	// The other session is untouched.
	res := callTool(t, sessions[1], "bash", map[string]any{"command": "cat /etc/hostname"})
	if !strings.HasSuffix(resultText(res), hosts[1]) {
		t.Errorf("second session after the first ended: %q", resultText(res))
	}
	sessions[1].Close()
	// Both sessions wrote their events to the one --events file, whole lines.
	data, err := os.ReadFile(events)
	if err != nil {
		t.Fatal(err)
	}
	ends := 0
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var e struct{ Type string }
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("events line %q: %v", line, err)
		}
		if e.Type == "call_end" {
			ends++
		}
	}
	if ends != 3 {
		t.Errorf("%d call_end events, want 3 (two sessions)", ends)
	}
}

// readResource reads one resource's text.
func readResource(t *testing.T, cs *mcp.ClientSession, uri string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, c := range res.Contents {
		b.WriteString(c.Text)
	}
	return b.String(), nil
}

// TestMCPCheckpointResources: the session's checkpoints and what changed
// since each are resources the client reads; another session's are not
// listed nor readable, and there is no tool to restore one.
func TestMCPCheckpointResources(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("one\ntwo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cs := mcpClient(t, nil, "--workspace", ws)
	ctx := context.Background()
	list, err := cs.ListResources(ctx, nil)
	if err != nil || len(list.Resources) != 1 || list.Resources[0].URI != "corral://checkpoints" {
		t.Fatalf("resources: %+v %v", list, err)
	}
	tmpl, err := cs.ListResourceTemplates(ctx, nil)
	if err != nil || len(tmpl.ResourceTemplates) != 1 || tmpl.ResourceTemplates[0].URITemplate != "corral://checkpoints/{id}/diff" {
		t.Fatalf("templates: %+v %v", tmpl, err)
	}
	text, err := readResource(t, cs, "corral://checkpoints")
	if err != nil || !strings.Contains(text, "no checkpoint yet") {
		t.Fatalf("before any call: %q %v", text, err)
	}
	callTool(t, cs, "read", map[string]any{"path": "a.txt"})
	if res := callTool(t, cs, "edit", map[string]any{"path": "a.txt", "oldText": "one", "newText": "uno"}); res.IsError {
		t.Fatal(resultText(res))
	}
	callTool(t, cs, "write", map[string]any{"path": "b.txt", "content": "new\n"})
	text, err = readResource(t, cs, "corral://checkpoints")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^1 +\S+ +mcp-\d+ +edit +a\.txt +1 file\(s\) \+1 -1: M a\.txt$`),
		regexp.MustCompile(`(?m)^2 +\S+ +mcp-\d+ +write +b\.txt +1 file\(s\) \+1 -0: A b\.txt$`),
	} {
		if !want.MatchString(text) {
			t.Errorf("checkpoints lack %v:\n%s", want, text)
		}
	}
	diff, err := readResource(t, cs, "corral://checkpoints/1/diff")
	if err != nil || !strings.Contains(diff, "-one\n+uno\n") || !strings.Contains(diff, "+new\n") {
		t.Errorf("diff since 1: %q %v", diff, err)
	}
	if _, err := readResource(t, cs, "corral://checkpoints/99/diff"); err == nil {
		t.Error("a checkpoint the session does not have was read")
	}
	// Another client: a session of its own, which does not see the first's.
	other := mcpClient(t, nil, "--workspace", ws)
	callTool(t, other, "read", map[string]any{"path": "a.txt"})
	callTool(t, other, "write", map[string]any{"path": "a.txt", "content": "other\n"})
	if _, err := readResource(t, other, "corral://checkpoints/1/diff"); err == nil {
		t.Error("another session's checkpoint was read")
	}
	// Reading, never restoring.
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools.Tools {
		if strings.Contains(tool.Name, "restore") || strings.Contains(tool.Name, "checkpoint") {
			t.Errorf("a tool %q", tool.Name)
		}
	}
}

// TestMCPIsolated: with --isolate each client works on its own copy; the
// user's tree is untouched, the model is told so, and the session's changes
// are a resource.
func TestMCPIsolated(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cs := mcpClient(t, nil, "--workspace", ws, "--isolate")
	if ins := cs.InitializeResult().Instructions; !strings.Contains(ins, "private copy of the workspace") {
		t.Errorf("instructions: %q", ins)
	}
	res := callTool(t, cs, "read", map[string]any{"path": filepath.Join(ws, "a.txt")})
	if !strings.Contains(resultText(res), "[corral: this session works on a private copy") {
		t.Errorf("first result: %s", resultText(res))
	}
	callTool(t, cs, "edit", map[string]any{"path": "a.txt", "oldText": "one", "newText": "uno"})
	if b, _ := os.ReadFile(filepath.Join(ws, "a.txt")); string(b) != "one\n" {
		t.Errorf("the user's file changed: %q", b)
	}
	diff, err := readResource(t, cs, "corral://isolated/diff")
	if err != nil || !strings.Contains(diff, "-one\n+uno\n") {
		t.Errorf("isolated diff: %q %v", diff, err)
	}
	text, err := readResource(t, cs, "corral://checkpoints")
	if err != nil || !regexp.MustCompile(`(?m)^2 +\S+ +mcp-\d+ +edit +a\.txt +1 file\(s\) \+1 -1: M a\.txt$`).MatchString(text) {
		t.Errorf("checkpoints of the copy: %q %v", text, err)
	}
}
