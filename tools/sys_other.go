//go:build !unix

package tools

const openNonblock = 0
