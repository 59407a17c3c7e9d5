package tools

import (
	"errors"
	"path/filepath"
	"strings"

	"github.com/corralhq/corral/fsys"
)

// fileTools is the state of read, edit and write in one session.
type fileTools struct {
	// ws is the confined workspace, opened first; bash also reports paths
	// against its real path.
	ws *workspace
	// logs is bash's log directory, which read opens by absolute path; nil
	// when it cannot be opened. logsAbs and logsReal are its path as given
	// and with symbolic links resolved.
	logs              *fsys.Local
	logsAbs, logsReal string
	protect           protection
	configScan        *configScan // nil when not scanning
	state             *readState
	queue             *writeQueue
	watch             *watcher
}

// openFiles readies the rest of the file tools: protected paths, the
// read-state, the write queue, bash's log directory for read, and the watcher.
// It runs after openWorkspace and newShell.
func (s *Session) openFiles() {
	// Protected paths may be given absolute, inside the workspace.
	protected := make([]string, 0, len(s.opts.Protected))
	for _, p := range s.opts.Protected {
		if filepath.IsAbs(p) {
			if rel, ok := s.ws.relative(p); ok {
				if strings.HasSuffix(p, "/") {
					rel += "/"
				}
				p = rel
			}
		}
		protected = append(protected, p)
	}
	s.protect = newProtection(protected)
	s.configScan = newConfigScan(s)
	s.state = newReadState()
	s.queue = newWriteQueue()
	s.openLogs()
	s.watch = newWatcher(s)
}

// openLogs opens bash's log directory, so that read can show the logs; when it
// cannot, read shows no log.
func (s *Session) openLogs() {
	abs, err := filepath.Abs(s.sh.logDir)
	if err != nil {
		return
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return
	}
	r, err := fsys.OpenLocal(real)
	if err != nil {
		return
	}
	s.logs, s.logsAbs, s.logsReal = r, abs, real
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
		errs = append(errs, s.ws.close())
	}
	return errors.Join(errs...)
}
