package tools

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/fsnotify/fsnotify"
)

// maxWatchedDirs caps the directories one session watches, well under the
// usual inotify limit (8192 watches per user on older kernels).
const maxWatchedDirs = 4096

// maxEventHash is the largest file the watcher hashes to tell a real change
// from a touch; a larger changed file is reported on its stat signature alone.
const maxEventHash = 64 << 20

// watcher watches the directories of the files the session read or wrote, marks
// their read-state dirty when they change, and emits file_changed for changes
// the session did not make. It is an early warning for the UI: edit and write
// still compare content hashes, so a watcher that misses events or cannot be
// started costs nothing but the warning.
type watcher struct {
	s   *Session
	fsw *fsnotify.Watcher // nil when degraded from the start
	// addWatch adds a watch; a test replaces it, under mu, to exhaust the
	// limit.
	addWatch func(string) error

	mu       sync.Mutex      // guards dirs, degraded and addWatch
	dirs     map[string]bool // canonical workspace dirs watched
	degraded bool            // no more watches: hash checks alone

	done chan struct{} // closed when loop returns
}

func newWatcher(s *Session) *watcher {
	w := &watcher{s: s, dirs: map[string]bool{}, done: make(chan struct{})}
	if s.ws.local == nil {
		s.log.Info("tools: the workspace is not on this machine, so changes by others are not watched; edit and write still refuse a file whose content changed since it was read",
			slog.String("workspace", s.ws.abs))
		w.degraded = true
		close(w.done)
		return w
	}
	fsw, err := fsnotify.NewWatcher()
	if err != nil {
		w.degrade("cannot start the file watcher", err)
		close(w.done)
		return w
	}
	w.fsw = fsw
	w.addWatch = fsw.Add
	go w.loop()
	return w
}

// degrade stops adding watches, with one log line. The caller holds w.mu, or
// has w to itself.
func (w *watcher) degrade(why string, err error) {
	w.s.log.Warn("tools: "+why+"; changes by others are now caught by the content hash check at edit and write time only",
		slog.String("workspace", w.s.ws.abs), slog.Any("err", err))
	w.degraded = true
}

// add watches the workspace directory dir (canonical, "." for the root).
func (w *watcher) add(dir string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.degraded || w.dirs[dir] {
		return
	}
	if len(w.dirs) >= maxWatchedDirs {
		w.degrade("the session watches the most directories it may", nil)
		return
	}
	err := w.addWatch(filepath.Join(w.s.ws.real, filepath.FromSlash(dir)))
	switch {
	case err == nil:
		w.dirs[dir] = true
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EMFILE), errors.Is(err, syscall.ENFILE):
		w.degrade("the file watch limit is exhausted (fs.inotify.max_user_watches)", err)
	case errors.Is(err, fsnotify.ErrClosed):
	default:
		w.s.log.Debug("tools: cannot watch a directory", slog.String("dir", dir), slog.Any("err", err))
	}
}

func (w *watcher) close() {
	if w.fsw != nil {
		_ = w.fsw.Close()
	}
	<-w.done
}

func (w *watcher) loop() {
	defer close(w.done)
	for {
		select {
		case ev, ok := <-w.fsw.Events:
			if !ok {
				return
			}
			w.handle(ev)
		case err, ok := <-w.fsw.Errors:
			if !ok {
				return
			}
			w.s.log.Debug("tools: file watcher", slog.Any("err", err))
		}
	}
}

// handle looks at one event: a file of the read-state whose content is no
// longer what the session last read or wrote becomes dirty, and is reported
// once.
func (w *watcher) handle(ev fsnotify.Event) {
	rel, ok := w.s.ws.relative(ev.Name)
	if !ok || rel == "." {
		return
	}
	rel = filepath.ToSlash(rel)
	if isTempName(path.Base(rel)) {
		return
	}
	if ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename) {
		w.mu.Lock()
		delete(w.dirs, rel) // a watched directory went away with its watch
		w.mu.Unlock()
	}
	key := w.s.ws.keyOf(rel)
	rs := w.s.state
	rs.mu.Lock()
	f, tracked := rs.files[key]
	if !tracked || f.dirty {
		rs.mu.Unlock()
		return
	}
	want := f.hash
	rs.mu.Unlock()

	op := "write"
	fi, err := w.s.ws.root.Lstat(rel)
	var sig statSig
	var changed bool
	switch {
	case errors.Is(err, fs.ErrNotExist):
		changed, op = true, "remove"
		if ev.Has(fsnotify.Rename) {
			op = "rename"
		}
	case err != nil:
		return
	default:
		sig = sigOf(fi)
		rs.mu.Lock()
		known := f.knows(sig)
		rs.mu.Unlock()
		if known {
			return
		}
		changed = true
		if fi.Mode().IsRegular() && fi.Size() <= maxEventHash {
			if h, err := w.hashFile(rel); err == nil && h == want {
				changed = false
			}
		}
	}
	rs.mu.Lock()
	if f2 := rs.files[key]; f2 != f || f.hash != want || f.dirty {
		rs.mu.Unlock()
		return // the session read or wrote it meanwhile
	}
	if !changed {
		f.sig = sig // the same content: remember its signature
		rs.mu.Unlock()
		return
	}
	f.dirty = true
	display := f.display
	rs.mu.Unlock()
	w.s.emit(Event{Type: EventFileChanged, Path: display, Op: op})
}

// hashFile hashes the regular file rel. What was opened is checked, not what
// was looked at before: a file swapped for a named pipe meanwhile would block
// the watcher, and Close with it, for as long as a writer holds the pipe.
func (w *watcher) hashFile(rel string) (contentHash, error) {
	f, err := w.s.ws.root.OpenFile(rel, os.O_RDONLY|openNonblock, 0)
	if err != nil {
		return contentHash{}, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return contentHash{}, errNotRegular
	}
	return hashReader(context.Background(), f)
}

// errNotRegular says an opened file turned out not to be a regular file.
var errNotRegular = errors.New("not a regular file")
