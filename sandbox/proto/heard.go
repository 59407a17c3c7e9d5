package proto

import (
	"sync/atomic"
	"time"
)

// Heard records when the other side last sent a frame, on the monotonic clock:
// a step of the wall clock (NTP, a resumed VM) must not look like silence. Start
// it with Mark before the first Since.
type Heard struct {
	t0 time.Time    // set once by the first Mark; carries a monotonic reading
	ns atomic.Int64 // time since t0 of the last Mark
}

// Mark records that a frame arrived now. The first Mark must happen before the
// Heard is shared between goroutines.
func (h *Heard) Mark() {
	if h.t0.IsZero() {
		h.t0 = time.Now()
	}
	h.ns.Store(int64(time.Since(h.t0)))
}

// Since is how long ago the last Mark was.
func (h *Heard) Since() time.Duration {
	return time.Since(h.t0) - time.Duration(h.ns.Load())
}
