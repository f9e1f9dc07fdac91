package app

import (
	"fmt"
	"runtime"
	"runtime/metrics"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/agentmem/agentmem/pkg/bus/bustest"
	"github.com/agentmem/agentmem/pkg/config"
)

func TestGCPercent(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		floor, live, roots uint64
		want               int
	}{
		{0, 10 * mib, mib, 100},             // off
		{128 * mib, 0, 0, 100},              // no cycle yet
		{128 * mib, 10 * mib, 0, 1180},      // goal 10 + 10 × 11.8 = 128 MiB
		{128 * mib, 6 * mib, 2 * mib, 1525}, // goal 6 + 8 × 15.25 = 128 MiB
		{128 * mib, 60 * mib, 8 * mib, 100}, // over half the floor: Go's default
		{128 * mib, 100 * mib, 0, 100},      // never below 100
		{128 * mib, 1, 0, 3200},             // the runtime's minimum goal, 4 MiB × GOGC/100
		{1024 * mib, 1, 0, maxGCPercent},    // bounded
	} {
		if got := gcPercent(tc.floor, tc.live, tc.roots); got != tc.want {
			t.Errorf("gcPercent(%d MiB, %d B, %d B) = %d, want %d", tc.floor/mib, tc.live, tc.roots, got, tc.want)
		}
	}
}

// readGC returns GOGC and the heap goal the runtime works with now.
func readGC() (gogc, goal uint64) {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}, {Name: "/gc/heap/goal:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64(), s[1].Value.Uint64()
}

// TestHeapFloor checks the policy on this test process's own collector: the
// goal follows the floor after each cycle, and turning the floor off or setting
// GOGC gives Go's default back.
func TestHeapFloor(t *testing.T) {
	const floor = 256 << 20
	t.Cleanup(func() { applyGCPolicy(config.Runtime{}, zap.NewNop()) })
	applyGCPolicy(config.Runtime{GCMinHeapMB: floor >> 20}, zap.NewNop())
	// A live heap grown after the floor was set: only a retune after the cycle
	// brings the goal back to the floor (the GOGC set for a ~2 MiB heap would
	// put it at gigabytes).
	live := make([]byte, 64<<20)
	defer runtime.KeepAlive(live)
	bustest.Eventually(t, 10*time.Second, func() error {
		runtime.GC() // the cleanup retunes after the cycle
		if gogc, goal := readGC(); gogc <= 100 || goal < floor*9/10 || goal > floor*11/10 {
			return fmt.Errorf("GOGC %d, heap goal %d MiB; want > 100 and a goal near %d MiB", gogc, goal>>20, floor>>20)
		}
		return nil
	})

	applyGCPolicy(config.Runtime{}, zap.NewNop())
	if gogc, _ := readGC(); gogc != 100 {
		t.Fatalf("floor off: GOGC %d, want 100", gogc)
	}
	runtime.GC()
	bustest.Eventually(t, 10*time.Second, func() error {
		if heapFloor.armed.Load() {
			runtime.GC()
			return fmt.Errorf("the after-GC hook is still armed with the floor off")
		}
		return nil
	})
	if gogc, _ := readGC(); gogc != 100 {
		t.Fatalf("floor off, after a cycle: GOGC %d, want 100", gogc)
	}

	t.Setenv("GOGC", "100")
	applyGCPolicy(config.Runtime{GCMinHeapMB: floor >> 20}, zap.NewNop())
	runtime.GC()
	if gogc, _ := readGC(); gogc != 100 || heapFloor.bytes.Load() != 0 {
		t.Fatalf("GOGC set in the environment: GOGC %d, floor %d; want both left alone", gogc, heapFloor.bytes.Load())
	}
}
