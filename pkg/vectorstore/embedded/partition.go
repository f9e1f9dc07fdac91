package embedded

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
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
	doc         int32  // its number in the partition (partition.docs); set by put
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

// tokenize sets e's terms from its text, unless they are set.
func (e *entry) tokenize() {
	if e.terms == "" && e.rec.Text != "" {
		e.terms = strings.Join(bm25.Tokenize(e.rec.Text), " ")
	}
}

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
// so that reads never touch SQLite, and an inverted BM25 index over their texts
// kept up to date by every write, so that a keyword search costs the postings of
// the query's terms rather than a pass over the partition.
//
// Records live in docs, numbered in the order they came: a record keeps its doc
// number while its text, memory type and vector stay (a payload update swaps the
// entry in place), and gets a new one when any changes; the old number is then
// dead (nil), and so are a removed record's. Postings and graph nodes of dead
// docs are skipped by searches; compaction, which renumbers the docs once the
// dead ones outnumber the live (amortised O(1) per write), drops the postings
// and starts the graphs over.
//
// Writers hold cacheMu exclusively. Readers hold it shared; lazyMu lets the first
// reader after a write rebuild the id orders while others wait for it.
type partition struct {
	key  partKey // every entry's Tenant and UserID share these strings
	docs []*entry
	// kinds[d] is docs[d]'s typeSlot, deadKind once it is dead: a search checks
	// the memory type of the records a posting list reaches here, in one
	// contiguous array, rather than in each record.
	kinds []uint8
	// rids[d] is docs[d]'s rid (kept when it dies): a sparse search offers
	// the top k the rid of every doc that reaches its floor, to order ties, and
	// reading it from the entry cost a cache miss per doc (about half of the
	// ranking's CPU in one namespace of 100,000 records, BENCHMARKS.md).
	rids []int64
	live int
	// kindLive[t] counts the live docs of slot t.
	kindLive [indexKinds + 1]int
	byRID    map[int64]int32  // rid → doc
	byID     map[string]int32 // id → doc
	lex      lexIndex
	// ann[t] is slot t's graph (annIndex), nil until a dense search finds
	// annMin records of it (0: never). Atomic: a search sets it, the indexer
	// reads it, both holding cacheMu shared.
	ann    [indexKinds]atomic.Pointer[annIndex]
	annMin int
	// unsaved counts the graph nodes inserted (and graphs started over) since
	// the graph file was last written, savedNodes the nodes it then held
	// (graphfile.go).
	unsaved, savedNodes atomic.Int64

	// used is the store's clock at the last read (backend.touch), pins the
	// readers between loading it and reading it, evicted whether eviction
	// dropped it from the store's partitions (under cacheMu): see evict.go.
	used    atomic.Int64
	pins    atomic.Int32
	evicted bool

	lazyMu sync.Mutex
	// orders[t] holds the rids of memory type memoryTypes[t] in ascending id
	// order, orders[len(memoryTypes)] every rid; nil after a record of it came or
	// went.
	orders [4][]int64
}

const deadKind = 255

// newPartition returns an empty partition whose memory types get a graph from
// annMin records on (0: never).
func newPartition(k partKey, annMin int) *partition {
	return &partition{key: k, byRID: make(map[int64]int32), byID: make(map[string]int32), lex: newLexIndex(), annMin: annMin}
}

// typeSlot is t's index in orders; an unknown type shares the last (all).
func typeSlot(t vectorstore.MemoryType) int {
	if i := slices.Index(memoryTypes, t); i >= 0 {
		return i
	}
	return len(memoryTypes)
}

// put adds or replaces the record at rid; e is the partition's from now on. A
// replaced record whose text is unchanged (a payload update) keeps its terms
// rather than tokenizing the text again, and its doc number unless its vector
// changed (a graph holds the doc with its vector).
func (p *partition) put(e *entry) {
	e.rec.Tenant, e.rec.UserID = p.key.tenant, p.key.userID
	d, ok := p.byRID[e.rid]
	if ok {
		old := p.docs[d]
		if old.rec.Text == e.rec.Text {
			e.terms = old.terms
			if old.rec.MemoryType == e.rec.MemoryType && sameVector(old.rec.Vector, e.rec.Vector) {
				e.doc = d
				p.docs[d] = e
				return
			}
		}
		p.kill(d)
	}
	e.tokenize()
	e.doc = int32(len(p.docs))
	p.docs = append(p.docs, e)
	t := typeSlot(e.rec.MemoryType)
	p.kinds = append(p.kinds, uint8(t))
	p.rids = append(p.rids, e.rid)
	p.live++
	p.kindLive[t]++
	p.byRID[e.rid] = e.doc
	p.byID[e.rec.ID] = e.doc
	p.lex.add(e.doc, e.terms)
	p.orders[typeSlot(e.rec.MemoryType)], p.orders[len(memoryTypes)] = nil, nil
	if ok {
		p.maybeCompact()
	}
}

// kill makes doc d dead; its rid and id are the caller's to drop or remap.
func (p *partition) kill(d int32) {
	old := p.docs[d]
	p.lex.remove(d, old.terms)
	p.docs[d] = nil
	p.kindLive[p.kinds[d]]--
	p.kinds[d] = deadKind
	p.live--
	p.orders[typeSlot(old.rec.MemoryType)], p.orders[len(memoryTypes)] = nil, nil
}

