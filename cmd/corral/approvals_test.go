package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// uiWriter logs what corral writes on stderr and hands over the address of
// its web view.
type uiWriter struct {
	testWriter
	once sync.Once
	addr chan string
}

var uiAddr = regexp.MustCompile(`web view at (http://127\.0\.0\.1:\d+)/`)

func (w *uiWriter) Write(p []byte) (int, error) {
	if m := uiAddr.FindSubmatch(p); m != nil {
		w.once.Do(func() { w.addr <- string(m[1]) })
	}
	return w.testWriter.Write(p)
}

// mcpClientUI is mcpClient for `corral mcp --ui 127.0.0.1:0`: it returns the
// web view's base URL too.
func mcpClientUI(t *testing.T, opts *mcp.ClientOptions, args ...string) (*mcp.ClientSession, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	stderr := &uiWriter{testWriter: testWriter{t: t, prefix: "corral mcp: "}, addr: make(chan string, 1)}
	cmd := exec.Command("corral", append([]string{"mcp", "--ui", "127.0.0.1:0"}, args...)...)
	cmd.Stderr = stderr
	c := mcp.NewClient(&mcp.Implementation{Name: "corral-test", Version: "v0"}, opts)
	cs, err := c.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connecting to corral mcp: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	select {
	case base := <-stderr.addr:
		return cs, base
	case <-ctx.Done():
		t.Fatal("corral mcp named no web view")
	}
	return nil, ""
}

type pendingApproval struct {
	ID, Session, Command string
	Choices              []string
	Network              *struct {
		Host string
		Port int
	}
}

func pendingApprovals(t *testing.T, base string) []pendingApproval {
	t.Helper()
	resp, err := http.Get(base + "/api/approvals")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list []pendingApproval
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	return list
}

// approvalEnd reads a session's events from the web view until an
// approval_end, and returns it.
func approvalEnd(t *testing.T, base, session string) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/api/sessions/"+session+"/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var e map[string]any
		if json.Unmarshal([]byte(data), &e) == nil && e["type"] == "approval_end" {
			return e
		}
	}
	t.Fatalf("no approval_end in the web view: %v", sc.Err())
	return nil
}

// With --ui, an MCP client that elicits and the web view are asked at once;
// the first answer wins and the other channel is withdrawn: the elicitation
// is cancelled, the web view shows who decided.
func TestMCPEveryChannelAsks(t *testing.T) {
	needsDocker(t)
	t.Run("the web view answers", func(t *testing.T) {
		asked := make(chan struct{}, 1)
		cancelled := make(chan error, 1)
		over := make(chan struct{}) // the test is over: let the handler go
		cs, base := mcpClientUI(t, &mcp.ClientOptions{
			ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				asked <- struct{}{}
				select { // a person who does not answer in the client
				case <-ctx.Done():
					cancelled <- ctx.Err()
					return nil, ctx.Err()
				case <-over:
					return nil, errors.New("the test is over")
				}
			},
		}, "--workspace", t.TempDir())
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(func() { close(over); cancel() }) // before the client closes
		done := make(chan *mcp.CallToolResult, 1)
		go func() {
			res, _ := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "git push origin main"}})
			done <- res
		}()
		select {
		case <-asked:
		case <-time.After(2 * time.Minute):
			t.Fatal("the client was not asked")
		}
		// The web view has the same approval, waiting.
		list := pendingApprovals(t, base)
		if len(list) != 1 || list[0].Command != "git push origin main" {
			t.Fatalf("the web view waits for %+v", list)
		}
		resp, err := http.Post(base+"/api/approvals/"+list[0].ID, "application/json", strings.NewReader(`{"decision": "once"}`))
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("answering in the web view: %v %v", err, resp.Status)
		}
		res := <-done
		if res == nil || !strings.Contains(resultText(res), "Exit code:") {
			t.Fatalf("the web view's once did not run it: %+v", res)
		}
		select {
		case <-cancelled:
		case <-time.After(2 * time.Minute):
			t.Error("the elicitation answered elsewhere was not cancelled")
		}
		if e := approvalEnd(t, base, list[0].Session); e["answer"].(map[string]any)["by"] != "web" {
			t.Errorf("approval_end %v", e)
		}
	})
	t.Run("the client answers", func(t *testing.T) {
		var base string
		var listed []pendingApproval
		cs, b := mcpClientUI(t, &mcp.ClientOptions{
			ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				listed = pendingApprovals(t, base) // the web view asks too
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "deny", "reason": "not main"}}, nil
			},
		}, "--workspace", t.TempDir())
		base = b
		res := callTool(t, cs, "bash", map[string]any{"command": "git push origin main"})
		if !res.IsError || !strings.Contains(resultText(res), "The user says: not main") {
			t.Errorf("the client's deny: %q", resultText(res))
		}
		if len(listed) != 1 {
			t.Fatalf("while the client was asked, the web view waited for %+v", listed)
		}
		if left := pendingApprovals(t, base); len(left) != 0 {
			t.Errorf("the web view still waits for %+v", left)
		}
		e := approvalEnd(t, base, listed[0].Session)
		if ans := e["answer"].(map[string]any); ans["by"] != "mcp" || ans["decision"] != "deny" {
			t.Errorf("approval_end %v", e)
		}
	})
}

