package agent

import (
	"os"
	"strings"

	"github.com/corralhq/corral/sandbox/internal/envpath"
)

// executable reports whether fi is a regular file someone may execute.
func executable(fi os.FileInfo) bool {
	return fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// inheritedEnv is the agent's own environment without what the cluster
// injects (KUBERNETES_*), with set over it and a PATH and LANG where none
// is set.
func inheritedEnv(own, set []string) []string {
	var env []string
	for _, kv := range own {
		if !strings.HasPrefix(kv, "KUBERNETES_") {
			env = append(env, kv)
		}
	}
	env = envpath.With(env, set)
	return envpath.WithDefaults(env, []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"})
}
