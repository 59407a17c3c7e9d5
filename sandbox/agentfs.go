package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/corralhq/corral/fsys"
	"github.com/corralhq/corral/sandbox/internal/ring"
	"github.com/corralhq/corral/sandbox/proto"
)

// fsTimeout bounds the wait for the agent's answer to a file operation, and
// for each step of a read or a write: an agent that answers pings but not a
// file operation (a filesystem that hangs) fails the call instead of
// hanging it.
const fsTimeout = 60 * time.Second

// fsCalls are the file operations in flight on one connection.
type fsCalls struct {
	seq   atomic.Uint32
	mu    sync.Mutex // guards calls
	calls map[uint32]*fsCall
}

// fsCall is the host's side of one file operation.
type fsCall struct {
	id    uint32
	reply chan proto.FSReplyMsg // cap 1
	// data holds an FSRead's bytes received and not yet read; nil for
	// other calls.
	data *ring.Buf
	// credit is what an FSWrite may still send; ready is signalled when it
	// grows.
	credit atomic.Int64
	ready  chan struct{}
}

// fsOpen registers a new call.
func (c *Client) fsOpen(read bool) (*fsCall, error) {
	c.fsc.mu.Lock()
	defer c.fsc.mu.Unlock()
	if c.broken() {
		return nil, c.Death()
	}
	if c.fsc.calls == nil {
		c.fsc.calls = map[uint32]*fsCall{}
	}
	var id uint32
	for {
		id = proto.FSStreamBit | c.fsc.seq.Add(1)&(proto.FSStreamBit-1)
		if _, busy := c.fsc.calls[id]; !busy && id != proto.FSStreamBit {
			break
		}
	}
	call := &fsCall{id: id, reply: make(chan proto.FSReplyMsg, 1), ready: make(chan struct{}, 1)}
	if read {
		call.data = ring.New(proto.FSWindow)
	}
	call.credit.Store(proto.FSWindow)
	c.fsc.calls[id] = call
	return call, nil
}

// fsForget drops a call: frames that still arrive for it are ignored.
func (c *Client) fsForget(call *fsCall) {
	c.fsc.mu.Lock()
	delete(c.fsc.calls, call.id)
	c.fsc.mu.Unlock()
}

func (c *Client) fsLookup(id uint32) *fsCall {
	c.fsc.mu.Lock()
	defer c.fsc.mu.Unlock()
	return c.fsc.calls[id]
}

// dispatchFS handles a file-operation frame; ok is false for any other. It
// never blocks: the agent sends no more than a read's window.
func (c *Client) dispatchFS(f proto.Frame) (ok bool, err error) {
	switch f.Type {
	case proto.FSReply, proto.FSData, proto.FSCredit:
	default:
		return false, nil
	}
	if err := proto.CheckFSStream(f.Type, f.Stream); err != nil {
		return true, err
	}
	call := c.fsLookup(f.Stream)
	switch f.Type {
	case proto.FSReply:
		var m proto.FSReplyMsg
		if err := json.Unmarshal(f.Payload, &m); err != nil {
			return true, fmt.Errorf("%w: file reply: %v", proto.ErrProtocol, err)
		}
		if call == nil {
			return true, nil
		}
		c.fsForget(call)
		select {
		case call.reply <- m:
		default:
		}
		if call.data != nil {
			call.data.Close()
		}
	case proto.FSData:
		if call == nil {
			return true, nil
		}
		if call.data == nil {
			return true, fmt.Errorf("%w: file data on stream %#x, which reads nothing", proto.ErrProtocol, f.Stream)
		}
		if err := call.data.Write(f.Payload); err != nil {
			return true, fmt.Errorf("%w: file data of stream %#x: %v", proto.ErrProtocol, f.Stream, err)
		}
	case proto.FSCredit:
		n, err := proto.ParseCredit(f.Payload)
		if err != nil {
			return true, err
		}
		if call != nil {
			call.credit.Add(int64(n))
			ring.Notify(call.ready)
		}
	}
	return true, nil
}

