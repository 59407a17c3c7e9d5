package main

import (
	"fmt"
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

// TestSecretFlags: --secret takes its value from corral's environment only,
// and refuses at start what would not work, saying what to do.
func TestSecretFlags(t *testing.T) {
	ws := t.TempDir()
	const value = "ghp_0123456789abcdefghijABCDEFGHIJ012345"
	t.Setenv("CORRAL_TEST_TOKEN", value)
	t.Setenv("CORRAL_TEST_EMPTY", "")
	allow := []string{"--network", "allow", "--allow-host", "api.example"}
	for _, c := range []struct {
		args []string
		err  string
	}{
		{[]string{"--secret", "CORRAL_TEST_TOKEN=api.example"}, "--secret needs --network allow"},
		{append(allow, "--secret", "CORRAL_TEST_UNSET=api.example"), "CORRAL_TEST_UNSET is not set in corral's environment; export CORRAL_TEST_UNSET=VALUE"},
		{append(allow, "--secret", "CORRAL_TEST_EMPTY=api.example"), "CORRAL_TEST_EMPTY is empty"},
		{append(allow, "--secret", "CORRAL_TEST_TOKEN"), "want NAME=HOST"},
		{append(allow, "--secret", "CORRAL_TEST_TOKEN=10.0.0.1"), "is an address"},
		{append(allow, "--secret", "CORRAL_TEST_TOKEN=api.example", "--secret", "CORRAL_TEST_TOKEN=up.example"), ""},
		{append(allow, "--secret", "CORRAL_TEST_TOKEN=api.example,gist.example"), ""},
	} {
		var f sessionFlags
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		f.register(fs)
		if err := fs.Parse(append([]string{"-w", ws}, c.args...)); err != nil {
			t.Fatal(err)
		}
		cfg, err := f.config(nil)
		if c.err == "" {
			if err != nil || cfg.Egress == nil {
				t.Fatalf("%v: %v", c.args, err)
			}
			s := cfg.Egress.Secrets["CORRAL_TEST_TOKEN"]
			if s.Value != value || len(s.Hosts) != 2 {
				t.Errorf("%v: %v", c.args, s)
			}
			if strings.Contains(fmt.Sprintf("%v %+v %#v", s, cfg.Egress, s), value) {
				t.Errorf("the value is printed")
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%v: %v, want %q", c.args, err, c.err)
		}
	}
}
