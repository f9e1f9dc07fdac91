package embedded

// BenchEnvInt lets the external benchmarks read their sizes from the
// environment as the internal ones do.
var BenchEnvInt = benchEnvInt

// LoadedRecords counts the records of the partitions the store holds in
// memory, partition by partition (not the store's own count, which it checks).
func (s *Store) LoadedRecords() int {
	s.b.cacheMu.RLock()
	defer s.b.cacheMu.RUnlock()
	n := 0
	for _, p := range s.b.parts {
		n += p.live
	}
	return n
}

// Evictions is how many partitions the store has dropped.
func (s *Store) Evictions() int64 { return s.b.evictions.Load() }
