package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The workspace's repository is untrusted input: a command in the sandbox can
// write its files (the index, objects, refs, a .gitattributes, an included
// config file), and the user's own git config may name programs. corral's git
// therefore runs with no system or global config and with every setting that
// could run a program, redirect git or change what is recorded fixed on the
// command line, which beats any config file. The commands that look at the
// working tree (ls-files, update-index, write-tree) go further: they run in a
// repository of corral's own, in the state directory, whose config is
// corral's. No repository config is read by them at all, so a filter driver,
// a core.fsmonitor or a hook named anywhere in the workspace's repository
// never runs.
//
// Nothing is ever written to the workspace's repository: the sandbox can
// delete, corrupt or plant links among its objects and refs while corral
// works. Every object a checkpoint needs, and its ref, is in corral's own
// repository; the workspace's objects are only read, to bring over, once,
// the blobs its index names (checked against their names by index-pack on
// the way in), and to read the checkpoints older versions of corral stored
// there. corral's git does not read the content of a working-tree file
// into a checkpoint: corral opens each file itself (see readEntry), so that
// a file swapped for a link, a pipe or a device between a look and a read is
// neither followed nor waited on.

// safeConfig is given to every git corral runs.
var safeConfig = []string{
	"core.hooksPath=/dev/null",
	"core.fsmonitor=false",
	"core.untrackedCache=false",
	"core.splitIndex=false",
	"core.sparseCheckout=false",
	"index.sparse=false",
	"core.attributesFile=/dev/null",
	"core.autocrlf=false",
	"core.safecrlf=false",
	"core.symlinks=true",
	"core.fileMode=true",
	"core.ignoreCase=false",
	"core.precomposeUnicode=false",
	"core.trustctime=true",
	"core.checkStat=default",
	"core.logAllRefUpdates=false",
	"core.quotePath=false",
	"core.pager=cat",
	"core.editor=true",
	"commit.gpgSign=false",
	"gc.auto=0",
	"maintenance.auto=false",
	"feature.manyFiles=false",
	"diff.external=",
	"safe.directory=*",
}

// git runs the host's git for one workspace.
type git struct {
	bin      string
	stateDir string // the working directory of every git: never the workspace
	// shim is corral's own repository: GIT_DIR of every command, where the
	// checkpoints' refs are. objects is its object directory, where every
	// blob and tree of a checkpoint is stored.
	shim, objects string
	// repo is where refs are written: shim.
	repo string
	// alternates is an object directory read, never written, besides
	// objects: the workspace's store's, for the store of an isolated copy.
	alternates string
	// source is the workspace repository's object directory ("" outside
	// git): read, never written, to import the blobs its index names and to
	// read the checkpoints of older versions of corral.
	source   string
	workTree string
	index    string // corral's index, in the state directory
}

// baseEnv is the environment of every git corral runs: nothing of the
// host's, no config but the command line's, no pager, no prompt.
func (g *git) baseEnv() []string {
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"LC_ALL=C",
		"HOME=" + g.stateDir,
		"XDG_CONFIG_HOME=" + filepath.Join(g.stateDir, "no-config"),
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_ATTR_NOSYSTEM=1",
		"GIT_NO_REPLACE_OBJECTS=1",
		"GIT_LITERAL_PATHSPECS=1",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_PAGER=cat",
		"PAGER=cat",
		"GIT_EDITOR=true",
		"GIT_AUTHOR_NAME=corral",
		"GIT_AUTHOR_EMAIL=corral@localhost",
		"GIT_COMMITTER_NAME=corral",
		"GIT_COMMITTER_EMAIL=corral@localhost",
	}
	return env
}

// worktreeEnv is the environment of the commands that read the working tree:
// corral's own repository, index and config, the workspace's objects.
func (g *git) worktreeEnv() []string {
	return g.withAlternates(append(g.baseEnv(),
		"GIT_DIR="+g.shim,
		"GIT_WORK_TREE="+g.workTree,
		"GIT_INDEX_FILE="+g.index,
		"GIT_OBJECT_DIRECTORY="+g.objects,
	))
}

// withAlternates adds g's alternate object directory to env.
func (g *git) withAlternates(env []string) []string {
	if g.alternates == "" {
		return env
	}
	return append(env, "GIT_ALTERNATE_OBJECT_DIRECTORIES="+g.alternates)
}

// readEnv is the environment of the commands that only read checkpoints'
// objects: corral's first, then the workspace's (where older versions of
// corral stored them). What a restore reads is checked against its name.
func (g *git) readEnv() []string {
	env := g.worktreeEnv()
	if g.sourceReadable() {
		alt := g.source
		if g.alternates != "" {
			alt = g.alternates + string(filepath.ListSeparator) + alt
		}
		env = append(env, "GIT_ALTERNATE_OBJECT_DIRECTORIES="+alt)
	}
	return env
}

// sourceReadable says whether git may read the workspace's object directory
// without waiting on a named pipe a command put where it reads a file
// (info/alternates); git still reads it through its own opens, so this only
// keeps a planted pipe from hanging every read.
func (g *git) sourceReadable() bool {
	if g.source == "" {
		return false
	}
	fi, err := os.Lstat(filepath.Join(g.source, "info", "alternates"))
	return err != nil || fi.Mode().IsRegular()
}

// repoEnv is the environment of the commands that read objects or write refs
// of the workspace's repository; they never look at the working tree.
func (g *git) repoEnv() []string {
	return g.withAlternates(append(g.baseEnv(),
		"GIT_DIR="+g.repo,
		"GIT_OPTIONAL_LOCKS=0",
	))
}

