//go:build unix

package tools

import "syscall"

// openNonblock keeps opening a named pipe from blocking; regular files ignore it.
const openNonblock = syscall.O_NONBLOCK
