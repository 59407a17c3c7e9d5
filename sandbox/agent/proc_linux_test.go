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

func TestParseStatus(t *testing.T) {
	status := "Name:\tpython3\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t42\nNgid:\t0\nPid:\t42\nPPid:\t7\nTracerPid:\t0\nUid:\t65532\t65532\t65532\t65532\nGid:\t65532\t65532\t65532\t65532\nFDSize:\t64\nGroups:\t2113929224 \nNStgid:\t42\n"
	ps, ok := parseStatus([]byte(status))
	if !ok || ps.comm != "python3" || ps.state != 'S' || ps.ppid != 7 || ps.mark != 2113929224 {
		t.Errorf("%+v %v", ps, ok)
	}
	// A name cannot add a line (the kernel escapes it), and a group that is
	// not a marker is none.
	ps, ok = parseStatus([]byte("Name:\tGroups: 2113929224\\n\nState:\tZ (zombie)\nPPid:\t1\nGroups:\t100 \n"))
	if !ok || ps.mark != 0 || ps.state != 'Z' {
		t.Errorf("%+v %v", ps, ok)
	}
	if _, ok := parseStatus(nil); ok {
		t.Error("parsed nothing")
	}
}
