package kube_test

import (
	"context"
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/testenv"
	"github.com/corralhq/corral/sandbox"
	"github.com/corralhq/corral/sandbox/kube"
)

// A pod carries the owner's labels, so ps lists it with its owner alive,
// and gc deletes the pods of a corral that is gone, and only those; the
// NetworkPolicy that denies a pod without a network all traffic selects it.
func TestListGCAndNetworkPolicy(t *testing.T) {
	b := backend(t, kube.Options{})
	p := newPod(t, b, sandbox.Config{})
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	infos, err := b.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(infos, func(in sandbox.Info) bool { return in.Name == p.Name() })
	if i < 0 || !infos[i].Local || !infos[i].OwnerAlive || infos[i].Session != p.Session() || infos[i].Workspace != p.Workspace() || infos[i].Image != testenv.Image {
		t.Fatalf("ps: %+v", infos)
	}
	// The policy exists and selects the pod.
	out, err := exec.Command(testenv.Kubectl(), "-n", b.Namespace(), "get", "networkpolicy", "corral-sandbox-deny-all", "-o", "json").Output()
	if err != nil {
		t.Fatal(err)
	}
	var np struct {
		Spec struct {
			PodSelector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"podSelector"`
			PolicyTypes []string `json:"policyTypes"`
			Egress      []any    `json:"egress"`
			Ingress     []any    `json:"ingress"`
		} `json:"spec"`
	}
	json.Unmarshal(out, &np)
	if np.Spec.PodSelector.MatchLabels["corral.network"] != "none" || len(np.Spec.PolicyTypes) != 2 || len(np.Spec.Egress)+len(np.Spec.Ingress) != 0 {
		t.Errorf("network policy: %s", out)
	}
	sel, err := exec.Command(testenv.Kubectl(), "-n", b.Namespace(), "get", "pods", "-l", "corral.network=none", "-o", "name").Output()
	if err != nil || !strings.Contains(string(sel), p.Name()) {
		t.Errorf("the policy does not select the pod: %s %v", sel, err)
	}
	// A pod whose owner is gone: this host's labels, a dead pid.
	dead := "corral-gc-test-" + p.Session()
	labels := map[string]string{}
	for k, v := range sandbox.OwnerLabels("gc-"+p.Session(), "/x") {
		if k != sandbox.LabelWorkspace && k != sandbox.LabelCreated {
			labels[k] = v
		}
	}
	labels[sandbox.LabelPID] = "999999999"
	labels[sandbox.LabelPIDStart] = "1"
	var args []string
	for k, v := range labels {
		args = append(args, k+"="+v)
	}
	kubectl(t, "-n", b.Namespace(), "run", dead, "--image=localhost/corral-pause:1", "--image-pull-policy=Never", "--restart=Never", "--labels="+strings.Join(args, ","))
	t.Cleanup(func() {
		exec.Command(testenv.Kubectl(), "-n", b.Namespace(), "delete", "pod", dead, "--grace-period=0", "--force").Run()
	})
	removed, err := b.GC(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(removed, dead) || slices.Contains(removed, p.Name()) {
		t.Errorf("gc removed %v; want %s and not the live %s", removed, dead, p.Name())
	}
}
