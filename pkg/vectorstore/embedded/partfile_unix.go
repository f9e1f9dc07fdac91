//go:build unix

package embedded

import (
	"os"
	"syscall"
)

// fileIDs returns the device and inode of a file, which a replaced file (a
// restore, a copy moved over it) does not keep.
func fileIDs(fi os.FileInfo) (dev, ino uint64, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return uint64(st.Dev), uint64(st.Ino), true //nolint:unconvert // Dev is int32 on some platforms
}
