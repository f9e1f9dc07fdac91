// Package vectorstore is agentmem's store for episodic, semantic and item memories:
// one collection of records, each with a dense vector, a sparse (BM25) side over its
// text, and payload fields to filter on. Store is the interface; package embedded
// is the one-machine backend (SQLite + in-memory vectors), and package qdrant
// implements the same interface on Qdrant. Both implement Backend and hand out only
// the Store that Validating makes of it, so the argument checks of every call are
// made once, here, for every backend. Every backend must pass
// vectorstoretest.RunSuite.
//
// # Model
//
// Records are addressed by UUID (Qdrant's point ids); DeterministicID derives one from
// a record's source, so a redelivered event upserts the same record instead of
// adding a duplicate (TimeOrderedID too, for records of a moment, in time order).
// Every call is scoped to one (tenant, user) partition: both are required on every
// call and no call ever sees, counts, updates or deletes a record of another
// partition. An expired record (ExpiresAt in the past) is invisible to
// every read unless the filter asks for it (SPEC D4).
//
// # Search modes and scores
//
//   - Dense: cosine similarity between the query vector and the record vector, in
//     [-1, 1] (1 = same direction). Comparable across queries.
//   - Sparse: BM25 relevance of the record's text to Query.Text, over bm25.Tokenize
//     terms, plus each Query.Expansion term's BM25 part times its weight
//     (positive, higher is better; records sharing no term are not hits). Only
//     comparable within one query: IDF depends on the corpus (the partition in the
//     embedded store, the collection in Qdrant with the IDF modifier).
//   - Hybrid: reciprocal rank fusion, score = Σ 1/(60 + rank) over the dense and the
//     sparse ranking (rank 1-based; a list the record is not in adds nothing), each
//     ranking taken over the top 4×Limit of its side. At most 2/61 ≈ 0.0328.
//
// RRF is used because cosine and BM25 scores live on unrelated scales (bounded vs
// unbounded, query-independent vs corpus-dependent), so any weighted sum needs tuning
// per corpus and drifts as the corpus grows; ranks need no calibration. k = 60 is the
// constant of Cormack et al. (SIGIR 2009) (Qdrant's default k differs; the Qdrant backend sets k explicitly): large enough that
// the first few ranks of either list do not dominate, so a record ranked well by both
// sides beats one ranked first by only one.
package vectorstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/agentmem/agentmem/events"
	"github.com/google/uuid"
)

// Sentinel errors; backends wrap them with context.
var (
	// ErrNotFound reports a missing (or expired) record.
	ErrNotFound = errors.New("vectorstore: not found")
	// ErrInvalidFilter reports a filter or call scope that cannot be served: missing
	// or malformed tenant/user, a malformed id, an unknown memory type, a payload
	// condition on an unsupported key or value.
	ErrInvalidFilter = errors.New("vectorstore: invalid filter")
	// ErrInvalidQuery reports a query that cannot be run: unknown mode, missing
	// vector for a dense or hybrid search, a non-positive limit.
	ErrInvalidQuery = errors.New("vectorstore: invalid query")
	// ErrInvalidRecord reports a record that cannot be stored.
	ErrInvalidRecord = errors.New("vectorstore: invalid record")
	// ErrDimension reports a vector whose length is not the store's dimension count.
	ErrDimension = errors.New("vectorstore: dimension mismatch")
	// ErrConflict reports an upsert of an id that belongs to another tenant or user;
	// that record is left unchanged.
	ErrConflict = errors.New("vectorstore: id belongs to another tenant or user")
	// ErrInvalidConfig reports a backend configuration that cannot work.
	ErrInvalidConfig = errors.New("vectorstore: invalid config")
	// ErrClosed reports a call on a closed store.
	ErrClosed = errors.New("vectorstore: store closed")
)

// MemoryType is the kind of memory a record holds.
type MemoryType string

// The memory types.
const (
	Episodic MemoryType = "episodic"
	Semantic MemoryType = "semantic"
	Item     MemoryType = "item"
)

