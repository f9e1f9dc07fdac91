package embedded

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentmem/agentmem/pkg/bm25"
	"github.com/agentmem/agentmem/pkg/embed"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// partKey names a (tenant, user) partition.
type partKey struct{ tenant, userID string }

// entry is one record of a loaded partition. It is laid out for the garbage
// collector, which marks every pointer of every loaded record on every cycle: the
// metadata is kept as its stored JSON and the terms as one string, so an entry
// is a handful of pointer-free allocations however nested its metadata is (a
// decoded map with its lists and strings was ~40 objects per record, and marking
// 100,000 records of them took GC mark phases of hundreds of milliseconds under
// load). Reads pay for it with one metadata decode per returned record
// (decodeMetadata).
//
// An entry is immutable once published: a write replaces the entry, so a record
// handed to a caller never changes under it.
type entry struct {
	rid int64
	rec vectorstore.Record // Metadata nil (see meta); Vector normalised, so cosine similarity is a plain dot product
	// meta is rec's Metadata as stored (encodeMetadata): the row's JSON, "" for nil.
	meta string
	// ts and expires are the stored microseconds the filters compare, exactly as
	// SQLite holds them (hasExpiry false for NULL).
	ts, expires int64
	hasExpiry   bool
	terms       string // bm25.Tokenize(rec.Text) joined by spaces (no term holds one), the sparse side; set by put
}

// newEntry builds the entry of rec, a record in its stored form (storedForm), whose
// metadata is meta (encodeMetadata). The vector is normalised into a fresh slice,
// so the caller's is never kept.
func newEntry(rid int64, rec vectorstore.Record, meta string) *entry {
	rec.Vector = slices.Clone(rec.Vector)
	embed.Normalize(rec.Vector)
	return newEntryNormalized(rid, rec, meta)
}

// newEntryNormalized is newEntry of a record whose Vector is normalised already
// (another entry's, which it may share: entries never change their vectors).
// Normalising a unit vector again could move its last bits.
func newEntryNormalized(rid int64, rec vectorstore.Record, meta string) *entry {
	e := &entry{rid: rid, rec: rec, meta: meta, ts: rec.TS.UnixMicro(), hasExpiry: !rec.ExpiresAt.IsZero()}
	if e.hasExpiry {
		e.expires = rec.ExpiresAt.UnixMicro()
	}
	e.rec.Metadata = nil
	// Refer to the memory type constant rather than keep a copy per record.
	if i := slices.Index(memoryTypes, rec.MemoryType); i >= 0 {
		e.rec.MemoryType = memoryTypes[i]
	}
	return e
}

var memoryTypes = []vectorstore.MemoryType{vectorstore.Episodic, vectorstore.Semantic, vectorstore.Item}

// record returns the entry's record as reads return it, with its own decoded
// Metadata.
func (e *entry) record() (vectorstore.Record, error) {
	r := e.rec
	md, err := decodeMetadata(e.meta)
	if err != nil {
		return vectorstore.Record{}, fmt.Errorf("record %s: cached metadata: %w", r.ID, err)
	}
	r.Metadata = md
	return r, nil
}

// partition is one (tenant, user) partition held in memory: every record, whole,
// so that reads never touch SQLite. Slot order is arbitrary (a removal moves the
// last slot into the hole).
//
// Writers hold cacheMu exclusively. Readers hold it shared; lazyMu lets the first
// reader after a write rebuild the derived views (BM25 index, id order) while
// others wait for it.
type partition struct {
	key     partKey // every entry's Tenant and UserID share these strings
	entries []*entry
	slot    map[int64]int  // rid → slot
	byID    map[string]int // id → slot

	lazyMu sync.Mutex
	ix     *bm25.Index // over the slots' terms; nil after a text changes
	order  []int       // slots in ascending id order; nil after a record comes or goes
}

func newPartition(k partKey) *partition {
	return &partition{key: k, slot: make(map[int64]int), byID: make(map[string]int)}
}

// put adds or replaces the record at rid; e is the partition's from now on. A
// replaced record whose text is unchanged (a payload update) keeps its terms
// rather than tokenizing the text again.
func (p *partition) put(e *entry) {
	e.rec.Tenant, e.rec.UserID = p.key.tenant, p.key.userID
	i, ok := p.slot[e.rid]
	if ok && p.entries[i].rec.Text == e.rec.Text {
		e.terms = p.entries[i].terms
	} else {
		e.terms = strings.Join(bm25.Tokenize(e.rec.Text), " ")
	}
	if !ok {
		p.slot[e.rid] = len(p.entries)
		p.byID[e.rec.ID] = len(p.entries)
		p.entries = append(p.entries, e)
		p.ix, p.order = nil, nil
		return
	}
	old := p.entries[i]
	p.entries[i] = e
	if old.rec.Text != e.rec.Text {
		p.ix = nil
	}
}

// remove drops rid by moving the last slot into its place.
func (p *partition) remove(rid int64) {
	i, ok := p.slot[rid]
	if !ok {
		return
	}
	gone := p.entries[i]
	last := len(p.entries) - 1
	if i != last {
		moved := p.entries[last]
		p.entries[i] = moved
		p.slot[moved.rid] = i
		p.byID[moved.rec.ID] = i
	}
	p.entries[last] = nil
	p.entries = p.entries[:last]
	delete(p.slot, rid)
	delete(p.byID, gone.rec.ID)
	p.ix, p.order = nil, nil
}

