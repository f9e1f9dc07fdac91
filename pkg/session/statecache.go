package session

import (
	"container/list"
	"maps"
	"slices"
	"sync"
)

// stateCache remembers, for the sessions this Store wrote last, the state it wrote
// and the revision the write got: the next batch of such a session folds into it
// and writes with one compare-and-set (one round trip) instead of reading the key
// first (two). A stale entry (another replica or a Delete wrote since) costs only
// the failed compare-and-set: the write then falls back to read-modify-write. It
// is bounded, least recently used first out; a State holds up to RecentMessages
// messages and AppliedWindow ids.
type stateCache struct {
	mu    sync.Mutex
	max   int
	order *list.List // of *cachedState, most recently used first
	byKey map[string]*list.Element
}

type cachedState struct {
	key      string
	revision uint64
	state    State
}

func newStateCache(max int) *stateCache {
	return &stateCache{max: max, order: list.New(), byKey: make(map[string]*list.Element)}
}

// get returns a copy of key's cached state and its revision.
func (c *stateCache) get(key string) (State, uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byKey[key]
	if !ok {
		return State{}, 0, false
	}
	c.order.MoveToFront(e)
	cs := e.Value.(*cachedState)
	return cs.state.clone(), cs.revision, true
}

// put remembers a copy of st as key's state at revision.
func (c *stateCache) put(key string, revision uint64, st State) {
	st = st.clone()
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byKey[key]; ok {
		c.order.MoveToFront(e)
		e.Value = &cachedState{key: key, revision: revision, state: st}
		return
	}
	c.byKey[key] = c.order.PushFront(&cachedState{key: key, revision: revision, state: st})
	if c.order.Len() > c.max {
		oldest := c.order.Back()
		c.order.Remove(oldest)
		delete(c.byKey, oldest.Value.(*cachedState).key)
	}
}

// forget drops key's entry.
func (c *stateCache) forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byKey[key]; ok {
		c.order.Remove(e)
		delete(c.byKey, key)
	}
}

// clone copies what fold changes in place (the slices and the role counts), so
// that folding into the copy leaves st as it was. Messages' Meta maps are shared:
// nothing changes them.
func (st State) clone() State {
	st.ByRole = maps.Clone(st.ByRole)
	st.Recent = slices.Clone(st.Recent)
	st.Applied = slices.Clone(st.Applied)
	return st
}