// Valid reports whether t is one of the memory types.
func (t MemoryType) Valid() bool { return t == Episodic || t == Semantic || t == Item }

// Record is one memory. Times are kept to the microsecond and returned in UTC.
type Record struct {
	// ID is a UUID; any form uuid.Parse accepts, returned in canonical lowercase form.
	ID         string
	Tenant     string
	UserID     string
	MemoryType MemoryType
	// Scope, Kind and Key address structured memory items (SPEC D1/D4); empty for
	// episodic and semantic memories.
	Scope, Kind, Key string
	// Text is what was embedded and what the sparse side indexes.
	Text string
	// Vector has the store's dimension count. Backends compare it by cosine; they
	// return it as stored.
	Vector     []float32
	TS         time.Time
	ChatID     string
	Who        string
	HitCount   int
	Confidence float64
	// ExpiresAt is when the record stops being visible; zero means never.
	ExpiresAt time.Time
	// Metadata is any JSON object; it comes back as encoding/json decodes it into
	// map[string]any (numbers as float64). A nil map comes back nil.
	Metadata map[string]any
}

// Filter selects records within one (tenant, user) partition. Zero-valued fields do
// not constrain.
type Filter struct {
	// Tenant and UserID are required on every call: they are the isolation boundary.
	Tenant, UserID string
	// MemoryTypes selects any of these types.
	MemoryTypes []MemoryType
	// IDs selects any of these ids.
	IDs []string
	// Since ≤ TS < Until.
	Since, Until time.Time
	ChatID, Who  string
	Scope, Kind  string
	Key          string
	// Payload is equality on top-level metadata fields. Keys are [A-Za-z0-9_-]
	// (1..128); values are strings, booleans or integers (what every backend can index
	// and match exactly; a float64 with an integral value counts as an integer).
	Payload map[string]any
	// IncludeExpired also selects expired records (default: an expired record is
	// never selected, SPEC D4).
	IncludeExpired bool
	// ExpiredOnly selects only records expired at the time of the call, for TTL
	// sweeps; it implies IncludeExpired.
	ExpiredOnly bool
}

// Mode is a search mode; the zero Mode is invalid so that every query says which
// side(s) it wants.
type Mode int

// Search modes; see the package documentation for the meaning of scores.
const (
	Dense Mode = iota + 1
	Sparse
	Hybrid
)

func (m Mode) String() string {
	switch m {
	case Dense:
		return "dense"
	case Sparse:
		return "sparse"
	case Hybrid:
		return "hybrid"
	}
	return "Mode(" + strconv.Itoa(int(m)) + ")"
}

// Query is a search within Filter.
type Query struct {
	Filter Filter
	// Vector is the dense query; required for Dense and Hybrid.
	Vector []float32
	// Text is the sparse (BM25) query; for Sparse and Hybrid. A text without index
	// terms matches nothing on the sparse side.
	Text string
	// Expansion adds sparse-side terms to Text's: index terms (bm25.Tokenize
	// terms, such as words meaning nearly what a query word means), each adding
	// Weight (in (0, 1]) × its BM25 contribution. A term Text already has keeps
	// Text's weight. At most MaxExpansion terms.
	Expansion []WeightedTerm
	Mode      Mode
	Limit     int
	// WithoutMetadata asks for hits without their records' Metadata (left nil): a
	// caller that over-fetches candidates to re-rank them by their other fields
	// then reads the metadata of the few it keeps with Get, instead of paying for
	// decoding every candidate's. A backend that has the metadata decoded anyway
	// may return it.
	WithoutMetadata bool
}

// WeightedTerm is an index term and how much it counts.
type WeightedTerm struct {
	Term   string
	Weight float64
}

// MaxExpansion bounds Query.Expansion and the terms of a TermDocs call.
const MaxExpansion = 1024

// Hit is a search result, best first.
type Hit struct {
	Record Record
	Score  float64
}