// index returns the BM25 index over the partition's texts, building it after a
// write. The caller holds cacheMu (shared suffices).
func (p *partition) index() *bm25.Index {
	p.lazyMu.Lock()
	defer p.lazyMu.Unlock()
	if p.ix == nil {
		docs := make([][]string, len(p.entries))
		for i, e := range p.entries {
			docs[i] = strings.Fields(e.terms)
		}
		p.ix = bm25.NewIndex(docs, bm25.DefaultParams())
	}
	return p.ix
}

// sorted returns the slots in ascending id order, building it after a record came
// or went. The caller holds cacheMu (shared suffices).
func (p *partition) sorted() []int {
	p.lazyMu.Lock()
	defer p.lazyMu.Unlock()
	if p.order == nil {
		p.order = make([]int, len(p.entries))
		for i := range p.order {
			p.order[i] = i
		}
		slices.SortFunc(p.order, func(a, b int) int { return cmp.Compare(p.entries[a].rec.ID, p.entries[b].rec.ID) })
	}
	return p.order
}

// selectEntries returns the entries m selects with id ≥ from, in id order, at most
// limit (negative: all). The caller holds cacheMu.
func (p *partition) selectEntries(m *matcher, from string, limit int) []*entry {
	var out []*entry
	if m.ids != nil {
		// A few ids: look them up rather than walk the partition.
		for _, id := range m.ids {
			if i, ok := p.byID[id]; ok && id >= from && m.match(p.entries[i]) && !slices.Contains(out, p.entries[i]) {
				out = append(out, p.entries[i])
			}
		}
		slices.SortFunc(out, func(a, b *entry) int { return cmp.Compare(a.rec.ID, b.rec.ID) })
		if limit >= 0 && len(out) > limit {
			out = out[:limit]
		}
		return out
	}
	order := p.sorted()
	start, _ := slices.BinarySearchFunc(order, from, func(slot int, from string) int { return cmp.Compare(p.entries[slot].rec.ID, from) })
	for _, i := range order[start:] {
		if limit >= 0 && len(out) == limit {
			break
		}
		if e := p.entries[i]; m.match(e) {
			out = append(out, e)
		}
	}
	return out
}

// candidates returns the slots m selects, in slot order. The caller holds cacheMu.
func (p *partition) candidates(m *matcher) []int {
	if m.ids != nil {
		var out []int
		for _, id := range m.ids {
			if i, ok := p.byID[id]; ok && m.match(p.entries[i]) && !slices.Contains(out, i) {
				out = append(out, i)
			}
		}
		slices.Sort(out)
		return out
	}
	out := make([]int, 0, len(p.entries))
	for i, e := range p.entries {
		if m.match(e) {
			out = append(out, i)
		}
	}
	return out
}

// matcher is a normalised Filter compiled for matching entries in memory. Its
// semantics are whereFilter's, which stays the definition for the SQL writes.
type matcher struct {
	f            vectorstore.Filter
	ids          []string // f.IDs; nil when not constrained
	since, until int64    // stored microseconds; 0 when not constrained
	hasSince     bool
	hasUntil     bool
	payload      []payloadCond
	now          int64
}

type payloadCond struct {
	key  string
	want any // string, bool or int64 (PayloadValue)
}

// newMatcher compiles f, which has been normalised.
func newMatcher(f vectorstore.Filter, now time.Time) *matcher {
	m := &matcher{f: f, ids: f.IDs, now: now.UnixMicro()}
	if !f.Since.IsZero() {
		m.since, m.hasSince = ceilMicro(f.Since), true
	}
	if !f.Until.IsZero() {
		m.until, m.hasUntil = ceilMicro(f.Until), true
	}
	for k, v := range f.Payload {
		want, _ := vectorstore.PayloadValue(v) // Normalize checked it
		m.payload = append(m.payload, payloadCond{k, want})
	}
	return m
}

func (m *matcher) match(e *entry) bool {
	r, f := &e.rec, &m.f
	if len(f.MemoryTypes) > 0 && !slices.Contains(f.MemoryTypes, r.MemoryType) {
		return false
	}
	if m.hasSince && e.ts < m.since || m.hasUntil && e.ts >= m.until {
		return false
	}
	if f.ChatID != "" && r.ChatID != f.ChatID || f.Who != "" && r.Who != f.Who || f.Scope != "" && r.Scope != f.Scope ||
		f.Kind != "" && r.Kind != f.Kind || f.Key != "" && r.Key != f.Key {
		return false
	}
	if len(m.payload) > 0 {
		// Payload conditions are rare (no read path of the services uses one):
		// decoding the metadata for them keeps the entries free of it.
		md, err := decodeMetadata(e.meta)
		if err != nil {
			return false
		}
		for _, c := range m.payload {
			if !payloadMatches(md[c.key], c.want) {
				return false
			}
		}
	}
	expired := e.hasExpiry && e.expires <= m.now
	switch {
	case f.ExpiredOnly:
		return expired
	case !f.IncludeExpired:
		return !expired
	}
	return true
}

// payloadMatches compares a decoded metadata value with a condition value the way
// whereFilter does in SQL: strings and booleans by type and value, integers
// against any JSON number of that value.
func payloadMatches(got, want any) bool {
	switch w := want.(type) {
	case string:
		g, ok := got.(string)
		return ok && g == w
	case bool:
		g, ok := got.(bool)
		return ok && g == w
	case int64:
		g, ok := got.(float64)
		return ok && g == float64(w)
	}
	return false
}

// dot is unrolled by four: the compiler keeps four independent sums in registers,
// which roughly doubles throughput over the naive loop.
func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return s0 + s1 + s2 + s3
}