func (g *git) command(ctx context.Context, env []string, args ...string) *exec.Cmd {
	full := make([]string, 0, 2*len(safeConfig)+len(args)+1)
	full = append(full, "--no-pager")
	for _, c := range safeConfig {
		full = append(full, "-c", c)
	}
	full = append(full, args...)
	cmd := exec.CommandContext(ctx, g.bin, full...)
	cmd.Env = env
	cmd.Dir = g.stateDir
	killGroup(cmd)
	return cmd
}

// GitError is a git command that failed.
type GitError struct {
	Args   []string
	Err    error
	Stderr string
}

func (e *GitError) Error() string {
	msg := strings.TrimSpace(e.Stderr)
	if msg == "" {
		msg = e.Err.Error()
	}
	return fmt.Sprintf("git %s: %s", strings.Join(e.Args, " "), msg)
}

func (e *GitError) Unwrap() error { return e.Err }

// run runs git and returns its standard output.
func (g *git) run(ctx context.Context, env []string, stdin io.Reader, args ...string) ([]byte, error) {
	cmd := g.command(ctx, env, args...)
	cmd.Stdin = stdin
	var out, errb bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &limitedBuffer{b: &errb, n: 4096}
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &GitError{Args: args, Err: err, Stderr: errb.String()}
	}
	return out.Bytes(), nil
}

// limitedBuffer keeps the first n bytes written to it.
type limitedBuffer struct {
	b *bytes.Buffer
	n int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.n - l.b.Len(); room > 0 {
		l.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// findRepo returns the git directory and the common directory of the
// repository whose working tree is ws, or "" when ws is not the top of one. A
// .git file (a linked worktree, a submodule) is followed; nothing of the
// repository's config is read.
func findRepo(ws string) (gitDir, common string, err error) {
	dotgit := filepath.Join(ws, ".git")
	fi, err := os.Lstat(dotgit)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "", "", nil
	case err != nil:
		return "", "", err
	case fi.IsDir():
		gitDir = dotgit
	case fi.Mode().IsRegular():
		b, err := readPlain(dotgit, 64<<10)
		if err != nil {
			return "", "", err
		}
		line, _, _ := strings.Cut(string(b), "\n")
		p, ok := strings.CutPrefix(strings.TrimSpace(line), "gitdir:")
		if !ok {
			return "", "", fmt.Errorf("%s is not a git link file", dotgit)
		}
		p = strings.TrimSpace(p)
		if !filepath.IsAbs(p) {
			p = filepath.Join(ws, p)
		}
		gitDir = p
	default:
		return "", "", nil
	}
	if fi, err := os.Stat(filepath.Join(gitDir, "HEAD")); err != nil || !fi.Mode().IsRegular() {
		return "", "", nil // not a repository: checkpoint it as a plain directory
	}
	common = gitDir
	if b, err := readPlain(filepath.Join(gitDir, "commondir"), 64<<10); err == nil {
		p := strings.TrimSpace(string(b))
		if !filepath.IsAbs(p) {
			p = filepath.Join(gitDir, p)
		}
		common = filepath.Clean(p)
	}
	return gitDir, common, nil
}

// objectFormat reads the repository's object format ("sha1" or "sha256")
// from its config file alone, without includes.
func objectFormat(ctx context.Context, g *git, common string) string {
	// Read by corral (never waiting on a pipe), then by git from corral's
	// copy.
	b, err := readPlain(filepath.Join(common, "config"), 1<<20)
	if err != nil {
		return "sha1"
	}
	cmd := g.command(ctx, g.baseEnv(), "config", "--file", "-", "--get", "extensions.objectformat")
	cmd.Stdin = bytes.NewReader(b)
	out, err := cmd.Output()
	if err == nil && strings.TrimSpace(string(out)) == "sha256" {
		return "sha256"
	}
	return "sha1"
}

// initShim makes corral's own repository at g.shim: a git directory with
// corral's config and nothing else.
func initShim(g *git, format string) error {
	for _, d := range []string{"refs/heads", "refs/tags", "objects/info", "objects/pack", "info"} {
		if err := os.MkdirAll(filepath.Join(g.shim, d), 0o700); err != nil {
			return err
		}
	}
	config := "[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tfilemode = true\n\tsymlinks = true\n\tlogallrefupdates = false\n[gc]\n\tauto = 0\n"
	if format == "sha256" {
		config = "[core]\n\trepositoryformatversion = 1\n\tbare = false\n\tfilemode = true\n\tsymlinks = true\n\tlogallrefupdates = false\n[extensions]\n\tobjectformat = sha256\n[gc]\n\tauto = 0\n"
	}
	if err := writeFileAtomic(filepath.Join(g.shim, "config"), []byte(config), 0o600); err != nil {
		return err
	}
	// info/attributes beats every .gitattributes: no filter, no line-ending
	// or ident conversion, no re-encoding — a checkpoint records the bytes
	// on disk, and a .gitattributes a command writes changes nothing.
	if err := writeFileAtomic(filepath.Join(g.shim, "info", "attributes"), []byte(rawAttributes), 0o600); err != nil {
		return err
	}
	head := filepath.Join(g.shim, "HEAD")
	if _, err := os.Stat(head); err != nil {
		return writeFileAtomic(head, []byte("ref: refs/heads/corral\n"), 0o600)
	}
	return nil
}

// rawAttributes are the attributes of every path in corral's repository.
const rawAttributes = "* -text !eol -ident -filter !working-tree-encoding\n"

// writeFileAtomic writes data to name through a temporary file and a rename.
func writeFileAtomic(name string, data []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), name)
}