// remove drops rid.
func (p *partition) remove(rid int64) {
	d, ok := p.byRID[rid]
	if !ok {
		return
	}
	gone := p.docs[d]
	p.kill(d)
	delete(p.byRID, rid)
	delete(p.byID, gone.rec.ID)
	p.maybeCompact()
}

// maybeCompact renumbers the live docs when the dead ones outnumber them (and
// are more than a few), rebuilding the postings without the dead. Called after a
// write, with cacheMu held exclusively.
func (p *partition) maybeCompact() {
	dead := len(p.docs) - p.live
	if dead < 64 || dead <= p.live {
		return
	}
	docs := make([]*entry, 0, p.live)
	kinds := make([]uint8, 0, p.live)
	rids := make([]int64, 0, p.live)
	p.lex = newLexIndex()
	for d, e := range p.docs {
		if e == nil {
			continue
		}
		e.doc = int32(len(docs))
		docs = append(docs, e)
		kinds = append(kinds, p.kinds[d])
		rids = append(rids, e.rid)
		p.byRID[e.rid] = e.doc
		p.byID[e.rec.ID] = e.doc
		p.lex.add(e.doc, e.terms)
	}
	p.docs, p.kinds, p.rids = docs, kinds, rids
	// The graphs hold the old numbers: they are built again.
	for t := range indexKinds {
		if p.ann[t].Load() != nil {
			p.ann[t].Store(&annIndex{g: newHNSW()})
			p.unsaved.Add(1)
		}
	}
}

// sameVector reports whether a and b hold the same values: a payload update
// passes the cached vector itself, an upsert an equal copy.
func sameVector(a, b []float32) bool {
	return len(a) > 0 && len(a) == len(b) && &a[0] == &b[0] || slices.Equal(a, b)
}

// sorted returns the rids of memory type slot t (typeSlot) in ascending id
// order, building it after a record of it came or went. The caller holds cacheMu
// (shared suffices).
func (p *partition) sorted(t int) []int64 {
	p.lazyMu.Lock()
	defer p.lazyMu.Unlock()
	if p.orders[t] == nil {
		var es []*entry
		for _, e := range p.docs {
			if e != nil && (t == len(memoryTypes) || typeSlot(e.rec.MemoryType) == t) {
				es = append(es, e)
			}
		}
		slices.SortFunc(es, func(a, b *entry) int { return cmp.Compare(a.rec.ID, b.rec.ID) })
		order := make([]int64, len(es))
		for i, e := range es {
			order[i] = e.rid
		}
		p.orders[t] = order
	}
	return p.orders[t]
}

// entryOf returns rid's entry; rid must be in the partition.
func (p *partition) entryOf(rid int64) *entry { return p.docs[p.byRID[rid]] }

// selectEntries returns the entries m selects with id ≥ from, in id order, at most
// limit (negative: all). The caller holds cacheMu. A filter of one memory type
// walks that type's records only.
func (p *partition) selectEntries(m *matcher, from string, limit int) []*entry {
	var out []*entry
	if m.ids != nil {
		// A few ids: look them up rather than walk the partition.
		for _, id := range m.ids {
			if d, ok := p.byID[id]; ok && id >= from && m.match(p.docs[d]) && !slices.Contains(out, p.docs[d]) {
				out = append(out, p.docs[d])
			}
		}
		slices.SortFunc(out, func(a, b *entry) int { return cmp.Compare(a.rec.ID, b.rec.ID) })
		if limit >= 0 && len(out) > limit {
			out = out[:limit]
		}
		return out
	}
	t := len(memoryTypes)
	if len(m.f.MemoryTypes) == 1 {
		t = typeSlot(m.f.MemoryTypes[0])
	}
	order := p.sorted(t)
	start, _ := slices.BinarySearchFunc(order, from, func(rid int64, from string) int { return cmp.Compare(p.entryOf(rid).rec.ID, from) })
	for _, rid := range order[start:] {
		if limit >= 0 && len(out) == limit {
			break
		}
		if e := p.entryOf(rid); m.match(e) {
			out = append(out, e)
		}
	}
	return out
}

// candidates returns the docs m selects, in doc order. The caller holds cacheMu.
func (p *partition) candidates(m *matcher) []int32 {
	if m.ids != nil {
		var out []int32
		for _, id := range m.ids {
			if d, ok := p.byID[id]; ok && m.match(p.docs[d]) && !slices.Contains(out, d) {
				out = append(out, d)
			}
		}
		slices.Sort(out)
		return out
	}
	out := make([]int32, 0, p.live)
	for d, e := range p.docs {
		if k := p.kinds[d]; k != deadKind && m.kinds[k] && (m.typeOnly || m.match(e)) {
			out = append(out, int32(d))
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
	// kinds[t] is whether memory type slot t passes; typeOnly whether the
	// memory type is all the filter checks (besides ids), so a record's kind
	// decides without reading it.
	kinds    [4]bool
	typeOnly bool
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
	for t := range m.kinds {
		m.kinds[t] = len(f.MemoryTypes) == 0
	}
	for _, t := range f.MemoryTypes {
		if i := slices.Index(memoryTypes, t); i >= 0 {
			m.kinds[i] = true
		}
	}
	m.typeOnly = !m.hasSince && !m.hasUntil && f.ChatID == "" && f.Who == "" && f.Scope == "" && f.Kind == "" && f.Key == "" &&
		len(m.payload) == 0 && f.IncludeExpired && !f.ExpiredOnly
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
