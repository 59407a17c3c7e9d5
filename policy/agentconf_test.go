package policy

import (
	"testing"

	"github.com/corralhq/corral/internal/agentconf"
)

// TestAgentConfigAnyDepth: a command that writes any entry of the shared list
// of agent configuration, at the root or in a package, needs approval, by
// the rule named for it.
func TestAgentConfigAnyDepth(t *testing.T) {
	for _, e := range agentconf.Entries {
		for _, dir := range []string{"", "sub/", "a/b/"} {
			cmd := "echo x > " + dir + e.Path
			if v := Classify(cmd); v.Decision != Confirm || v.Rule != "default:write-agent-config" {
				t.Errorf("%s: %s %s (%s)", cmd, v.Decision, v.Rule, v.Reason)
			}
		}
	}
	for _, cmd := range []string{
		"echo x > sub/.claude/settings.json",
		"echo x > sub/.devcontainer/Dockerfile", // dev containers build it on the host
		"rm -rf pkg/.vscode",                    // holds tasks.json
	} {
		if v := Classify(cmd); v.Decision != Confirm {
			t.Errorf("%s: %s %s (%s)", cmd, v.Decision, v.Rule, v.Reason)
		}
	}
	for _, cmd := range []string{"echo x > sub/CLAUDE.md", "echo x > AGENTS.md", "echo x > .vscode/extensions.json"} {
		if v := Classify(cmd); v.Decision != Allow {
			t.Errorf("%s: %s %s (%s), want allow", cmd, v.Decision, v.Rule, v.Reason)
		}
	}
}
