package agent

const archInputWait = true

func archSyscallKind(nr uint64) sysKind { return sysOther }
