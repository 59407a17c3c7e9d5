package main

import (
	"context"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/corralhq/corral/egress"
)

func TestAskHost(t *testing.T) {
	req := egress.Request{Host: "evil.example", Port: 443}
	for answer, want := range map[string]egress.Answer{"y\n": egress.AllowSession, "once\n": egress.AllowOnce, "n\n": egress.Deny, "": egress.Deny} {
		var out strings.Builder
		got, err := askHost(context.Background(), strings.NewReader(answer), &out, req)
		if err != nil || got != want || !strings.Contains(out.String(), "evil.example:443") {
			t.Errorf("answer %q: %v, %v; asked %q", answer, got, err, out.String())
		}
	}
}

func TestNetworkFlags(t *testing.T) {
	ws := t.TempDir()
	for _, c := range []struct {
		args []string
		err  string
	}{
		{[]string{"--allow-host", "example.com"}, "need --network allow"},
		{[]string{"--network", "allow", "--allow-host", "exa mple.com"}, "bad network pattern"},
		{[]string{"--network", "allow", "--allow-preset", "cobol"}, "no preset"},
		{[]string{"--network", "allow", "--allow-preset", "python", "--add-host", "pypi.org:127.0.0.1"}, ""},
	} {
		var f sessionFlags
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		f.register(fs)
		if err := fs.Parse(append([]string{"-w", ws}, c.args...)); err != nil {
			t.Fatal(err)
		}
		cfg, err := f.config(nil)
		if c.err == "" {
			if err != nil || cfg.Egress == nil || cfg.Sandbox.Network != "none" {
				t.Errorf("%v: %v, %+v", c.args, err, cfg.Egress)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%v: %v, want %q", c.args, err, c.err)
		}
	}
}
