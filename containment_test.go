package corral

import (
	"testing"

	"github.com/corralhq/corral/checkpoint"
	"github.com/corralhq/corral/egress"
	"github.com/corralhq/corral/policy"
	"github.com/corralhq/corral/sandbox"
)

// TestContainmentOf: the policy of a session hears what contains its
// commands — the sandbox, its network, its checkpoints — so that it can
// allow what they make harmless or undoable.
func TestContainmentOf(t *testing.T) {
	cp := &checkpoint.Options{}
	for _, tc := range []struct {
		name string
		cfg  Config
		want policy.Containment
	}{
		{"default", Config{Checkpoints: cp}, policy.SessionContainment},
		{"no checkpoints", Config{}, policy.Containment{Sandbox: true, Network: policy.NetworkNone}},
		{"bridge", Config{Sandbox: sandbox.Config{Network: "bridge"}, Checkpoints: cp}, policy.Containment{Sandbox: true, Network: policy.NetworkBridge, Checkpoints: true}},
		{"allow", Config{Egress: &egress.Config{}, Checkpoints: cp}, policy.Containment{Sandbox: true, Network: policy.NetworkAllow, Checkpoints: true}},
	} {
		if got := containmentOf(tc.cfg); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
