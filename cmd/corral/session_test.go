package main

import (
	"context"
	"strings"
	"testing"

	"github.com/corralhq/corral/policy"
	"github.com/corralhq/corral/tools"
)

func TestAskYesNo(t *testing.T) {
	req := tools.ConfirmRequest{Command: "git push origin main", Verdict: policy.Verdict{Decision: policy.Confirm, Reason: "git push updates a remote repository", Rule: "default:git-push"}}
	for _, tt := range []struct {
		answer string
		want   bool
	}{
		{"y\n", true}, {"yes\n", true}, {"Y\n", true}, {"n\n", false}, {"\n", false}, {"", false}, {"sure\n", false},
	} {
		var out strings.Builder
		got, err := askYesNo(context.Background(), strings.NewReader(tt.answer), &out, req)
		if err != nil || got != tt.want {
			t.Errorf("answer %q: %v, %v; want %v", tt.answer, got, err, tt.want)
		}
		for _, w := range []string{"git push origin main", "updates a remote repository", "default:git-push", "[y/N]"} {
			if !strings.Contains(out.String(), w) {
				t.Errorf("the question %q lacks %q", out.String(), w)
			}
		}
	}
}
