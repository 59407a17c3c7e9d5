// Package deps pins the modules the packages under construction will import, so
// that parallel work does not race on go.mod. Remove once every one is imported.
package deps

import (
	_ "github.com/BurntSushi/toml"
	_ "github.com/creack/pty"
	_ "github.com/docker/docker/client"
	_ "github.com/fsnotify/fsnotify"
	_ "github.com/modelcontextprotocol/go-sdk/mcp"
	_ "github.com/rogpeppe/go-internal/testscript"
	_ "github.com/sergi/go-diff/diffmatchpatch"
	_ "golang.org/x/sys/unix"
	_ "golang.org/x/term"
	_ "mvdan.cc/sh/v3/syntax"
)
