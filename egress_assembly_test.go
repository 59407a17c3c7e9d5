package corral_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/corralhq/corral"
	"github.com/corralhq/corral/egress"
	"github.com/corralhq/corral/internal/testenv"
	"github.com/corralhq/corral/tools"
)

// --network allow through the assembly: the policy file's [network] table
// allows a host, a command reaches it, another is blocked and named in the
// result, and every decision is a network event with its call id.
func TestEgressThroughTheAssembly(t *testing.T) {
	testenv.NeedsDocker(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "hello from the allowed host")
	}))
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	cfg := sandboxed(t)
	rules := filepath.Join(t.TempDir(), "rules.toml")
	if err := os.WriteFile(rules, []byte("[network]\nallow = [\"allowed.test:*\"]\ndeny = [\"evil.test\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg.PolicyFile = rules
	cfg.Egress = &egress.Config{Hosts: []string{"allowed.test:127.0.0.1", "evil.test:127.0.0.1"}}
	var mu sync.Mutex
	var events []tools.Event
	cfg.Events = tools.EventFunc(func(e tools.Event) {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
	})
	s, err := corral.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// python3, not curl: the default policy asks before a download.
	script := fmt.Sprintf("import urllib.request\nprint(urllib.request.urlopen('http://allowed.test:%d/').read().decode())\ntry:\n    urllib.request.urlopen('http://evil.test:%d/')\nexcept Exception as e:\n    print('refused', e)\n", port, port)
	if r, err := s.Call(context.Background(), "write", mustJSON(t, map[string]string{"path": "fetch.py", "content": script})); err != nil || r.IsError {
		t.Fatalf("write: %v %+v", err, r)
	}
	r, err := s.Call(context.Background(), "bash", mustJSON(t, map[string]string{"command": "python3 fetch.py"}))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"hello from the allowed host", "refused HTTP Error 403", fmt.Sprintf("Network: blocked evil.test:%d (denied by evil.test)", port)} {
		if !strings.Contains(r.Content, want) {
			t.Errorf("the result lacks %q:\n%s", want, r.Content)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	verdicts := map[string]string{}
	for _, e := range events {
		if e.Type == tools.EventNetwork && e.Network != nil && e.CallID != "" {
			verdicts[e.Network.Host] = e.Network.Verdict
		}
	}
	if verdicts["allowed.test"] != egress.Allowed || verdicts["evil.test"] != egress.Denied {
		t.Errorf("network events: %v", verdicts)
	}
}

func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
