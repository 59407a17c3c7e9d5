//go:build !linux

package sandbox

import "github.com/corralhq/corral/sandbox/proto"

// statT gives no Stat_t off Linux: the agent's numbers are Linux's.
func statT(in *proto.FSInfo) any { return nil }
