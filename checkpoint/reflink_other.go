//go:build !linux

package checkpoint

import "os"

// oNoFollow is zero where opening a link cannot be refused.
const oNoFollow = 0

// reflink makes no reflinks here: the caller copies.
func reflink(dst, src *os.File) bool { return false }
