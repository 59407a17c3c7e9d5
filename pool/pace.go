package pool

import (
	"context"
	"sync"
	"time"
)

// Pacer spaces events evenly: at most rate a second, never two closer than
// 1/rate, so that many waiting at once leave one by one (no burst). Its
// methods are safe for concurrent use.
type Pacer struct {
	every time.Duration // zero: no limit

	mu   sync.Mutex // guards next
	next time.Time  // the earliest time of the next event
}

// NewPacer returns a Pacer of rate events a second; one without a limit
// when rate is zero.
func NewPacer(rate float64) *Pacer {
	p := &Pacer{}
	if rate > 0 {
		p.every = time.Duration(float64(time.Second) / rate)
	}
	return p
}

// Wait returns when the caller's turn has come, or ctx's error first (its
// turn is then lost, not given back).
func (p *Pacer) Wait(ctx context.Context) error {
	if p.every == 0 {
		return ctx.Err()
	}
	p.mu.Lock()
	now := time.Now()
	at := p.next
	if at.Before(now) {
		at = now
	}
	p.next = at.Add(p.every)
	p.mu.Unlock()
	d := time.Until(at)
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
