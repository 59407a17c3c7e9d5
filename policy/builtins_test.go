package policy

import (
	"sort"
	"testing"

	"mvdan.cc/sh/v3/interp"
)

// TestBuiltins checks the one list of bash's builtins: every name mvdan.cc/sh
// knows as a builtin is in it, and every builtin has a description in the
// program table, so none is taken for a program of the same name or for an
// unknown program.
func TestBuiltins(t *testing.T) {
	candidates := []string{}
	for n := range programs {
		candidates = append(candidates, n)
	}
	for n := range bashBuiltins {
		candidates = append(candidates, n)
	}
	candidates = append(candidates, "mapfile", "readarray", "shopt", "disown", "suspend", "logout", "bind", "history",
		"fc", "enable", "help", "caller", "coproc", "select", "time", "function", "in", "do", "done", "newgrp")
	sort.Strings(candidates)
	for _, n := range candidates {
		if n == "newgrp" {
			continue // POSIX lists it; in bash it is a program (/usr/bin/newgrp)
		}
		if interp.IsBuiltin(n) && !isBuiltin(n) {
			t.Errorf("%s is a builtin for mvdan.cc/sh but not in bashBuiltins", n)
		}
	}
	var names []string
	for n := range bashBuiltins {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p, ok := programs[n]
		if !ok {
			t.Errorf("the builtin %s has no description: it would be an unknown program", n)
			continue
		}
		if p.rule == ruleAgent || p.rule == ruleUnknownProgram {
			t.Errorf("the builtin %s is described as %s", n, p.rule)
		}
	}
}
