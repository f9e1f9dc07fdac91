//go:build !unix

package obs

import "time"

// ProcessCPU is unknown here: callers leave their CPU figures out.
func ProcessCPU() (time.Duration, bool) { return 0, false }
