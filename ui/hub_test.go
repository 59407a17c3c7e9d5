package ui

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/corralhq/corral/tools"
)

// Past MaxSessionBytes a hub keeps no output, and its memory stays bounded
// however many output events come: a run of one call's output events, of any
// length, becomes one event that says how many bytes it held, with the call's
// id; other events are kept, and no byte goes uncounted.
func TestHubDroppedOutputBounded(t *testing.T) {
	h := NewHub()
	rec := h.Session("s", "")
	sent := map[string]int64{}
	emit := func(call, data string) {
		rec.Emit(tools.Event{Type: tools.EventOutput, Session: "s", CallID: call, Data: data})
		sent[call] += int64(len(data))
	}
	big := strings.Repeat("x", 1<<20)
	for range MaxSessionBytes>>20 + 1 {
		emit("1", big)
	}
	for range 200000 { // a command printing one byte at a time
		emit("1", "y")
	}
	emit("2", strings.Repeat("z", 1000))
	rec.Emit(tools.Event{Type: tools.EventCallEnd, Session: "s", CallID: "2"})
	rec.Close()

	h.mu.Lock()
	bytes := h.sessions["s"].bytes
	h.mu.Unlock()
	if bytes > MaxSessionBytes+1024 {
		t.Errorf("the hub holds %d bytes of events, want at most about %d", bytes, MaxSessionBytes)
	}
	evs, _, _, _ := h.Events("s", 0)
	kept, dropped := map[string]int64{}, map[string]int64{}
	var tail []string
	for _, raw := range evs {
		var e struct {
			Type    string `json:"type"`
			CallID  string `json:"call_id"`
			Data    string `json:"data"`
			Dropped int64  `json:"dropped"`
		}
		if err := json.Unmarshal(raw, &e); err != nil {
			t.Fatal(err)
		}
		kept[e.CallID] += int64(len(e.Data))
		dropped[e.CallID] += e.Dropped
		if e.Dropped > 0 || e.Type != "output" {
			tail = append(tail, e.Type+" "+e.CallID)
		}
	}
	for call, n := range sent {
		if kept[call]+dropped[call] != n {
			t.Errorf("call %s: %d bytes kept and %d said dropped, of %d", call, kept[call], dropped[call], n)
		}
	}
	if want := "output 1,output 2,call_end 2"; strings.Join(tail, ",") != want {
		t.Errorf("%d events past the cap, want %q", len(tail), want)
	}
	if info := h.Sessions()[0]; info.Dropped != dropped["1"]+dropped["2"] {
		t.Errorf("dropped_bytes = %d, the events say %d", info.Dropped, dropped["1"]+dropped["2"])
	}
}
