package batch

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/corralhq/corral/internal/sanitize"
)

// progress tells how the batch goes: on a terminal, one line redrawn in
// place with a bar; elsewhere (a log, CI), a line per task that ends.
type progress struct {
	w     io.Writer // nil: silent
	term  bool
	total int
	begin time.Time

	mu                         sync.Mutex // guards the counts and writes
	done, failed, running, can int
	stop                       chan struct{}
	stopped                    sync.WaitGroup
}

func newProgress(w io.Writer, term bool, total int) *progress {
	p := &progress{w: w, term: term, total: total, begin: time.Now(), stop: make(chan struct{})}
	if w != nil && term {
		// The clock moves even while no task ends.
		p.stopped.Go(func() {
			t := time.NewTicker(500 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-t.C:
					p.mu.Lock()
					p.draw()
					p.mu.Unlock()
				case <-p.stop:
					return
				}
			}
		})
	}
	return p
}

// start counts a task that starts.
func (p *progress) start() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.running++
	if p.term {
		p.draw()
	}
}

// end counts a task that ended; started says it was counted by start (a
// malformed line never runs).
func (p *progress) end(r TaskResult, started bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if started {
		p.running--
	}
	p.done++
	switch r.Status {
	case StatusFailed:
		p.failed++
	case StatusCancelled:
		p.can++
	}
	if p.w == nil {
		return
	}
	if p.term {
		if r.Status == StatusFailed {
			// A failure stays on the screen, above the bar.
			fmt.Fprintf(p.w, "\r\x1b[Kcorral: task %s failed: %s\n", r.ID, sanitize.Text(oneLine(r.Reason)))
		}
		p.draw()
		return
	}
	what := r.Status
	if r.Reason != "" {
		what += ": " + sanitize.Text(oneLine(r.Reason))
	}
	fmt.Fprintf(p.w, "corral: [%d/%d] %s %s (%s)\n", p.done, p.total, r.ID, what, r.Duration.Round(time.Millisecond))
}

// draw redraws the bar. p.mu is held.
func (p *progress) draw() {
	if p.w == nil || !p.term {
		return
	}
	const width = 30
	filled := 0
	if p.total > 0 {
		filled = width * p.done / p.total
	}
	bar := strings.Repeat("█", filled) + strings.Repeat("░", width-filled)
	el := time.Since(p.begin).Round(time.Second)
	fmt.Fprintf(p.w, "\r\x1b[K%s %d/%d  %d failed  %d running  %s", bar, p.done, p.total, p.failed, p.running, el)
}

// finish ends the display with the batch's totals.
func (p *progress) finish(s *Summary, path string) {
	p.close()
	if p.w == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.term {
		fmt.Fprint(p.w, "\r\x1b[K")
	}
	fmt.Fprintf(p.w, "corral: %d tasks: %d ok, %d failed, %d cancelled in %s; summary in %s\n", s.Total, s.OK, s.Failed, s.Cancelled, s.Duration.Round(time.Millisecond), path)
}

// close stops the clock; it may be called more than once.
func (p *progress) close() {
	p.mu.Lock()
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	p.mu.Unlock()
	p.stopped.Wait()
}

func oneLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}
