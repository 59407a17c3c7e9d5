package tools

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/corralhq/corral/egress"
	"github.com/corralhq/corral/sandbox"
)

// blockingExec stands for a sandbox whose command was refused a connection by
// the egress proxy while it ran.
type blockingExec struct{ calls *egress.Calls }

func (b blockingExec) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	for i := 0; i < 2; i++ { // the same refusal twice is said once
		b.calls.Observe(egress.Record{CallID: b.calls.Current(), Host: "evil.example", Port: 443, Verdict: egress.Denied, Reason: "not in the allowlist"})
	}
	req.Output.Write([]byte("curl: (56) CONNECT tunnel failed, response 403\n"))
	return sandbox.ExecResult{ExitCode: 56}, nil
}

func TestBashNamesWhatTheNetworkBlocked(t *testing.T) {
	calls := &egress.Calls{}
	s, err := NewSession(context.Background(), Options{Workspace: t.TempDir(), Sandbox: blockingExec{calls}, Network: calls})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r, err := s.Call(context.Background(), "bash", json.RawMessage(`{"command":"python3 fetch.py"}`))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(r.Content, "Network: blocked evil.example:443 (not in the allowlist)\n"); n != 1 {
		t.Fatalf("the header names the block %d times:\n%s", n, r.Content)
	}
	if det := r.Details.(*BashDetails); len(det.NetworkBlocked) != 1 {
		t.Fatalf("details: %v", det.NetworkBlocked)
	}
	if calls.Current() != "" {
		t.Fatal("the call is still running after its result")
	}
}
