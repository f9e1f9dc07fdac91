package docstore

import (
	"io/fs"
	"syscall"
	"time"
)

// inodeAndCtime returns the inode number and change time of a stat result.
func inodeAndCtime(fi fs.FileInfo) (uint64, time.Time) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, time.Time{}
	}
	return st.Ino, time.Unix(st.Ctim.Unix())
}
