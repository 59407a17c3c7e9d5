package tools

import (
	"testing"
	"unicode/utf8"
)

// The output events of a command stop at its cap, and a session's at its
// own, never in the middle of a UTF-8 sequence; every byte left out is
// counted in one output_dropped event that names the cap.
func TestOutputEventsCap(t *testing.T) {
	for _, tc := range []struct {
		name        string
		left        int64 // the command's cap
		budget      int64 // the session's
		writes      []string
		sent        string
		dropped     int64
		limit       string
		sessionUsed int64
	}{
		{name: "fits", left: 5, budget: 50, writes: []string{"ab", "cé"}, sent: "abcé", sessionUsed: 5},
		{name: "command cap", left: 5, budget: 50, writes: []string{"ab", "cé", "dé"}, sent: "abcé", dropped: 3, limit: "command", sessionUsed: 5},
		{name: "cap inside a rune", left: 4, budget: 50, writes: []string{"abcé", "x"}, sent: "abc", dropped: 3, limit: "command", sessionUsed: 3},
		{name: "rune split across writes", left: 4, budget: 50, writes: []string{"abc\xc3", "\xa9x"}, sent: "abc", dropped: 3, limit: "command", sessionUsed: 3},
		{name: "session cap", left: 100, budget: 3, writes: []string{"ab", "cd"}, sent: "abc", dropped: 1, limit: "session", sessionUsed: 3},
		{name: "session spent", left: 100, budget: 0, writes: []string{"hello"}, dropped: 5, limit: "session"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []Event
			s := &Session{events: EventFunc(func(e Event) { got = append(got, e) }), sh: &shell{logBudget: tc.budget}}
			r := &rawSink{term: newTerminal(maxTermLine, func([]byte, int) {}), s: s, callID: "c", eventsLeft: tc.left}
			for _, w := range tc.writes {
				r.Write([]byte(w))
			}
			r.finish()
			var sent string
			var drops []Event
			for _, e := range got {
				switch e.Type {
				case EventOutput:
					if len(drops) > 0 {
						t.Error("output after the drop event")
					}
					if !utf8.ValidString(e.Data) {
						t.Errorf("an output event cut inside a rune: %q", e.Data)
					}
					sent += e.Data
				case EventOutputDropped:
					drops = append(drops, e)
				}
			}
			if sent != tc.sent {
				t.Errorf("sent %q, want %q", sent, tc.sent)
			}
			switch {
			case tc.dropped == 0 && len(drops) > 0:
				t.Errorf("drop events %+v, want none", drops)
			case tc.dropped > 0 && (len(drops) != 1 || drops[0].Dropped != tc.dropped || drops[0].Limit != tc.limit || drops[0].CallID != "c"):
				t.Errorf("drop events %+v, want one of %d bytes, limit %s", drops, tc.dropped, tc.limit)
			}
			if s.sh.eventsUsed != tc.sessionUsed {
				t.Errorf("the session's budget was charged %d, want %d", s.sh.eventsUsed, tc.sessionUsed)
			}
		})
	}
}
