package kube

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"slices"
	"strings"

	"github.com/corralhq/corral/internal/agentconf"
	"github.com/corralhq/corral/internal/sanitize"
	"github.com/corralhq/corral/sandbox"
	"github.com/corralhq/corral/sandbox/internal/wsarchive"
)

// Source is where a pod's workspace comes from, instead of the host's
// directory: a tar file (gzipped or not), or a git repository at a revision.
type Source struct {
	// Tar is a tar file whose entries are relative to the workspace.
	Tar string
	// Git is a repository (a URL or a directory) cloned on the host, with
	// its .git, and checked out at Rev (HEAD when empty).
	Git string
	Rev string
}

func (s *Source) check() error {
	switch {
	case s.Tar != "" && s.Git != "":
		return errors.New("kubernetes: a source is a tar file or a git repository: give one")
	case s.Tar != "":
		if _, err := os.Stat(s.Tar); err != nil {
			return fmt.Errorf("kubernetes: source: %w", err)
		}
	case s.Git != "":
		if _, err := exec.LookPath("git"); err != nil {
			return errors.New("kubernetes: a git source needs git on the host")
		}
		if strings.HasPrefix(s.Rev, "-") {
			return fmt.Errorf("kubernetes: git revision %q may not start with '-'", s.Rev)
		}
	default:
		return errors.New("kubernetes: an empty source: give a tar file or a git repository")
	}
	return nil
}

// seed fills the new pod's workspace: from Options.Source, or with the
// host's directory, through the agent (`corral agent unpack`, a command of
// its own, with the commands' rights).
func (p *Pod) seed(ctx context.Context, c *sandbox.Client, workspace string) error {
	src := p.b.opts.Source
	if src == nil && p.b.opts.NoUpload {
		return nil
	}
	r, cleanup, err := p.seedStream(ctx, src)
	if err != nil {
		return err
	}
	defer cleanup()
	return p.upload(ctx, c, r, workspace)
}

// seedStream opens the tar stream of the workspace's source.
func (p *Pod) seedStream(ctx context.Context, src *Source) (io.Reader, func(), error) {
	switch {
	case src == nil:
		return packDir(p.cfg.Workspace)
	case src.Tar != "":
		f, err := os.Open(src.Tar)
		if err != nil {
			return nil, nil, fmt.Errorf("kubernetes: source: %w", err)
		}
		br := bufio.NewReader(f)
		if magic, _ := br.Peek(2); bytes.Equal(magic, []byte{0x1f, 0x8b}) {
			zr, err := gzip.NewReader(br)
			if err != nil {
				f.Close()
				return nil, nil, fmt.Errorf("kubernetes: source %s: %w", src.Tar, err)
			}
			return zr, func() { f.Close() }, nil
		}
		return br, func() { f.Close() }, nil
	default:
		dir, err := os.MkdirTemp("", "corral-git-")
		if err != nil {
			return nil, nil, err
		}
		done := func() { os.RemoveAll(dir) }
		if err := gitClone(ctx, src.Git, src.Rev, dir); err != nil {
			done()
			return nil, nil, err
		}
		r, closeR, err := packDir(dir)
		if err != nil {
			done()
			return nil, nil, err
		}
		return r, func() { closeR(); done() }, nil
	}
}

// packDir streams the tree under dir.
func packDir(dir string) (io.Reader, func(), error) {
	pr, pw := io.Pipe()
	go func() {
		pw.CloseWithError(wsarchive.Pack(pw, dir, nil))
	}()
	return pr, func() { pr.Close() }, nil
}

