package agent

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Install copies the running executable to dest, executable by everyone,
// through a temporary file renamed into place: the init container of a
// Kubernetes sandbox pod puts the agent into a volume the sandbox's own
// container (any image) runs it from.
func Install(dest string) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("install: find this binary: %w", err)
	}
	in, err := os.Open(self)
	if err != nil {
		return fmt.Errorf("install: %w", err)
	}
	defer in.Close()
	out, err := os.CreateTemp(filepath.Dir(dest), ".corral-*")
	if err != nil {
		return fmt.Errorf("install: %w", err)
	}
	defer os.Remove(out.Name())
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("install: copy to %s: %w", dest, err)
	}
	if err := out.Chmod(0o555); err != nil {
		out.Close()
		return fmt.Errorf("install: %w", err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("install: %w", err)
	}
	if err := os.Rename(out.Name(), dest); err != nil {
		return fmt.Errorf("install: %w", err)
	}
	return nil
}
