package sandbox

import (
	"syscall"

	"github.com/corralhq/corral/sandbox/proto"
)

// statT is the agent's description of a file as stat(2) gives it here, so
// that a remote FileInfo's Sys is what a local one's is.
func statT(in *proto.FSInfo) any {
	st := &syscall.Stat_t{}
	st.Dev, st.Ino = in.Dev, in.Ino
	setNum(&st.Nlink, in.Nlink)
	st.Mode, st.Uid, st.Gid = in.RawMode, in.UID, in.GID
	st.Rdev = in.Rdev
	st.Size = in.Size
	setNum(&st.Blksize, uint64(in.Blksize))
	st.Blocks = in.Blocks
	st.Atim = syscall.NsecToTimespec(in.Atime)
	st.Mtim = syscall.NsecToTimespec(in.Mtime)
	st.Ctim = syscall.NsecToTimespec(in.Ctime)
	return st
}

// setNum sets a field whose width differs between architectures.
func setNum[T ~int32 | ~int64 | ~uint32 | ~uint64](p *T, v uint64) { *p = T(v) }
