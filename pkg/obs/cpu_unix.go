//go:build unix

package obs

import (
	"syscall"
	"time"
)

// ProcessCPU is the user and system CPU time the process has used so far; ok is
// false when the system does not say.
func ProcessCPU() (cpu time.Duration, ok bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
