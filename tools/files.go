package tools

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
)

// fileTools is the state of read, edit and write in one session.
type fileTools struct {
	ws *workspace
	// logs is bash's log directory, which read opens by absolute path; nil
	// when it cannot be opened. logsAbs and logsReal are its path as given
	// and with symbolic links resolved.
	logs              *os.Root
	logsAbs, logsReal string
	protect           protection
	state             *readState
	queue             *writeQueue
	watch             *watcher
}

// openFiles readies the file tools: the confined workspace, the read-state, the
// write queue and the watcher. It runs after newShell, whose log directory read
// may open.
func (s *Session) openFiles() error {
	ws, err := openWorkspace(s.opts.Workspace)
	if err != nil {
		return err
	}
	s.ws = ws
	// Protected paths may be given absolute, inside the workspace.
	protected := make([]string, 0, len(s.opts.Protected))
	for _, p := range s.opts.Protected {
		if filepath.IsAbs(p) {
			if rel, ok := ws.relative(p); ok {
				if strings.HasSuffix(p, "/") {
					rel += "/"
				}
				p = rel
			}
		}
		protected = append(protected, p)
	}
	s.protect = newProtection(protected)
	s.state = newReadState()
	s.queue = newWriteQueue()
	if s.sh != nil && s.sh.logDir != "" {
		if abs, err := filepath.Abs(s.sh.logDir); err == nil {
			if real, err := filepath.EvalSymlinks(abs); err == nil {
				if r, err := os.OpenRoot(real); err == nil {
					s.logs, s.logsAbs, s.logsReal = r, abs, real
				}
			}
		}
	}
	s.watch = newWatcher(s)
	return nil
}

// closeFiles stops the watcher and closes the roots.
func (s *Session) closeFiles() error {
	var errs []error
	if s.watch != nil {
		s.watch.close()
	}
	if s.logs != nil {
		errs = append(errs, s.logs.Close())
	}
	if s.ws != nil {
		errs = append(errs, s.ws.root.Close())
	}
	return errors.Join(errs...)
}
