//go:build !unix

package embedded

import "os"

// fileIDs: without an inode the database file's identity is not known well
// enough, and partition files are never trusted.
func fileIDs(os.FileInfo) (dev, ino uint64, ok bool) { return 0, 0, false }