// errFSTimeout says the agent did not answer a file operation in time.
var errFSTimeout = fmt.Errorf("the sandbox agent did not answer a file operation within %v", fsTimeout)

// fsDo runs one file operation and waits for its reply.
func (c *Client) fsDo(m proto.FSCallMsg) (proto.FSReplyMsg, error) {
	call, err := c.fsOpen(false)
	if err != nil {
		return proto.FSReplyMsg{}, err
	}
	if err := c.send(proto.JSONFrame(proto.FSCall, call.id, m)); err != nil {
		c.fsForget(call)
		return proto.FSReplyMsg{}, c.Death()
	}
	return c.fsWait(call)
}

// fsWait waits for a call's reply.
func (c *Client) fsWait(call *fsCall) (proto.FSReplyMsg, error) {
	t := time.NewTimer(fsTimeout)
	defer t.Stop()
	select {
	case r := <-call.reply:
		return r, nil
	case <-c.done:
		c.fsForget(call)
		return proto.FSReplyMsg{}, c.Death()
	case <-t.C:
		c.fsForget(call)
		return proto.FSReplyMsg{}, errFSTimeout
	}
}

// fsError turns the agent's description of a failed operation into the
// error os.Root would have returned: a *fs.PathError (an *os.LinkError for a
// rename) around the system's error number, fsys.ErrEscape or
// fs.ErrClosed.
func fsError(e *proto.FSError) error {
	if e == nil {
		return nil
	}
	var inner error
	switch {
	case e.Errno != 0:
		inner = syscall.Errno(e.Errno)
	case e.Escape:
		inner = fsys.ErrEscape
	case e.Closed:
		inner = fs.ErrClosed
	default:
		return fmt.Errorf("sandbox agent: %s %q: %s", e.Op, e.Path, e.Msg)
	}
	if e.New != nil {
		return &os.LinkError{Op: e.Op, Old: string(e.Path), New: string(e.New), Err: inner}
	}
	return &fs.PathError{Op: e.Op, Path: string(e.Path), Err: inner}
}

// AgentFS is a sandbox's workspace as an fsys.Root, through the sandbox's
// agent: every operation is a file operation of package proto, which the
// agent does on the workspace inside the sandbox through os.Root, as the
// commands' user. It follows the sandbox across restarts: each operation
// uses the current agent (client gives it), and the roots and files opened
// from it belong to the agent that opened them, failing with a *DiedError
// once it is gone. It is safe for concurrent use.
type AgentFS struct {
	client func(ctx context.Context) (*Client, error)
	name   string
	umask  fs.FileMode

	mu     sync.Mutex // guards cur and root
	cur    *Client
	root   *agentRoot // the workspace on cur
	closed bool
}

// OpenAgentFS opens the workspace of the sandbox whose current agent client
// gives (starting the sandbox, as a backend's Client method does).
func OpenAgentFS(ctx context.Context, client func(ctx context.Context) (*Client, error)) (*AgentFS, error) {
	a := &AgentFS{client: client}
	r, err := a.current(ctx)
	if err != nil {
		return nil, err
	}
	a.name, a.umask = r.name, r.umask
	return a, nil
}

// current returns the workspace's root on the current agent, opening it
// when the agent changed.
func (a *AgentFS) current(ctx context.Context) (*agentRoot, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil, fs.ErrClosed
	}
	if a.root != nil && !a.cur.broken() {
		return a.root, nil
	}
	c, err := a.client(ctx)
	if err != nil {
		return nil, err
	}
	r, err := c.openWorkspace()
	if err != nil {
		return nil, err
	}
	a.cur, a.root = c, r
	return r, nil
}

func (a *AgentFS) op(name string) (*agentRoot, error) {
	r, err := a.current(context.Background())
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return nil, err
		}
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	return r, nil
}

