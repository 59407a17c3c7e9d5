package kube_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/corralhq/corral/sandbox"
	"github.com/corralhq/corral/sandbox/kube"
)

// A cluster that serves no agent-sandbox CRDs: an API server whose discovery
// knows no extensions.agents.x-k8s.io (the test cluster has them, so this
// one is a stand-in that answers 404 to every request).
func TestWarmPoolWithoutCRDs(t *testing.T) {
	var asked []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked = append(asked, r.Method+" "+r.URL.Path)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`))
	}))
	defer srv.Close()
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "`+srv.URL+`"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600)
	b, err := kube.New(kube.Options{Kubeconfig: kc, WarmPool: "pool"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := b.NewPod(sandbox.Config{Workspace: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	if err := p.Start(context.Background()); !errors.Is(err, kube.ErrNoWarmPools) {
		t.Errorf("--warm-pool on a cluster without agent-sandbox: %v (requests %v)", err, asked)
	}
}
