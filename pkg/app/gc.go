package app

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/agentmem/agentmem/pkg/config"
)

// maxGCPercent bounds the GOGC the heap floor sets: a floor of hundreds of MiB
// over a live heap of a few MiB.
const maxGCPercent = 10_000

// heapFloor is the process's garbage collector policy (runtime.gc_min_heap_mb):
// after every cycle GOGC is set so that the next one starts near the floor
// (the collector's goal is live + (live + stacks + globals) × GOGC/100), and
// never below GOGC=100, so a live heap over half the floor is collected as Go
// does by default. A memory limit
// (GOMEMLIMIT) still caps the heap.
//
// Written here rather than taken from a library: github.com/bytedance/gopkg's
// gctuner computes GOGC from HeapInuse read right after a cycle, which still
// counts the garbage not yet swept; in the bench its goals stayed at 30–49 MiB
// for a 128 MiB floor. The live heap the collector itself sizes its goal from
// is /gc/heap/live:bytes.
var heapFloor struct {
	bytes atomic.Uint64 // 0: off
	armed atomic.Bool   // a cleanup waits for the next cycle
	mu    sync.Mutex    // serialises retuneGC, whose last SetGCPercent wins
}

// gcSentinel's only job is to become garbage: its cleanup runs after the cycle
// that found it unreachable. The pointer keeps it out of the tiny allocator,
// whose objects may never be cleaned up.
type gcSentinel struct{ _ *byte }

// applyGCPolicy sets the heap floor of rt unless the environment sets GOGC. The
// collector is process-wide: the last Runtime configured wins.
func applyGCPolicy(rt config.Runtime, logger *zap.Logger) {
	if gogc, set := os.LookupEnv("GOGC"); set {
		logger.Debug("GOGC is set; runtime.gc_min_heap_mb is ignored", zap.String("gogc", gogc))
		return
	}
	heapFloor.bytes.Store(uint64(rt.GCMinHeapMB) << 20)
	retuneGC()
	if rt.GCMinHeapMB > 0 && heapFloor.armed.CompareAndSwap(false, true) {
		afterNextGC()
	}
}

// afterNextGC retunes after the next cycle and again after each one, until the
// floor is off.
func afterNextGC() {
	runtime.AddCleanup(new(gcSentinel), func(struct{}) {
		retuneGC()
		if heapFloor.bytes.Load() == 0 {
			heapFloor.armed.Store(false)
			return
		}
		afterNextGC()
	}, struct{}{})
}

// retuneGC sets GOGC from the floor and the live heap of the last cycle.
func retuneGC() {
	heapFloor.mu.Lock()
	defer heapFloor.mu.Unlock()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/scan/stack:bytes"}, {Name: "/gc/scan/globals:bytes"}}
	metrics.Read(s)
	debug.SetGCPercent(gcPercent(heapFloor.bytes.Load(), s[0].Value.Uint64(), s[1].Value.Uint64()+s[2].Value.Uint64()))
}

// minHeapPerGOGC is the runtime's smallest heap goal at GOGC=100 (4 MiB); the
// goal never falls below it scaled by GOGC/100.
const minHeapPerGOGC = 4 << 20

// gcPercent is the GOGC whose goal, for a live heap of live bytes and roots
// bytes of stacks and globals, is floor, within [100, maxGCPercent].
func gcPercent(floor, live, roots uint64) int {
	if live == 0 || floor <= 2*live+roots {
		return 100
	}
	return int(max(100, min((floor-live)*100/(live+roots), floor*100/minHeapPerGOGC, maxGCPercent)))
}