// gitClone clones repo into dir and checks out rev, running nothing the
// repository names (no hooks, no system or global configuration).
func gitClone(ctx context.Context, repo, rev, dir string) error {
	run := func(args ...string) error {
		cmd := exec.CommandContext(ctx, "git", append([]string{"-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false"}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_TERMINAL_PROMPT=0")
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("kubernetes: git %s: %v: %s", args[0], err, strings.TrimSpace(string(out)))
		}
		return nil
	}
	if err := run("clone", "--quiet", "--no-checkout", "--", repo, dir); err != nil {
		return err
	}
	if rev == "" {
		rev = "HEAD"
	}
	return run("-C", dir, "checkout", "--quiet", "--detach", rev, "--")
}

// upload unpacks the tar stream r into the pod's workspace, at workspace.
func (p *Pod) upload(ctx context.Context, c *sandbox.Client, r io.Reader, workspace string) error {
	var out capped
	res, err := c.Exec(ctx, sandbox.ExecRequest{
		Argv:   []string{agentPath, "agent", "unpack", workspace},
		Dir:    "/",
		Pipes:  true,
		Stdin:  r,
		Output: &out,
		Stderr: &out,
	})
	if err != nil {
		return fmt.Errorf("kubernetes: upload the workspace: %w", err)
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("kubernetes: upload the workspace: status %d: %s", res.ExitCode, sanitize.Text(strings.TrimSpace(out.String())))
	}
	return nil
}

// Download writes the pod's workspace as it is now into dir (which it
// creates), through os.Root: nothing the pod's files say — names, links —
// reaches outside dir. What the host's own tools run or trust without
// review (the protected paths: Config.Protect, or sandbox.DefaultProtect;
// every repository's hooks and config) is left out, and listed in the
// result.
func (p *Pod) Download(ctx context.Context, dir string) (Downloaded, error) {
	p.mu.Lock()
	c := p.client
	p.mu.Unlock()
	if c == nil {
		return Downloaded{}, errors.New("kubernetes: nothing to download: the sandbox pod never started")
	}
	select {
	case <-c.Done():
		return Downloaded{}, fmt.Errorf("kubernetes: the sandbox pod is gone, and its workspace with it: %w", c.Death())
	default:
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Downloaded{}, err
	}
	pr, pw := io.Pipe()
	type unpacked struct {
		res wsarchive.Result
		err error
	}
	done := make(chan unpacked, 1)
	go func() {
		res, err := wsarchive.Unpack(pr, dir, wsarchive.Options{Skip: p.protected()})
		// Read on, so that the command can finish; what follows a failure
		// is dropped.
		_, _ = io.Copy(io.Discard, pr)
		done <- unpacked{res, err}
	}()
	var stderr capped
	res, err := c.Exec(ctx, sandbox.ExecRequest{
		Argv:   []string{agentPath, "agent", "pack", p.Workspace()},
		Dir:    "/",
		Pipes:  true,
		Output: pw,
		Stderr: &stderr,
	})
	pw.Close()
	u := <-done
	d := Downloaded{Files: u.res.Files, Bytes: u.res.Bytes, Skipped: u.res.Skipped}
	switch {
	case err != nil:
		return d, fmt.Errorf("kubernetes: download the workspace: %w", err)
	case res.ExitCode != 0:
		return d, fmt.Errorf("kubernetes: download the workspace: status %d: %s", res.ExitCode, sanitize.Text(strings.TrimSpace(stderr.String())))
	case u.err != nil:
		return d, fmt.Errorf("kubernetes: download the workspace: %w", u.err)
	}
	return d, nil
}

// Downloaded says what Download wrote.
type Downloaded struct {
	// Files and Bytes count the files (and links) written and their bytes.
	Files, Bytes int64
	// Skipped lists what was left out, each "PATH (WHY)".
	Skipped []string
}

// protected says whether a downloaded path is one the host's tools run or
// trust: a protected path, or a repository's hooks or config.
func (p *Pod) protected() func(rel string, isDir bool) bool {
	list := p.cfg.Protect
	if list == nil {
		list = sandbox.DefaultProtect
	}
	var paths, pats []string
	for _, e := range list {
		if strings.ContainsAny(e, "*?[") {
			// A repository's own files come down but for its hooks and
			// config (below): "**/.git" is the file tools'.
			if e := strings.Trim(path.Clean(e), "/"); !slices.Contains(strings.Split(e, "/"), ".git") {
				pats = append(pats, e)
			}
			continue
		}
		if rel, ok := strings.CutPrefix(path.Clean(e), p.cfg.Workspace+"/"); ok {
			e = rel
		} else if rel, ok := strings.CutPrefix(path.Clean(e), p.Workspace()+"/"); ok {
			e = rel
		}
		paths = append(paths, path.Clean(strings.TrimPrefix(e, "./")))
	}
	return func(rel string, isDir bool) bool {
		for _, q := range paths {
			if rel == q || strings.HasPrefix(rel, q+"/") {
				return true
			}
		}
		for _, q := range pats {
			if agentconf.Match(q, rel) {
				return true
			}
		}
		parts := strings.Split(rel, "/")
		for i := 0; i+1 < len(parts); i++ {
			if parts[i] == ".git" && (parts[i+1] == "hooks" || parts[i+1] == "config" && i+2 == len(parts)) {
				return true
			}
		}
		return false
	}
}

// capped keeps the first 16 KiB written to it.
type capped struct{ bytes.Buffer }

func (c *capped) Write(p []byte) (int, error) {
	if room := 16<<10 - c.Len(); room > 0 {
		c.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}