// Name is the workspace's absolute path inside the sandbox.
func (a *AgentFS) Name() string { return a.name }

// Umask is the agent's file mode creation mask, which commands inherit.
func (a *AgentFS) Umask() fs.FileMode { return a.umask }

func (a *AgentFS) OpenFile(name string, flag int, perm fs.FileMode) (fsys.File, error) {
	r, err := a.op(name)
	if err != nil {
		return nil, err
	}
	return r.OpenFile(name, flag, perm)
}

func (a *AgentFS) OpenRoot(name string) (fsys.Root, error) {
	r, err := a.op(name)
	if err != nil {
		return nil, err
	}
	return r.OpenRoot(name)
}

func (a *AgentFS) Stat(name string) (fs.FileInfo, error) {
	r, err := a.op(name)
	if err != nil {
		return nil, err
	}
	return r.Stat(name)
}

func (a *AgentFS) Lstat(name string) (fs.FileInfo, error) {
	r, err := a.op(name)
	if err != nil {
		return nil, err
	}
	return r.Lstat(name)
}

func (a *AgentFS) Readlink(name string) (string, error) {
	r, err := a.op(name)
	if err != nil {
		return "", err
	}
	return r.Readlink(name)
}

func (a *AgentFS) Mkdir(name string, perm fs.FileMode) error {
	r, err := a.op(name)
	if err != nil {
		return err
	}
	return r.Mkdir(name, perm)
}

func (a *AgentFS) MkdirAll(name string, perm fs.FileMode) error {
	r, err := a.op(name)
	if err != nil {
		return err
	}
	return r.MkdirAll(name, perm)
}

func (a *AgentFS) Remove(name string) error {
	r, err := a.op(name)
	if err != nil {
		return err
	}
	return r.Remove(name)
}

func (a *AgentFS) Rename(oldname, newname string) error {
	r, err := a.op(oldname)
	if err != nil {
		return err
	}
	return r.Rename(oldname, newname)
}

func (a *AgentFS) Chmod(name string, mode fs.FileMode) error {
	r, err := a.op(name)
	if err != nil {
		return err
	}
	return r.Chmod(name, mode)
}

func (a *AgentFS) Chown(name string, uid, gid int) error {
	r, err := a.op(name)
	if err != nil {
		return err
	}
	return r.Chown(name, uid, gid)
}

// Where asks the agent where the workspace is now.
func (a *AgentFS) Where() (string, bool) {
	r, err := a.op(".")
	if err != nil {
		return "", false
	}
	return r.Where()
}

// Close releases the workspace's root on the current agent. Roots and files
// opened from a stay usable.
func (a *AgentFS) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil
	}
	a.closed = true
	if a.root != nil && !a.cur.broken() {
		return a.root.Close()
	}
	return nil
}

// agentRoot is a root open on one agent.
type agentRoot struct {
	c      *Client
	handle uint32
	name   string
	umask  fs.FileMode
	closed atomic.Bool
}

// openWorkspace opens the workspace as a root.
func (c *Client) openWorkspace() (*agentRoot, error) {
	rep, err := c.fsDo(proto.FSCallMsg{Op: proto.FSOpenRoot, Name: []byte(".")})
	if err != nil {
		return nil, err
	}
	if err := fsError(rep.Error); err != nil {
		return nil, err
	}
	return &agentRoot{c: c, handle: rep.Handle, name: string(rep.Path), umask: fs.FileMode(rep.Umask) & fs.ModePerm}, nil
}

// do runs an operation on a name in r.
func (r *agentRoot) do(m proto.FSCallMsg) (proto.FSReplyMsg, error) {
	if r.closed.Load() {
		return proto.FSReplyMsg{}, &fs.PathError{Op: m.Op, Path: string(m.Name), Err: fs.ErrClosed}
	}
	m.Root = r.handle
	rep, err := r.c.fsDo(m)
	if err != nil {
		return rep, &fs.PathError{Op: m.Op, Path: string(m.Name), Err: err}
	}
	return rep, fsError(rep.Error)
}

