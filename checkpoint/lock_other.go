//go:build !unix

package checkpoint

import (
	"context"
	"errors"
)

var errLocked = errors.New("locked")

func flock(ctx context.Context, name string, exclusive, wait bool) (func(), error) {
	return nil, errors.New("checkpoint: file locks are not supported on this system")
}