// Patch is a partial update; nil/zero fields are left alone.
type Patch struct {
	// Text replaces the text (and its sparse side). The caller re-embeds: pass the
	// new Vector in the same patch.
	Text   *string
	Vector []float32
	// Metadata is merged into the record's metadata, top-level keys replacing.
	Metadata map[string]any
	// HitCountDelta is added to HitCount; the result never drops below zero.
	HitCountDelta int
	Confidence    *float64
	// ExpiresAt replaces the expiry; a pointer to the zero time means never.
	ExpiresAt *time.Time
}

// Store is a vector store. Implementations are safe for concurrent use.
type Store interface {
	// Upsert inserts or replaces records by id, atomically for the whole batch where
	// the backend can. An id owned by another tenant or user fails with ErrConflict.
	Upsert(ctx context.Context, recs ...Record) error
	// Get returns the partition's records with these ids, in the order asked; missing
	// and expired ids are simply absent.
	Get(ctx context.Context, tenant, userID string, ids ...string) ([]Record, error)
	// Search returns at most q.Limit hits, best first.
	Search(ctx context.Context, q Query) ([]Hit, error)
	// Scroll pages through the records matching f in ascending id order. offset is ""
	// for the first page, then the previous call's next; next is "" after the last page.
	Scroll(ctx context.Context, f Filter, offset string, limit int) (recs []Record, next string, err error)
	// UpdatePayload applies patch to one record; ErrNotFound if the partition has no
	// such (unexpired) record.
	UpdatePayload(ctx context.Context, tenant, userID, id string, patch Patch) error
	// UpdatePayloads applies each patch to the partition's record of its id (the
	// map key), atomically where the backend can: every id, vector and resulting
	// record is validated before anything is written, so an invalid patch fails
	// the whole call and writes nothing. Ids the partition holds no unexpired
	// record of (missing, expired, another partition's) are skipped and returned
	// in missing, canonical and sorted; they are not an error.
	UpdatePayloads(ctx context.Context, tenant, userID string, patches map[string]Patch) (missing []string, err error)
	// Delete removes the partition's records with these ids, expired or not, and
	// returns how many it removed.
	Delete(ctx context.Context, tenant, userID string, ids ...string) (int, error)
	// DeleteByFilter removes what Count(f) counts and returns that number.
	DeleteByFilter(ctx context.Context, f Filter) (int, error)
	// Count returns how many records match f.
	Count(ctx context.Context, f Filter) (int, error)
	// TermDocs returns how many records of the partition (expired ones included)
	// hold each of terms (index terms: bm25.Tokenize terms) in their text, in the
	// order asked (at most MaxExpansion terms); nil when the backend keeps no such
	// counts it can read (Qdrant).
	TermDocs(ctx context.Context, tenant, userID string, terms []string) ([]int, error)
	// Users returns the users of tenant that have records (expired ones
	// included), sorted: the one call that spans partitions, for exporting a
	// whole tenant.
	Users(ctx context.Context, tenant string) ([]string, error)
	Close() error
}

// idNamespace is the UUIDv5 namespace of agentmem record ids. Changing it would
// change every deterministic id.
var idNamespace = uuid.MustParse("6f0b7f3e-2d0c-5a4e-9b1d-8c3f4e5a6b70")

// DeterministicID returns the UUIDv5 of parts: the same parts always give the same
// id, different part lists (including different splits of the same bytes) give
// different ids.
func DeterministicID(parts ...string) string {
	return nameUUID(parts).String()
}

