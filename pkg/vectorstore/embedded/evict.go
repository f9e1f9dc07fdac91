package embedded

import (
	"cmp"
	"slices"

	"go.uber.org/zap"
)

// Eviction: the loaded partitions are bounded by Config.MaxLoadedRecords.
// Once their records are more than that (after a load, or after a write that
// grew a loaded partition), the least recently read partitions are dropped
// until they are not; a dropped partition is loaded again from SQLite on its
// next read, like one never read. Writes always go to SQLite first and reach a
// partition only while it is in parts, so a reloaded partition holds every
// write made to it, evicted or not (TestPropertyEvictionKeepsEveryWrite).
//
// Never dropped: the most recently read partition with records (one partition
// larger than the budget is kept rather than loaded again on every read), a partition a
// reader has pinned between its load and its read (read), and partitions
// without records, which the empty-partition cache bounds instead (keepEmpty):
// dropping them frees no record of the budget.
//
// A dropped partition's graphs are saved first if they changed since their
// file was written, so that its next load restores them rather than building
// them again; once it is out of parts nothing saves it (saveGraphs skips an
// evicted partition, which an erasure may have made stale) and the indexer
// forgets it.
//
// Locks: evictMu serialises evictions, and comes before graphMu and cacheMu;
// it is never taken with writeMu or cacheMu held, so eviction runs after a
// read or write has released them. The partitions are dropped under cacheMu
// held exclusively: a reader holds cacheMu shared while it reads a partition,
// a write holds it exclusively while it changes one, and a load publishes its
// partition under writeMu and cacheMu, so none of them sees a partition
// leave under it.

// DefaultMaxLoadedRecords is Config.MaxLoadedRecords' default. A loaded
// record costs about 2.6 KB of heap at 384 dimensions (Store), and measured
// ~4.4 KB of RSS in agentmem bench at 1,000,000 memories over 1,000 users
// (1,062 MB at 150,000, against 397 MB without its fleet phase, which reads
// every user; 3,910 MB with every partition kept): 100,000 keeps that run
// under its 1 GB target, and one namespace of 100,000 records stays loaded
// (the most recently read partition always does).
const DefaultMaxLoadedRecords = 100_000

// touch marks p as read now, for the least-recently-read order. The caller
// holds cacheMu (shared suffices).
func (s *backend) touch(p *partition) { p.used.Store(s.clock.Add(1)) }

// overBudget reports whether the loaded partitions hold more records than
// Config.MaxLoadedRecords allows.
func (s *backend) overBudget() bool {
	if s.cfg.MaxLoadedRecords < 0 {
		return false
	}
	s.cacheMu.RLock()
	defer s.cacheMu.RUnlock()
	return s.loaded > s.cfg.MaxLoadedRecords
}

// evict drops the least recently read partitions while the loaded ones hold
// more records than Config.MaxLoadedRecords (see the top of this file). The
// caller holds no lock.
func (s *backend) evict() {
	if !s.overBudget() {
		return
	}
	s.evictMu.Lock()
	defer s.evictMu.Unlock()
	if s.closed.Load() {
		return
	}
	victims := s.pickVictims()
	for _, v := range victims {
		if v.p.unsaved.Load() > 0 {
			s.saveGraphsLogged(v.p)
		}
	}
	s.cacheMu.Lock()
	defer s.cacheMu.Unlock()
	for _, v := range victims {
		p := v.p
		// A partition read again since it was picked is kept.
		if s.loaded <= s.cfg.MaxLoadedRecords || s.parts[p.key] != p || p.pins.Load() > 0 || p.used.Load() != v.used {
			continue
		}
		delete(s.parts, p.key)
		s.loaded -= p.live
		p.evicted = true
		s.indexer.forget(p)
		s.evictions.Add(1)
		s.logger.Debug("partition evicted", zap.Int("records", p.live), zap.Int("loaded_records", s.loaded))
	}
}

// victim is a partition picked for eviction and its read stamp at the pick.
type victim struct {
	p    *partition
	used int64
}

// pickVictims returns the partitions to drop, least recently read first, as
// many as bring the loaded records within the budget.
func (s *backend) pickVictims() []victim {
	s.cacheMu.RLock()
	defer s.cacheMu.RUnlock()
	var cands []victim
	for _, p := range s.parts {
		if p.live > 0 && p.pins.Load() == 0 {
			cands = append(cands, victim{p, p.used.Load()})
		}
	}
	slices.SortFunc(cands, func(a, b victim) int { return cmp.Compare(a.used, b.used) })
	if len(cands) > 0 {
		cands = cands[:len(cands)-1] // the most recently read is kept
	}
	excess := s.loaded - s.cfg.MaxLoadedRecords
	for i, v := range cands {
		if excess <= 0 {
			return cands[:i]
		}
		excess -= v.p.live
	}
	return cands
}
