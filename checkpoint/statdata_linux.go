package checkpoint

import "golang.org/x/sys/unix"

// statDataOf is the stat data git keeps in an index entry for the file st
// describes.
func statDataOf(st *unix.Stat_t) statData {
	return statData{
		ok:     true,
		ctimeS: uint32(st.Ctim.Sec), ctimeNs: uint32(st.Ctim.Nsec),
		mtimeS: uint32(st.Mtim.Sec), mtimeNs: uint32(st.Mtim.Nsec),
		dev: uint32(st.Dev), ino: uint32(st.Ino),
		uid: st.Uid, gid: st.Gid, size: uint32(st.Size),
	}
}

// sameStat says whether a and b, taken before and after a read, show the
// file unchanged.
func sameStat(a, b *unix.Stat_t) bool {
	return a.Size == b.Size && a.Mtim == b.Mtim && a.Ctim == b.Ctim && a.Ino == b.Ino && a.Dev == b.Dev
}