func (r *agentRoot) Name() string       { return r.name }
func (r *agentRoot) Umask() fs.FileMode { return r.umask }

func (r *agentRoot) OpenFile(name string, flag int, perm fs.FileMode) (fsys.File, error) {
	pf, err := protoFlag(flag)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	rep, err := r.do(proto.FSCallMsg{Op: proto.FSOpen, Name: []byte(name), Flag: pf, Perm: uint32(perm.Perm())})
	if err != nil {
		return nil, err
	}
	f := &agentFile{root: r, handle: rep.Handle, name: name, closing: make(chan struct{})}
	if rep.Info != nil {
		f.info = newAgentInfo(rep.Info)
	}
	return f, nil
}

func (r *agentRoot) OpenRoot(name string) (fsys.Root, error) {
	rep, err := r.do(proto.FSCallMsg{Op: proto.FSOpenRoot, Name: []byte(name)})
	if err != nil {
		return nil, err
	}
	return &agentRoot{c: r.c, handle: rep.Handle, name: path.Join(r.name, name), umask: r.umask}, nil
}

func (r *agentRoot) Stat(name string) (fs.FileInfo, error) {
	return r.stat(proto.FSStat, name)
}

func (r *agentRoot) Lstat(name string) (fs.FileInfo, error) {
	return r.stat(proto.FSLstat, name)
}

func (r *agentRoot) stat(op, name string) (fs.FileInfo, error) {
	rep, err := r.do(proto.FSCallMsg{Op: op, Name: []byte(name)})
	if err != nil {
		return nil, err
	}
	if rep.Info == nil {
		return nil, fmt.Errorf("%w: %s without a file's description", proto.ErrProtocol, op)
	}
	return newAgentInfo(rep.Info), nil
}

func (r *agentRoot) Readlink(name string) (string, error) {
	rep, err := r.do(proto.FSCallMsg{Op: proto.FSReadlink, Name: []byte(name)})
	return string(rep.Target), err
}

func (r *agentRoot) Mkdir(name string, perm fs.FileMode) error {
	_, err := r.do(proto.FSCallMsg{Op: proto.FSMkdir, Name: []byte(name), Perm: uint32(perm.Perm())})
	return err
}

func (r *agentRoot) MkdirAll(name string, perm fs.FileMode) error {
	_, err := r.do(proto.FSCallMsg{Op: proto.FSMkdirAll, Name: []byte(name), Perm: uint32(perm.Perm())})
	return err
}

func (r *agentRoot) Remove(name string) error {
	_, err := r.do(proto.FSCallMsg{Op: proto.FSRemove, Name: []byte(name)})
	return err
}

func (r *agentRoot) Rename(oldname, newname string) error {
	_, err := r.do(proto.FSCallMsg{Op: proto.FSRename, Name: []byte(oldname), NewName: []byte(newname)})
	return err
}

func (r *agentRoot) Chmod(name string, mode fs.FileMode) error {
	_, err := r.do(proto.FSCallMsg{Op: proto.FSChmod, Name: []byte(name), Perm: uint32(mode)})
	return err
}

func (r *agentRoot) Chown(name string, uid, gid int) error {
	_, err := r.do(proto.FSCallMsg{Op: proto.FSChown, Name: []byte(name), UID: uid, GID: gid})
	return err
}

// Where asks the agent where the root's directory is now.
func (r *agentRoot) Where() (string, bool) {
	if r.closed.Load() {
		return "", false
	}
	rep, err := r.c.fsDo(proto.FSCallMsg{Op: proto.FSWhere, Handle: r.handle})
	if err != nil || rep.Error != nil || len(rep.Where) == 0 {
		return "", false
	}
	return string(rep.Where), true
}