// TimeOrderedID returns a deterministic id of parts that sorts by t: a UUIDv8
// whose first 48 bits are t in Unix milliseconds (big-endian, as in UUIDv7) and
// whose other bits are DeterministicID's. The same t and parts always give the
// same id; an id of a later millisecond sorts after (as bytes and as its string).
//
// Why: a B-tree index on ids (the embedded store's unique id index) takes a
// random id on a random leaf, one more page to write for nearly every record,
// while ids that follow time land on the last leaves. For records made from
// events, which arrive roughly in time order, that cut the embedded store's
// upsert CPU by about two fifths at 100,000 records. Times before 1970 or after
// the 48 bits (year 10889) are clamped.
func TimeOrderedID(t time.Time, parts ...string) string {
	u := nameUUID(parts)
	ms := min(max(t.UnixMilli(), 0), 1<<48-1)
	for i := range 6 {
		u[i] = byte(ms >> (40 - 8*i))
	}
	u[6] = u[6]&0x0f | 0x80 // version 8; NewSHA1 already set the RFC 9562 variant
	return u.String()
}

// nameUUID is the UUIDv5 of parts in the agentmem namespace.
func nameUUID(parts []string) uuid.UUID {
	var b []byte
	for _, p := range parts {
		// Length-prefixed so ("ab","c") and ("a","bc") differ.
		b = strconv.AppendInt(b, int64(len(p)), 10)
		b = append(b, ':')
		b = append(b, p...)
	}
	return uuid.NewSHA1(idNamespace, b)
}

// CanonicalID parses id as a UUID and returns its canonical lowercase form.
func CanonicalID(id string) (string, error) {
	// Ids come canonical nearly always (every id this package makes is); returning
	// them as they are saves a parse and a new string per record written.
	if isCanonicalID(id) {
		return id, nil
	}
	u, err := uuid.Parse(id)
	if err != nil {
		return "", fmt.Errorf("%w: id %q is not a UUID", ErrInvalidFilter, id)
	}
	return u.String(), nil
}

// isCanonicalID reports whether id is in the form uuid.UUID.String writes:
// 8-4-4-4-12 lowercase hex digits.
func isCanonicalID(id string) bool {
	if len(id) != 36 {
		return false
	}
	for i := 0; i < len(id); i++ {
		switch c := id[i]; i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
				return false
			}
		}
	}
	return true
}

// ValidatePartition checks the (tenant, user) scope of a call.
func ValidatePartition(tenant, userID string) error {
	if err := events.ValidateID("tenant", tenant); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidFilter, err)
	}
	if err := events.ValidateID("user_id", userID); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidFilter, err)
	}
	return nil
}

// Normalize validates f and returns a copy with ids in canonical form.
func (f Filter) Normalize() (Filter, error) {
	if err := ValidatePartition(f.Tenant, f.UserID); err != nil {
		return f, err
	}
	for _, t := range f.MemoryTypes {
		if !t.Valid() {
			return f, fmt.Errorf("%w: unknown memory type %q", ErrInvalidFilter, t)
		}
	}
	if f.IDs != nil {
		ids := make([]string, len(f.IDs))
		for i, id := range f.IDs {
			c, err := CanonicalID(id)
			if err != nil {
				return f, err
			}
			ids[i] = c
		}
		f.IDs = ids
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Since.Before(f.Until) {
		return f, fmt.Errorf("%w: Since %s is not before Until %s", ErrInvalidFilter, f.Since, f.Until)
	}
	for k, v := range f.Payload {
		if err := events.ValidateID("payload key", k); err != nil {
			return f, fmt.Errorf("%w: %w", ErrInvalidFilter, err)
		}
		if _, err := PayloadValue(v); err != nil {
			return f, fmt.Errorf("%w: payload %q: %w", ErrInvalidFilter, k, err)
		}
	}
	return f, nil
}

// NormalizePatches validates the scope and the patches of an UpdatePayloads call
// for a store of dims dimensions, and returns the patches keyed by canonical id
// with those ids sorted. Two keys naming the same record (different spellings of
// one UUID) are refused rather than applied in an arbitrary order.
func NormalizePatches(tenant, userID string, patches map[string]Patch, dims int) (ids []string, byID map[string]Patch, err error) {
	if err := ValidatePartition(tenant, userID); err != nil {
		return nil, nil, err
	}
	ids = make([]string, 0, len(patches))
	byID = make(map[string]Patch, len(patches))
	for id, p := range patches {
		c, err := CanonicalID(id)
		if err != nil {
			return nil, nil, err
		}
		if _, dup := byID[c]; dup {
			return nil, nil, fmt.Errorf("%w: record %s is patched twice", ErrInvalidFilter, c)
		}
		if p.Vector != nil && len(p.Vector) != dims {
			return nil, nil, fmt.Errorf("%w: patch of %s has a %d-dimensional vector, the store %d", ErrDimension, c, len(p.Vector), dims)
		}
		byID[c] = p
		ids = append(ids, c)
	}
	slices.Sort(ids)
	return ids, byID, nil
}

// PayloadValue returns v as a string, bool or int64, the value kinds a payload
// equality condition supports.
func PayloadValue(v any) (any, error) {
	switch x := v.(type) {
	case string, bool, int64:
		return x, nil
	case int:
		return int64(x), nil
	case int32:
		return int64(x), nil
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return int64(x), nil
		}
	}
	return nil, fmt.Errorf("value %v (%T) is not a string, bool or integer", v, v)
}

