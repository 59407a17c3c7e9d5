package agent

import (
	"bufio"
	"fmt"
	"os"

	"github.com/corralhq/corral/sandbox/internal/wsarchive"
)

// Pack writes the tree under dir as a tar stream on stdout (`corral agent
// pack DIR`): a workspace on its way back to the host, from inside the
// sandbox.
func Pack(dir string) error {
	w := bufio.NewWriterSize(os.Stdout, 256<<10)
	if err := wsarchive.Pack(w, dir, nil); err != nil {
		return fmt.Errorf("pack %s: %w", dir, err)
	}
	return w.Flush()
}

// Unpack unpacks the tar stream on stdin into dir, which it creates
// (`corral agent unpack DIR`): a workspace on its way into the sandbox.
func Unpack(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	res, err := wsarchive.Unpack(bufio.NewReaderSize(os.Stdin, 256<<10), dir, wsarchive.Options{})
	for _, s := range res.Skipped {
		fmt.Fprintln(os.Stderr, "left out:", s)
	}
	if err != nil {
		return fmt.Errorf("unpack into %s: %w", dir, err)
	}
	return nil
}