func (r *agentRoot) Close() error {
	if r.closed.Swap(true) {
		return nil
	}
	return r.c.fsClose(r.handle, r.name)
}

// fsClose closes a handle on the agent. A handle of an agent that is gone
// is closed already.
func (c *Client) fsClose(handle uint32, name string) error {
	if c.broken() {
		return nil
	}
	rep, err := c.fsDo(proto.FSCallMsg{Op: proto.FSClose, Handle: handle})
	if err != nil {
		if c.broken() {
			return nil
		}
		return &fs.PathError{Op: "close", Path: name, Err: err}
	}
	if err := fsError(rep.Error); err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			pe.Path = name
		}
		return err
	}
	return nil
}

// agentFile is a file open on one agent. Reads stream: the first Read asks
// the agent for the rest of the file, and later ones take what arrived
// (at most proto.FSWindow bytes ahead of the reader); a Write waits until
// the agent wrote all of it. A file is read or written, not both at once: a
// Write while a read is under way fails.
type agentFile struct {
	root    *agentRoot
	handle  uint32
	name    string
	closing chan struct{} // closed by Close, which wakes a waiting Read

	mu       sync.Mutex // guards the fields below
	info     *agentInfo // as of the open: Stat's answer until the file is used
	rd       *fsCall    // the read under way, nil when none
	consumed int        // bytes of rd read and not yet credited
	closed   bool
}

func (f *agentFile) Name() string { return f.name }

func (f *agentFile) pathErr(op string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		pe.Path = f.name
		return pe
	}
	return &fs.PathError{Op: op, Path: f.name, Err: err}
}

// do runs an operation on the open file.
func (f *agentFile) do(m proto.FSCallMsg) (proto.FSReplyMsg, error) {
	if f.closed {
		return proto.FSReplyMsg{}, &fs.PathError{Op: m.Op, Path: f.name, Err: fs.ErrClosed}
	}
	m.Handle = f.handle
	rep, err := f.root.c.fsDo(m)
	if err != nil {
		return rep, f.pathErr(m.Op, err)
	}
	if err := fsError(rep.Error); err != nil {
		return rep, f.pathErr(m.Op, err)
	}
	return rep, nil
}

func (f *agentFile) Read(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return 0, &fs.PathError{Op: "read", Path: f.name, Err: fs.ErrClosed}
	}
	if len(p) == 0 {
		return 0, nil
	}
	c := f.root.c
	if f.rd == nil {
		call, err := c.fsOpen(true)
		if err != nil {
			return 0, f.pathErr("read", err)
		}
		if err := c.send(proto.JSONFrame(proto.FSCall, call.id, proto.FSCallMsg{Op: proto.FSRead, Handle: f.handle})); err != nil {
			c.fsForget(call)
			return 0, f.pathErr("read", c.Death())
		}
		f.rd, f.consumed, f.info = call, 0, nil
	}
	rd := f.rd
	t := time.NewTimer(fsTimeout)
	defer t.Stop()
	for {
		n, done := rd.data.Read(p)
		if n > 0 {
			f.consumed += n
			if f.consumed >= proto.FSWindow/4 || rd.data.Len() == 0 {
				_ = c.send(proto.FSCreditFrame(rd.id, f.consumed))
				f.consumed = 0
			}
			return n, nil
		}
		if done {
			f.rd = nil
			rep := <-rd.reply // the reply closed data
			if err := fsError(rep.Error); err != nil {
				return 0, f.pathErr("read", err)
			}
			return 0, io.EOF
		}
		select {
		case <-rd.data.Ready:
		case <-c.done:
			f.rd = nil
			c.fsForget(rd)
			return 0, f.pathErr("read", c.Death())
		case <-f.closing:
			return 0, &fs.PathError{Op: "read", Path: f.name, Err: fs.ErrClosed}
		case <-t.C:
			f.rd = nil
			c.fsForget(rd)
			return 0, f.pathErr("read", errFSTimeout)
		}
	}
}

