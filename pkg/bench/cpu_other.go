//go:build !unix

package bench

import "time"

// processCPU is unknown here: the CPU figures are left out.
func processCPU() (time.Duration, bool) { return 0, false }
