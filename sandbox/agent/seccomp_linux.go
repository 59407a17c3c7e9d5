package agent

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The agent confines itself, and so every command it starts (a seccomp filter
// is inherited across fork and exec and cannot be removed), with a filter that
// refuses to create a setuid or setgid file: chmod, fchmod, fchmodat, open and
// openat with O_CREAT or O_TMPFILE, creat and mknod with a set-id bit in their
// mode fail with EPERM. It also refuses a new user namespace (unshare and
// clone with CLONE_NEWUSER, EPERM): inside one of its own a process could
// drop its supplementary groups, and with them the marker that finds it.
// io_uring, openat2 and clone3, whose arguments a filter cannot see, fail with
// ENOSYS (programs fall back to the plain calls). The filter is the agent's
// own, so it holds on every backend that gives the sandbox a seccomp-capable
// kernel, gVisor included (where Docker's own profile, which refuses user
// namespaces under runc, does not apply).

// A BPF program for seccomp, assembled with symbolic jump targets.
type bpfProg struct {
	ins    []unix.SockFilter
	labels map[string]int
	fixes  []bpfFix
}

type bpfFix struct {
	at     int
	jt, jf string
}

func (p *bpfProg) label(name string) { p.labels[name] = len(p.ins) }

func (p *bpfProg) stmt(code uint16, k uint32) {
	p.ins = append(p.ins, unix.SockFilter{Code: code, K: k})
}

// jump adds a conditional jump; an empty label is the next instruction.
func (p *bpfProg) jump(code uint16, k uint32, jt, jf string) {
	p.fixes = append(p.fixes, bpfFix{at: len(p.ins), jt: jt, jf: jf})
	p.ins = append(p.ins, unix.SockFilter{Code: code, K: k})
}

func (p *bpfProg) assemble() ([]unix.SockFilter, error) {
	off := func(at int, name string) (uint8, error) {
		if name == "" {
			return 0, nil
		}
		to, ok := p.labels[name]
		if !ok {
			return 0, fmt.Errorf("bpf: no label %s", name)
		}
		d := to - at - 1
		if d < 0 || d > 255 {
			return 0, fmt.Errorf("bpf: jump to %s out of range", name)
		}
		return uint8(d), nil
	}
	for _, f := range p.fixes {
		var err error
		if p.ins[f.at].Jt, err = off(f.at, f.jt); err != nil {
			return nil, err
		}
		if p.ins[f.at].Jf, err = off(f.at, f.jf); err != nil {
			return nil, err
		}
	}
	return p.ins, nil
}

// setidRule says where a system call keeps its mode, and its open flags when
// the mode matters only for a creation (-1 when it always does).
type setidRule struct {
	nr          uint32
	mode, flags int
}

// sysTable is what the filter knows of one system call ABI.
type sysTable struct {
	arch   uint32
	setid  []setidRule
	flags  []flagRule
	enosys []uint32 // calls refused outright
	x32    bool     // reject the x32 ABI (numbers with bit 30 set)
}

// flagRule refuses a system call (EPERM) when its argument arg has any of
// bits.
type flagRule struct {
	nr, arg uint32
	bits    uint32
}

// cloneNewUser is CLONE_NEWUSER.
const cloneNewUser = 0x10000000

const (
	auditArchX86_64  = 0xc000003e
	auditArchI386    = 0x40000003
	auditArchAarch64 = 0xc00000b7

	setidBits  = unix.S_ISUID | unix.S_ISGID
	createBits = unix.O_CREAT | 0o20000000 // O_CREAT | __O_TMPFILE

	retAllow = unix.SECCOMP_RET_ALLOW
	retEPERM = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	retNoSys = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
)

var (
	tableAMD64 = sysTable{arch: auditArchX86_64, x32: true,
		setid: []setidRule{
			{90, 1, -1},  // chmod
			{91, 1, -1},  // fchmod
			{268, 2, -1}, // fchmodat
			{452, 2, -1}, // fchmodat2
			{2, 2, 1},    // open
			{257, 3, 2},  // openat
			{85, 1, -1},  // creat
			{133, 1, -1}, // mknod
			{259, 2, -1}, // mknodat
		},
		flags: []flagRule{
			{272, 0, cloneNewUser}, // unshare
			{56, 0, cloneNewUser},  // clone
		},
		enosys: []uint32{425, 426, 427, 437, 435}, // io_uring_setup, _enter, _register, openat2, clone3
	}
	table386 = sysTable{arch: auditArchI386,
		setid: []setidRule{
			{15, 1, -1},  // chmod
			{94, 1, -1},  // fchmod
			{306, 2, -1}, // fchmodat
			{452, 2, -1}, // fchmodat2
			{5, 2, 1},    // open
			{295, 3, 2},  // openat
			{8, 1, -1},   // creat
			{14, 1, -1},  // mknod
			{297, 2, -1}, // mknodat
		},
		flags: []flagRule{
			{310, 0, cloneNewUser}, // unshare
			{120, 0, cloneNewUser}, // clone
		},
		enosys: []uint32{425, 426, 427, 437, 435},
	}
	tableARM64 = sysTable{arch: auditArchAarch64,
		setid: []setidRule{
			{52, 1, -1},  // fchmod
			{53, 2, -1},  // fchmodat
			{452, 2, -1}, // fchmodat2
			{56, 3, 2},   // openat
			{33, 2, -1},  // mknodat
		},
		flags: []flagRule{
			{97, 0, cloneNewUser},  // unshare
			{220, 0, cloneNewUser}, // clone
		},
		enosys: []uint32{425, 426, 427, 437, 435},
	}
)

// Offsets in struct seccomp_data; an argument's low 32 bits (little endian).
const (
	offNr   = 0
	offArch = 4
	offArgs = 16
)

func argLow(i int) uint32 { return uint32(offArgs + 8*i) }

const (
	ldAbs = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
	jeq   = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
	jge   = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
	jset  = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
	ret   = unix.BPF_RET | unix.BPF_K
)

// setidFilter builds the filter for the given ABIs; any other ABI gets ENOSYS
// for every call.
func setidFilter(tables ...sysTable) ([]unix.SockFilter, error) {
	p := &bpfProg{labels: map[string]int{}}
	p.stmt(ldAbs, offArch)
	for i, t := range tables {
		p.jump(jeq, t.arch, fmt.Sprintf("abi%d", i), "")
	}
	p.stmt(ret, retNoSys)
	for i, t := range tables {
		p.label(fmt.Sprintf("abi%d", i))
		p.stmt(ldAbs, offNr)
		if t.x32 {
			p.jump(jge, 0x40000000, "nosys", "")
		}
		for j, r := range t.setid {
			p.jump(jeq, r.nr, fmt.Sprintf("r%d.%d", i, j), "")
		}
		for j, r := range t.flags {
			p.jump(jeq, r.nr, fmt.Sprintf("f%d.%d", i, j), "")
		}
		for _, nr := range t.enosys {
			p.jump(jeq, nr, "nosys", "")
		}
		p.stmt(ret, retAllow)
		for j, r := range t.setid {
			p.label(fmt.Sprintf("r%d.%d", i, j))
			if r.flags >= 0 {
				p.stmt(ldAbs, argLow(r.flags))
				p.jump(jset, createBits, "", "allow")
			}
			p.stmt(ldAbs, argLow(r.mode))
			p.jump(jset, setidBits, "eperm", "allow")
		}
		for j, r := range t.flags {
			p.label(fmt.Sprintf("f%d.%d", i, j))
			p.stmt(ldAbs, argLow(int(r.arg)))
			p.jump(jset, r.bits, "eperm", "allow")
		}
	}
	p.label("allow")
	p.stmt(ret, retAllow)
	p.label("eperm")
	p.stmt(ret, retEPERM)
	p.label("nosys")
	p.stmt(ret, retNoSys)
	return p.assemble()
}

// nativeTables are the ABIs of this architecture.
func nativeTables() ([]sysTable, bool) {
	switch runtime.GOARCH {
	case "amd64":
		return []sysTable{tableAMD64, table386}, true
	case "arm64":
		return []sysTable{tableARM64}, true
	}
	return nil, false
}

// confineSetid installs the filter on every thread of the agent; the commands
// inherit it.
func confineSetid() error {
	tables, ok := nativeTables()
	if !ok {
		return fmt.Errorf("no seccomp table for %s", runtime.GOARCH)
	}
	ins, err := setidFilter(tables...)
	if err != nil {
		return err
	}
	prog := unix.SockFprog{Len: uint16(len(ins)), Filter: &ins[0]}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	// seccomp needs no_new_privs (the engine sets it; set it anyway: TSYNC
	// gives it to every thread).
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	if _, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&prog))); e != 0 {
		return fmt.Errorf("seccomp: %w", e)
	}
	return nil
}
