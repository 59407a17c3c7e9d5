// Package envpath holds the small helpers for environment lists and paths that
// both sides of the sandbox — the host's Docker backend and the in-container
// agent — need.
package envpath

import (
	"slices"
	"strings"
)

// WithDefaults adds each NAME=VALUE of defs whose name env does not set.
func WithDefaults(env, defs []string) []string {
	out := slices.Clone(env)
	for _, d := range defs {
		name, _, _ := strings.Cut(d, "=")
		if _, ok := Value(env, name); !ok {
			out = append(out, d)
		}
	}
	return out
}

// Value returns the value of variable name in env, the last one when it is
// there twice (as exec does).
func Value(env []string, name string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// Within reports whether path p is root or below it.
func Within(root, p string) bool {
	if root == "/" {
		return strings.HasPrefix(p, "/")
	}
	return p == root || strings.HasPrefix(p, root+"/")
}

// With returns env with each NAME=VALUE of set in place of the variable of
// that name, or added after it.
func With(env, set []string) []string {
	out := slices.Clone(env)
	for _, kv := range set {
		name, _, _ := strings.Cut(kv, "=")
		out = slices.DeleteFunc(out, func(e string) bool { return strings.HasPrefix(e, name+"=") })
		out = append(out, kv)
	}
	return out
}
