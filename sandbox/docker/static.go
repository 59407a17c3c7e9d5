package docker

import (
	"debug/elf"
	"fmt"
	"os"

	"github.com/corralhq/corral/sandbox"
)

// checkAgent verifies that path is a Linux executable that can run in any
// image: static, or dynamically linked with a loader and libraries found on
// this host (then rt says what to mount and how to start it). It returns the
// ELF machine for a later check against the engine's architecture.
func checkAgent(path string) (elf.Machine, *agentRuntime, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, nil, &sandbox.AgentError{Path: path, Reason: err.Error()}
	}
	if !executable(fi) {
		return 0, nil, &sandbox.AgentError{Path: path, Reason: "not an executable file"}
	}
	f, err := elf.Open(path)
	if err != nil {
		return 0, nil, &sandbox.AgentError{Path: path, Reason: "not a Linux executable (the agent runs inside the container): " + err.Error()}
	}
	defer f.Close()
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return 0, nil, &sandbox.AgentError{Path: path, Reason: "not an executable"}
	}
	rt, err := dynamicRuntime(path, f)
	if err != nil {
		return 0, nil, &sandbox.AgentError{Path: path, Reason: "dynamically linked, and " + err.Error() + "; build corral with CGO_ENABLED=0 to make it static"}
	}
	return f.Machine, rt, nil
}

// executable reports whether fi is a regular file someone may execute.
func executable(fi os.FileInfo) bool {
	return fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// engineMachine maps the engine's architecture name to an ELF machine.
func engineMachine(arch string) (elf.Machine, bool) {
	switch arch {
	case "x86_64", "amd64":
		return elf.EM_X86_64, true
	case "aarch64", "arm64":
		return elf.EM_AARCH64, true
	case "i386", "i686", "386":
		return elf.EM_386, true
	case "armv7l", "arm":
		return elf.EM_ARM, true
	case "riscv64":
		return elf.EM_RISCV, true
	case "s390x":
		return elf.EM_S390, true
	case "ppc64le":
		return elf.EM_PPC64, true
	}
	return 0, false
}

func checkMachine(path string, m elf.Machine, engineArch string) error {
	want, ok := engineMachine(engineArch)
	if ok && want != m {
		return &sandbox.AgentError{Path: path, Reason: fmt.Sprintf("built for %v, but the Docker engine runs %s", m, engineArch)}
	}
	return nil
}
