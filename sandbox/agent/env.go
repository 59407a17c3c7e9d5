package agent

import (
	"os"
	"slices"
	"strings"
)

// withDefaults adds each NAME=VALUE of defs whose name env does not set.
func withDefaults(env, defs []string) []string {
	out := slices.Clone(env)
	for _, d := range defs {
		name, _, _ := strings.Cut(d, "=")
		if _, ok := envValue(env, name); !ok {
			out = append(out, d)
		}
	}
	return out
}

// envValue returns the value of variable name in env, the last one when it is
// there twice (as exec does).
func envValue(env []string, name string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// within reports whether path p is root or below it.
func within(root, p string) bool {
	if root == "/" {
		return strings.HasPrefix(p, "/")
	}
	return p == root || strings.HasPrefix(p, root+"/")
}

// executable reports whether fi is a regular file someone may execute.
func executable(fi os.FileInfo) bool {
	return fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}
