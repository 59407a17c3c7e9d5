package tools

import (
	"context"
	"sync"
)

// writeQueue serialises the edits and writes of one file: callers holding the
// same key run one at a time, in the order they arrived; different keys run in
// parallel. A key with no holder and no waiter is dropped from the map, so the
// map holds only the files being written right now.
type writeQueue struct {
	mu   sync.Mutex // guards keys and every queueKey in it
	keys map[string]*queueKey
}

// queueKey is the FIFO of one key: the holder runs, waiters are granted the key
// in order by closing their channel.
type queueKey struct {
	waiters []chan struct{}
}

func newWriteQueue() *writeQueue {
	return &writeQueue{keys: map[string]*queueKey{}}
}

// acquire waits for key's turn. It returns a release function, or ctx's error if
// ctx ends first (then the caller holds nothing).
func (q *writeQueue) acquire(ctx context.Context, key string) (release func(), err error) {
	q.mu.Lock()
	k, busy := q.keys[key]
	if !busy {
		q.keys[key] = &queueKey{}
		q.mu.Unlock()
		return func() { q.release(key) }, nil
	}
	turn := make(chan struct{})
	k.waiters = append(k.waiters, turn)
	q.mu.Unlock()

	select {
	case <-turn:
		return func() { q.release(key) }, nil
	case <-ctx.Done():
	}
	q.mu.Lock()
	for i, w := range k.waiters {
		if w == turn {
			k.waiters = append(k.waiters[:i], k.waiters[i+1:]...)
			q.mu.Unlock()
			return nil, ctx.Err()
		}
	}
	q.mu.Unlock()
	// The turn was granted while ctx ended: pass it on.
	q.release(key)
	return nil, ctx.Err()
}

// release hands key to its next waiter, or drops it.
func (q *writeQueue) release(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	k := q.keys[key]
	if len(k.waiters) == 0 {
		delete(q.keys, key)
		return
	}
	next := k.waiters[0]
	k.waiters[0] = nil
	k.waiters = k.waiters[1:]
	close(next)
}
