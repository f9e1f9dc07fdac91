package retrieve

import "sync"

// fifoCache is a bounded map for per-session and per-namespace state of the hot
// path; when full, the oldest key is evicted first. It is safe for concurrent use.
type fifoCache[V any] struct {
	mu    sync.Mutex
	max   int
	byKey map[string]V
	order []string // insertion order, for eviction
}

func newFIFOCache[V any](max int) *fifoCache[V] {
	return &fifoCache[V]{max: max, byKey: make(map[string]V)}
}

func (c *fifoCache[V]) get(key string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.byKey[key]
	return v, ok
}

// put stores v under key. With replace false an existing value is kept (the
// first writer wins); a replaced key keeps its place in the eviction order.
func (c *fifoCache[V]) put(key string, v V, replace bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.byKey[key]; ok {
		if replace {
			c.byKey[key] = v
		}
		return
	}
	for len(c.order) >= c.max {
		delete(c.byKey, c.order[0])
		c.order = c.order[1:]
	}
	c.byKey[key] = v
	c.order = append(c.order, key)
}
