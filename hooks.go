package corral

import (
	"context"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/corralhq/corral/tools"
)

// hooksDir returns the directory, relative to ws, in which git on the host
// looks for the hooks of the repository at ws when its core.hooksPath names
// one inside ws (husky's .husky, a .githooks): git runs them at the user's
// next commit, so commands and the file tools may no more change them than
// .git/hooks. "" without git, without a repository, or when the hooks are
// elsewhere (.git/hooks is the repository's shadow's). The host's git reads
// the configuration the user wrote (the sandbox's commands never reach it).
func hooksDir(ws string) string {
	git, err := exec.LookPath("git")
	if err != nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	run := func(args ...string) string {
		// Whoever owns the repository: its owner's git runs its hooks.
		// Reading two settings runs nothing the configuration names.
		out, err := exec.CommandContext(ctx, git, append([]string{"-c", "safe.directory=*", "-C", ws}, args...)...).Output()
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(out))
	}
	top := run("rev-parse", "--show-toplevel")
	dir := run("config", "--type=path", "--get", "core.hooksPath")
	if top == "" || dir == "" {
		return ""
	}
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(top, dir) // relative to the worktree's top
	}
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	rel, err := filepath.Rel(ws, dir)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return ""
	}
	rel = filepath.ToSlash(rel)
	if rel == ".git" || strings.HasPrefix(rel, ".git/") {
		return ""
	}
	return rel
}

// protection returns the one list of protected paths that the file tools
// and the sandbox both get: files, the file tools' (tools.DefaultProtected
// when nil; an empty, non-nil slice protects nothing), with what box, the
// sandbox's, adds to it, and hooks when not "".
func protection(files, box []string, hooks string) []string {
	list := files
	if list == nil {
		list = tools.DefaultProtected
	}
	list = append([]string{}, list...)
	for _, p := range append(slices.Clip(box), hooks) {
		if p != "" && !slices.Contains(list, p) {
			list = append(list, p)
		}
	}
	return list
}
