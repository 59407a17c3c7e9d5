package main

import (
	"runtime/debug"
	"strings"
)

// buildVersion is the module version corral was built at, or "devel".
func buildVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
}

// version is corral's version, from the build information.
func version() string {
	return strings.TrimPrefix(buildVersion(), "v")
}