// A host no network list names is put to an MCP client that elicits, with the
// decisions of a command's approval.
func TestMCPHostApproval(t *testing.T) {
	needsDocker(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from %s", r.Host)
	}))
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	ws, rules := t.TempDir(), filepath.Join(t.TempDir(), "rules.toml")
	if err := os.WriteFile(rules, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	script := "import sys, urllib.request\nfor url in sys.argv[1:]:\n    try:\n        print(urllib.request.urlopen(url, timeout=120).read().decode())\n    except Exception as e:\n        print('refused', url, e)\n"
	if err := os.WriteFile(filepath.Join(ws, "fetch.py"), []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var asked []*mcp.ElicitParams
	cs := mcpClient(t, &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			mu.Lock()
			defer mu.Unlock()
			asked = append(asked, req.Params)
			if strings.Contains(req.Params.Message, "wants to reach deny.test") {
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "deny", "reason": "use the mirror"}}, nil
			}
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "session"}}, nil
		},
	}, "--workspace", ws, "--policy", rules, "--network", "allow", "--add-host", "pkgs.test:127.0.0.1", "--add-host", "deny.test:127.0.0.1")
	url := func(host string) string { return fmt.Sprintf("http://%s.test:%d/", host, port) }
	res := callTool(t, cs, "bash", map[string]any{"command": "python3 fetch.py " + url("pkgs") + " " + url("pkgs") + " " + url("deny")})
	text := resultText(res)
	for _, w := range []string{"hello from pkgs.test", "refused " + url("deny"), fmt.Sprintf("Network: blocked deny.test:%d (denied by the user: use the mirror)", port)} {
		if !strings.Contains(text, w) {
			t.Errorf("the result lacks %q:\n%s", w, text)
		}
	}
	if n := strings.Count(text, "hello from pkgs.test"); n != 2 {
		t.Errorf("%d fetches, want 2", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 2 {
		t.Fatalf("%d elicitations, want one per host", len(asked))
	}
	p := asked[0]
	for _, w := range []string{fmt.Sprintf("wants to reach pkgs.test:%d", port), "while this command ran: python3 fetch.py", fmt.Sprintf(`[network] allow "pkgs.test:%d"`, port)} {
		if !strings.Contains(p.Message, w) {
			t.Errorf("the elicitation lacks %q:\n%s", w, p.Message)
		}
	}
	if schema, _ := json.Marshal(p.RequestedSchema); !strings.Contains(string(schema), `"enum":["once","session","rule","deny","abort"]`) {
		t.Errorf("schema %s", schema)
	}
}
