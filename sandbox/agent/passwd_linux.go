package agent

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ensureUser gives the commands' uid and gid names in the image's
// /etc/passwd and /etc/group when they have none: programs that ask who they
// run as (ssh and ssh-keygen refuse to start without an answer; whoami; some
// installers) then get one, "sandbox", with home as its home. Commands cannot
// change these files (they are not root). A read-only root leaves them as
// they are, and those programs fail as they would.
func ensureUser(uid, gid uint32, home string) error {
	shell := "/bin/sh"
	if _, err := os.Stat("/bin/bash"); err == nil {
		shell = "/bin/bash"
	}
	if err := addEntry("/etc/group", gid, fmt.Sprintf("sandbox:x:%d:\n", gid)); err != nil {
		return err
	}
	return addEntry("/etc/passwd", uid, fmt.Sprintf("sandbox:x:%d:%d:corral sandbox:%s:%s\n", uid, gid, home, shell))
}

// addEntry appends line to a passwd-style file unless an entry has id (its
// third field) already, or the name "sandbox" is taken (then the line is
// written under the name sandbox-ID).
func addEntry(path string, id uint32, line string) error {
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	name := "sandbox"
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Split(sc.Text(), ":")
		if len(f) < 3 {
			continue
		}
		if f[2] == strconv.FormatUint(uint64(id), 10) {
			return nil
		}
		if f[0] == name {
			name = "sandbox-" + strconv.FormatUint(uint64(id), 10)
		}
	}
	line = name + strings.TrimPrefix(line, "sandbox")
	if len(b) > 0 && b[len(b)-1] != '\n' {
		line = "\n" + line
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(line); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
