package embed

import "unicode/utf8"

// FNV-1a (the same function as hash/fnv) written out so that features can be hashed
// without allocating a hash.Hash or a joined string per feature. FNV has no seed, so
// a feature lands on the same index in every process: vectors written by one run of
// agentmem stay comparable with queries embedded by the next.
const (
	fnvOffset32 = 2166136261
	fnvPrime32  = 16777619
	fnvOffset64 = 14695981039346656037
	fnvPrime64  = 1099511628211
)

// fnv32a is FNV-1a 32 of s.
func fnv32a(s string) uint32 {
	h := uint32(fnvOffset32)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= fnvPrime32
	}
	return h
}

// fnv64 is an FNV-1a 64 state that features are fed into piece by piece.
type fnv64 uint64

func newFNV64(kind byte) fnv64 { return fnv64(fnvOffset64).byte(kind) }

func (h fnv64) byte(b byte) fnv64 { return (h ^ fnv64(b)) * fnvPrime64 }

func (h fnv64) string(s string) fnv64 {
	for i := 0; i < len(s); i++ {
		h = h.byte(s[i])
	}
	return h
}

// rune feeds the UTF-8 encoding of r.
func (h fnv64) rune(r rune) fnv64 {
	var buf [utf8.UTFMax]byte
	for _, b := range utf8.AppendRune(buf[:0], r) {
		h = h.byte(b)
	}
	return h
}
