//go:build !unix

package checkpoint

import (
	"errors"
	"io"
	"os"
)

type wtKind int

const (
	kindGone wtKind = iota
	kindFile
	kindLink
	kindDir
	kindOther
	kindTooLarge
	kindUnreadable
)

type wtEntry struct {
	kind wtKind
	data []byte
	exec bool
	size int64
	stat statData
}

type treeReader struct{ root *os.Root }

func newTreeReader(ws string, max int64) (*treeReader, error) {
	return nil, errors.New("checkpoint: not supported on this system")
}

func (r *treeReader) close() {}

func (r *treeReader) read(p string) (wtEntry, error) { return wtEntry{}, errors.New("not supported") }

func openPlain(name string) (*os.File, error) { return os.Open(name) }

func readPlain(name string, limit int64) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, limit))
}
