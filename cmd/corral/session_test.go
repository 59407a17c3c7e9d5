package main

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

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