func (f *agentFile) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return 0, &fs.PathError{Op: "write", Path: f.name, Err: fs.ErrClosed}
	}
	if f.rd != nil {
		return 0, &fs.PathError{Op: "write", Path: f.name, Err: errors.New("a read of this file is under way; open it again to write")}
	}
	f.info = nil
	c := f.root.c
	call, err := c.fsOpen(false)
	if err != nil {
		return 0, f.pathErr("write", err)
	}
	if err := c.send(proto.JSONFrame(proto.FSCall, call.id, proto.FSCallMsg{Op: proto.FSWrite, Handle: f.handle, N: int64(len(p))})); err != nil {
		c.fsForget(call)
		return 0, f.pathErr("write", c.Death())
	}
	// The bytes go within the agent's credit; a reply before the end says
	// the write failed.
	t := time.NewTimer(fsTimeout)
	defer t.Stop()
	rest := p
	for len(rest) > 0 {
		for call.credit.Load() <= 0 {
			select {
			case <-call.ready:
			case rep := <-call.reply:
				return int(rep.N), f.writeErr(rep)
			case <-c.done:
				c.fsForget(call)
				return 0, f.pathErr("write", c.Death())
			case <-t.C:
				c.fsForget(call)
				return 0, f.pathErr("write", errFSTimeout)
			}
		}
		k := int(min(int64(len(rest)), int64(proto.MaxChunk), call.credit.Load()))
		call.credit.Add(-int64(k))
		if err := c.send(proto.AppendFrame(make([]byte, 0, proto.HeaderSize+k), proto.FSData, call.id, rest[:k])); err != nil {
			c.fsForget(call)
			return 0, f.pathErr("write", c.Death())
		}
		rest = rest[k:]
		t.Reset(fsTimeout)
	}
	rep, err := c.fsWait(call)
	if err != nil {
		return 0, f.pathErr("write", err)
	}
	return int(rep.N), f.writeErr(rep)
}

// writeErr is the error of a write's reply; a short write without one is
// io.ErrShortWrite.
func (f *agentFile) writeErr(rep proto.FSReplyMsg) error {
	if err := fsError(rep.Error); err != nil {
		return f.pathErr("write", err)
	}
	return nil
}

func (f *agentFile) Stat() (fs.FileInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.info != nil {
		// Nothing was done with the file since it was opened, a moment
		// ago: the description the open brought is the answer.
		info := f.info
		f.info = nil
		return info, nil
	}
	rep, err := f.do(proto.FSCallMsg{Op: proto.FSFstat})
	if err != nil {
		return nil, err
	}
	if rep.Info == nil {
		return nil, fmt.Errorf("%w: fstat without a file's description", proto.ErrProtocol)
	}
	return newAgentInfo(rep.Info), nil
}

func (f *agentFile) ReadDir(n int) ([]fs.DirEntry, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.info = nil
	var out []fs.DirEntry
	for {
		want := n
		if n <= 0 || n-len(out) > proto.FSMaxEntries {
			want = proto.FSMaxEntries
		} else {
			want = n - len(out)
		}
		rep, err := f.do(proto.FSCallMsg{Op: proto.FSReadDir, N: int64(want)})
		if err != nil {
			return out, err
		}
		for _, e := range rep.Entries {
			out = append(out, &agentEntry{root: f.root, dir: f.name, name: string(e.Name), typ: fs.FileMode(e.Type) & fs.ModeType})
		}
		switch {
		case rep.EOF && n > 0 && len(out) == 0:
			return out, io.EOF
		case rep.EOF:
			return out, nil
		case n > 0 && len(out) >= n:
			return out, nil
		case len(rep.Entries) == 0:
			return out, nil
		}
	}
}

