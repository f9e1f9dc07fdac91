package session

import (
	"fmt"
	"maps"
	"slices"

	lru "github.com/hashicorp/golang-lru/v2"
)

// stateCache remembers, for the sessions this Store wrote or read last, the state
// and its revision: the next batch of such a session folds into it and writes
// with one compare-and-set (one round trip) instead of reading the key first
// (two), and Get of an unchanged state copies it instead of decoding the KV value.
// A stale entry (another replica or a Delete wrote since) costs only the failed
// compare-and-set: the write then falls back to read-modify-write. It
// is a bounded LRU (hashicorp/golang-lru); a State holds up to RecentMessages
// messages and AppliedWindow ids. States go in and come out as copies, so folding
// into one never changes the cached state.
type stateCache struct {
	lru *lru.Cache[string, cachedState]
}

type cachedState struct {
	revision uint64
	state    State
}

func newStateCache(max int) (*stateCache, error) {
	c, err := lru.New[string, cachedState](max)
	if err != nil {
		return nil, fmt.Errorf("session: state cache: %w", err)
	}
	return &stateCache{lru: c}, nil
}

// get returns a copy of key's cached state and its revision.
func (c *stateCache) get(key string) (State, uint64, bool) {
	cs, ok := c.lru.Get(key)
	if !ok {
		return State{}, 0, false
	}
	return cs.state.clone(), cs.revision, true
}

// put remembers a copy of st as key's state at revision.
func (c *stateCache) put(key string, revision uint64, st State) {
	c.lru.Add(key, cachedState{revision: revision, state: st.clone()})
}

// putIfNewer remembers a copy of st as key's state at revision unless a later
// revision is cached: a read racing a write must not replace the state the write
// cached with an older one (the next write's compare-and-set would fail on it).
// Between the check and the add a write may still slip in; that costs the next
// write one failed compare-and-set, nothing else.
func (c *stateCache) putIfNewer(key string, revision uint64, st State) {
	if cs, ok := c.lru.Peek(key); ok && cs.revision >= revision {
		return
	}
	c.put(key, revision, st)
}

// forget drops key's entry.
func (c *stateCache) forget(key string) { c.lru.Remove(key) }

// clone copies what fold changes in place (the slices and the role counts), so
// that folding into the copy leaves st as it was. Messages' Meta maps are shared:
// nothing changes them.
func (st State) clone() State {
	st.ByRole = maps.Clone(st.ByRole)
	st.Recent = slices.Clone(st.Recent)
	st.Applied = slices.Clone(st.Applied)
	return st
}
