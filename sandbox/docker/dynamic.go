package docker

import (
	"debug/elf"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/docker/docker/api/types/mount"
)

// A dynamically linked agent (corral built with cgo, the Go default where a C
// compiler exists) needs a loader and libraries that the image may not have, or
// have in other versions. It brings the host's own instead: the loader its ELF
// names and every shared library it needs (recursively) are bind-mounted
// read-only into agentLibDir, and the container starts the loader, which runs
// the agent with its libraries from there and nothing of the image's. Commands
// still run the image's programs with the image's libraries.

// agentLibDir is where a dynamic agent's loader and libraries are mounted.
const agentLibDir = "/.corral/lib"

// agentRuntime is what a dynamically linked agent needs in the container.
type agentRuntime struct {
	interp string            // host path of the loader (PT_INTERP), symlinks resolved
	libs   map[string]string // soname → host path, symlinks resolved
}

// entrypoint is the command that starts the agent at agentPath: itself when
// static, else through the mounted loader with only the mounted libraries.
func (rt *agentRuntime) entrypoint() []string {
	if rt == nil {
		return []string{agentPath}
	}
	return []string{path.Join(agentLibDir, filepath.Base(rt.interp)), "--library-path", agentLibDir, agentPath}
}

// mounts are the read-only bind mounts of the loader and the libraries.
func (rt *agentRuntime) mounts() []mount.Mount {
	if rt == nil {
		return nil
	}
	ms := []mount.Mount{{Type: mount.TypeBind, Source: rt.interp, Target: path.Join(agentLibDir, filepath.Base(rt.interp)), ReadOnly: true}}
	names := make([]string, 0, len(rt.libs))
	for name := range rt.libs {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		ms = append(ms, mount.Mount{Type: mount.TypeBind, Source: rt.libs[name], Target: path.Join(agentLibDir, name), ReadOnly: true})
	}
	return ms
}

// maxAgentLibs bounds the libraries followed, against a cycle or a runaway tree.
const maxAgentLibs = 64

// dynamicRuntime finds the loader and libraries of the executable f at bin:
// nil for a static one, an error when one cannot be found on this host.
func dynamicRuntime(bin string, f *elf.File) (*agentRuntime, error) {
	var interp string
	for _, p := range f.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		b := make([]byte, p.Filesz)
		if _, err := p.ReadAt(b, 0); err != nil {
			return nil, fmt.Errorf("its loader's name cannot be read: %v", err)
		}
		interp = strings.TrimRight(string(b), "\x00")
	}
	if interp == "" {
		return nil, nil
	}
	real, err := filepath.EvalSymlinks(interp)
	if err != nil {
		return nil, fmt.Errorf("its loader %s is not on this host", interp)
	}
	rt := &agentRuntime{interp: real, libs: map[string]string{}}
	type todo struct {
		file *elf.File
		dir  string // the directory of the file, for $ORIGIN
	}
	queue := []todo{{f, filepath.Dir(bin)}}
	var opened []*elf.File
	defer func() {
		for _, o := range opened {
			o.Close()
		}
	}()
	for len(queue) > 0 {
		t := queue[0]
		queue = queue[1:]
		needed, err := t.file.ImportedLibraries()
		if err != nil {
			return nil, fmt.Errorf("its library list cannot be read: %v", err)
		}
		for _, name := range needed {
			if _, ok := rt.libs[name]; ok || sameFile(name, interp) {
				continue
			}
			if len(rt.libs) >= maxAgentLibs {
				return nil, fmt.Errorf("it needs more than %d shared libraries", maxAgentLibs)
			}
			p, lf, err := findLibrary(name, t.file, t.dir, f)
			if err != nil {
				return nil, err
			}
			opened = append(opened, lf)
			rt.libs[name] = p
			queue = append(queue, todo{lf, filepath.Dir(p)})
		}
	}
	return rt, nil
}

// sameFile reports whether a needed name is the loader itself (libc names
// ld-linux-x86-64.so.2, which is mounted already).
func sameFile(name, interp string) bool { return name == filepath.Base(interp) }

// findLibrary finds the shared library name needed by from (whose directory is
// dir) as the host's loader would: from's run paths, the directories of
// /etc/ld.so.conf, then the default ones; only a file of the same class and
// machine as the agent counts. It returns the path with symlinks resolved.
func findLibrary(name string, from *elf.File, dir string, agent *elf.File) (string, *elf.File, error) {
	var dirs []string
	if strings.Contains(name, "/") {
		dirs = []string{""}
	} else {
		for _, tag := range []elf.DynTag{elf.DT_RUNPATH, elf.DT_RPATH} {
			vals, _ := from.DynString(tag)
			for _, v := range vals {
				for _, d := range strings.Split(v, ":") {
					dirs = append(dirs, strings.NewReplacer("$ORIGIN", dir, "${ORIGIN}", dir).Replace(d))
				}
			}
		}
		dirs = append(dirs, ldSoConfDirs("/etc/ld.so.conf", 0)...)
		dirs = append(dirs, defaultLibDirs...)
	}
	for _, d := range dirs {
		p := filepath.Join(d, name)
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			continue
		}
		lf, err := elf.Open(real)
		if err != nil {
			continue
		}
		if lf.Class != agent.Class || lf.Machine != agent.Machine {
			lf.Close()
			continue
		}
		return real, lf, nil
	}
	return "", nil, fmt.Errorf("its library %s is not on this host", name)
}

// defaultLibDirs are where loaders look last, multiarch directories included.
var defaultLibDirs = []string{
	"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu",
	"/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu",
	"/lib64", "/usr/lib64", "/lib", "/usr/lib", "/usr/local/lib",
}

// ldSoConfDirs reads the directories of an ld.so.conf file and of the files it
// includes (glob patterns), depth levels deep at most.
func ldSoConfDirs(file string, depth int) []string {
	data, err := os.ReadFile(file)
	if err != nil || depth > 4 {
		return nil
	}
	var dirs []string
	for _, line := range strings.Split(string(data), "\n") {
		line, _, _ = strings.Cut(line, "#")
		line = strings.TrimSpace(line)
		if rest, ok := strings.CutPrefix(line, "include"); ok && (rest == "" || rest[0] == ' ' || rest[0] == '\t') {
			pattern := strings.TrimSpace(rest)
			if !filepath.IsAbs(pattern) {
				pattern = filepath.Join(filepath.Dir(file), pattern)
			}
			matches, _ := filepath.Glob(pattern)
			for _, m := range matches {
				dirs = append(dirs, ldSoConfDirs(m, depth+1)...)
			}
			continue
		}
		if filepath.IsAbs(line) {
			dirs = append(dirs, line)
		}
	}
	return dirs
}