func (f *agentFile) Readdirnames(n int) ([]string, error) {
	ents, err := f.ReadDir(n)
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.Name()
	}
	return names, err
}

func (f *agentFile) Sync() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, err := f.do(proto.FSCallMsg{Op: proto.FSSync})
	return err
}

func (f *agentFile) Chmod(mode fs.FileMode) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.info = nil
	_, err := f.do(proto.FSCallMsg{Op: proto.FSFchmod, Perm: uint32(mode)})
	return err
}

func (f *agentFile) Chown(uid, gid int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.info = nil
	_, err := f.do(proto.FSCallMsg{Op: proto.FSFchown, UID: uid, GID: gid})
	return err
}

// Close closes the file on the agent, ending a read under way.
func (f *agentFile) Close() error {
	select {
	case <-f.closing:
		return &fs.PathError{Op: "close", Path: f.name, Err: fs.ErrClosed}
	default:
		close(f.closing)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	if f.rd != nil {
		f.root.c.fsForget(f.rd)
		f.rd = nil
	}
	return f.root.c.fsClose(f.handle, f.name)
}

// protoFlag translates os.OpenFile's flags for the protocol.
func protoFlag(flag int) (int, error) {
	var p int
	switch flag & (os.O_RDONLY | os.O_WRONLY | os.O_RDWR) {
	case os.O_RDONLY:
		p = proto.FSReadOnly
	case os.O_WRONLY:
		p = proto.FSWriteOnly
	case os.O_RDWR:
		p = proto.FSReadWrite
	default:
		return 0, syscall.EINVAL
	}
	rest := flag &^ (os.O_RDONLY | os.O_WRONLY | os.O_RDWR)
	for _, b := range []struct{ o, p int }{
		{os.O_CREATE, proto.FSCreate}, {os.O_EXCL, proto.FSExcl}, {os.O_TRUNC, proto.FSTrunc},
		{os.O_APPEND, proto.FSAppend}, {os.O_SYNC, proto.FSOSync}, {syscall.O_NONBLOCK, proto.FSNonblock},
		{syscall.O_CLOEXEC, 0}, // the agent's files are never inherited
	} {
		if rest&b.o != 0 {
			p |= b.p
			rest &^= b.o
		}
	}
	if rest != 0 {
		return 0, fmt.Errorf("open flags %#x: %w", rest, syscall.EINVAL)
	}
	return p, nil
}

// agentInfo is a FileInfo from the agent.
type agentInfo struct {
	in proto.FSInfo
	st any // *syscall.Stat_t where the platform has one
}

func newAgentInfo(in *proto.FSInfo) *agentInfo {
	return &agentInfo{in: *in, st: statT(in)}
}

func (i *agentInfo) Name() string       { return string(i.in.Name) }
func (i *agentInfo) Size() int64        { return i.in.Size }
func (i *agentInfo) Mode() fs.FileMode  { return fs.FileMode(i.in.Mode) }
func (i *agentInfo) ModTime() time.Time { return time.Unix(0, i.in.Mtime) }
func (i *agentInfo) IsDir() bool        { return i.Mode().IsDir() }
func (i *agentInfo) Sys() any           { return i.st }

// agentEntry is a directory entry from the agent.
type agentEntry struct {
	root      *agentRoot
	dir, name string
	typ       fs.FileMode
}

func (e *agentEntry) Name() string      { return e.name }
func (e *agentEntry) IsDir() bool       { return e.typ.IsDir() }
func (e *agentEntry) Type() fs.FileMode { return e.typ }

// Info describes the entry by its path from the root its directory was
// opened in.
func (e *agentEntry) Info() (fs.FileInfo, error) {
	return e.root.Lstat(path.Join(e.dir, e.name))
}

var (
	_ fsys.Root = (*AgentFS)(nil)
	_ fsys.Root = (*agentRoot)(nil)
	_ fsys.File = (*agentFile)(nil)
)
