package sandbox

import (
	"log/slog"
	"testing"

	"github.com/corralhq/corral/sandbox/internal/ring"
	"github.com/corralhq/corral/sandbox/proto"
)

// FuzzDispatchFS: whatever file-operation frames the agent sends, the host's
// dispatcher returns an error or nothing, never panics, and never holds more
// of a read than its window.
func FuzzDispatchFS(f *testing.F) {
	f.Add(byte(proto.FSReply), uint32(proto.FSStreamBit|1), []byte(`{"handle":5,"info":{"name":"YQ==","size":3}}`))
	f.Add(byte(proto.FSData), uint32(proto.FSStreamBit|2), []byte("data"))
	f.Add(byte(proto.FSCredit), uint32(proto.FSStreamBit|3), []byte{0, 0, 0, 1})
	f.Add(byte(proto.FSReply), uint32(proto.FSStreamBit|2), []byte(`{"error":{"op":"read","errno":2}}`))
	f.Add(byte(proto.FSData), uint32(1), []byte("x"))
	f.Fuzz(func(t *testing.T, typ byte, stream uint32, p []byte) {
		c := &Client{streams: map[uint32]*hostStream{}, helloCh: make(chan proto.AgentHelloMsg, 1), log: slog.New(slog.DiscardHandler)}
		c.fsc.calls = map[uint32]*fsCall{}
		for id, read := range map[uint32]bool{proto.FSStreamBit | 1: false, proto.FSStreamBit | 2: true, proto.FSStreamBit | 3: false} {
			call := &fsCall{id: id, reply: make(chan proto.FSReplyMsg, 1), ready: make(chan struct{}, 1)}
			if read {
				call.data = ring.New(proto.FSWindow)
			}
			c.fsc.calls[id] = call
		}
		rd := c.fsc.calls[proto.FSStreamBit|2]
		for range 3 {
			_ = c.dispatch(proto.Frame{Type: proto.Type(typ), Stream: stream, Payload: p})
		}
		if rd.data.Len() > proto.FSWindow {
			t.Fatal("a read holds more than its window")
		}
		select {
		case r := <-rd.reply:
			_ = fsError(r.Error)
		default:
		}
	})
}
