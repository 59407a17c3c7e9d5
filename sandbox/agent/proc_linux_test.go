package agent

import "testing"

func TestParseStat(t *testing.T) {
	ps, ok := parseStat([]byte("42 (a (weird) name) S 1 40 40 0 -1 4194304 95 0 1 0 7 5 0 0 20 0 1 0 64453 2560000\n"))
	if !ok || ps.pid != 42 || ps.comm != "a (weird) name" || ps.state != 'S' || ps.ppid != 1 || ps.pgrp != 40 || ps.sid != 40 || ps.cpu != 12 {
		t.Errorf("%+v %v", ps, ok)
	}
	for _, bad := range []string{"", "42", "42 (x) S 1"} {
		if _, ok := parseStat([]byte(bad)); ok {
			t.Errorf("parsed %q", bad)
		}
	}
}
