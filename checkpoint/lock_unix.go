//go:build unix

package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// flock locks the file name (made when missing): exclusive or shared, waiting
// for it until ctx ends, or failing at once with errLocked when wait is false.
// The lock goes with the process, also when it is killed.
func flock(ctx context.Context, name string, exclusive, wait bool) (func(), error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: lock: %w", err)
	}
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	for delay := time.Millisecond; ; delay = min(2*delay, 100*time.Millisecond) {
		err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("checkpoint: lock: %w", err)
		}
		if !wait {
			f.Close()
			return nil, errLocked
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(delay):
		}
	}
}

var errLocked = errors.New("locked")