// Normalize validates r for a store of dims dimensions and returns it with its id in
// canonical form.
func (r Record) Normalize(dims int) (Record, error) {
	if err := ValidatePartition(r.Tenant, r.UserID); err != nil {
		return r, fmt.Errorf("record %q: %w", r.ID, err)
	}
	id, err := CanonicalID(r.ID)
	if err != nil {
		return r, err
	}
	r.ID = id
	if !r.MemoryType.Valid() {
		return r, fmt.Errorf("%w: record %s: unknown memory type %q", ErrInvalidRecord, r.ID, r.MemoryType)
	}
	if len(r.Vector) != dims {
		return r, fmt.Errorf("%w: record %s has %d dimensions, the store %d", ErrDimension, r.ID, len(r.Vector), dims)
	}
	if r.HitCount < 0 {
		return r, fmt.Errorf("%w: record %s: negative hit count %d", ErrInvalidRecord, r.ID, r.HitCount)
	}
	if math.IsNaN(r.Confidence) || math.IsInf(r.Confidence, 0) {
		return r, fmt.Errorf("%w: record %s: confidence %v is not a number", ErrInvalidRecord, r.ID, r.Confidence)
	}
	for _, x := range r.Vector {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return r, fmt.Errorf("%w: record %s: vector holds %v", ErrInvalidRecord, r.ID, x)
		}
	}
	return r, nil
}

// Normalize validates q for a store of dims dimensions.
func (q Query) Normalize(dims int) (Query, error) {
	f, err := q.Filter.Normalize()
	if err != nil {
		return q, err
	}
	q.Filter = f
	if q.Limit < 1 {
		return q, fmt.Errorf("%w: limit %d, want > 0", ErrInvalidQuery, q.Limit)
	}
	switch q.Mode {
	case Dense, Hybrid:
		if q.Vector == nil {
			return q, fmt.Errorf("%w: %s search needs a query vector", ErrInvalidQuery, q.Mode)
		}
		if len(q.Vector) != dims {
			return q, fmt.Errorf("%w: query vector has %d dimensions, the store %d", ErrDimension, len(q.Vector), dims)
		}
	case Sparse:
	default:
		return q, fmt.Errorf("%w: unknown mode %s", ErrInvalidQuery, q.Mode)
	}
	if len(q.Expansion) > MaxExpansion {
		return q, fmt.Errorf("%w: %d expansion terms, want at most %d", ErrInvalidQuery, len(q.Expansion), MaxExpansion)
	}
	for i, t := range q.Expansion {
		if t.Term == "" || !(t.Weight > 0 && t.Weight <= 1) {
			return q, fmt.Errorf("%w: expansion term %d (%q) has weight %v, want a term with a weight in (0, 1]", ErrInvalidQuery, i, t.Term, t.Weight)
		}
	}
	return q, nil
}
