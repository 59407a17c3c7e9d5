package mcp

import (
	"strings"
	"testing"

	"github.com/corralhq/corral/tools"
)

// A call whose output went past the events' cap says so in its progress: the
// notifications stop carrying output there, and the last one tells how much
// more there was.
func TestProgressSaysOutputDropped(t *testing.T) {
	r := newOutputRouter()
	p := &progressStream{wake: make(chan struct{}, 1)}
	r.calls["c1"] = p
	r.Emit(tools.Event{Type: tools.EventOutput, CallID: "c1", Data: "first lines\n"})
	msg, total := p.take()
	if msg != "first lines\n" || total != len(msg) {
		t.Fatalf("progress %q (%d)", msg, total)
	}
	r.Emit(tools.Event{Type: tools.EventOutputDropped, CallID: "c1", Dropped: 123456, Limit: "command"})
	msg, total2 := p.take()
	if !strings.Contains(msg, "123456 more bytes of output are not streamed (the command's cap)") || total2 <= total {
		t.Errorf("after the drop: progress %q (%d, before %d)", msg, total2, total)
	}
	r.Emit(tools.Event{Type: tools.EventOutputDropped, CallID: "other", Dropped: 1, Limit: "session"})
	if msg, _ := p.take(); msg != "" {
		t.Errorf("another call's drop reached this call's progress: %q", msg)
	}
}
