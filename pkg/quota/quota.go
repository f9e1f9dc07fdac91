// Package quota bounds what one tenant may ask of a deployment, so that a noisy
// tenant cannot take the others' share: observations per second at ingest (Rate,
// a token bucket per tenant) and the memories and Markdown bytes it holds at the
// write paths (Meter). A tenant over a quota is refused with an *Error wrapping
// ErrExceeded that names the quota's configuration key: the retriever answers it
// 429 (events.RPCCodeQuota), the stream workers dead-letter the event with class
// quota (bus.ClassQuota), so nothing is dropped silently and an operator who
// raises the quota can replay what was refused.
package quota

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Sentinel errors; returned errors wrap them.
var (
	// ErrExceeded: the tenant is over one of its quotas (an *Error says which).
	ErrExceeded = errors.New("quota exceeded")
	// ErrInvalid: a Meter without its counters.
	ErrInvalid = errors.New("quota: invalid meter")
)

// Kind is one quota; its value is the last token of its configuration key.
type Kind string

// The quotas.
const (
	EventsPerSecond Kind = "events_per_second"
	Memories        Kind = "memories"
	MarkdownBytes   Kind = "markdown_bytes"
)

// Limits are one tenant's quotas; a zero (or negative) field is no limit.
// pkg/config validates them.
type Limits struct {
	// EventsPerSecond is the observations per second ingest accepts of the
	// tenant, measured in the stream's time (when each was stored), so that a
	// backlog drained after an outage is not refused for arriving at once.
	EventsPerSecond float64
	// EventsBurst is how many observations may come at once above the rate;
	// 0 is one second's worth (at least 1).
	EventsBurst int
	// Memories bounds the records (episodic, semantic, items) the tenant holds
	// in the vector store, expired ones included until they are swept.
	Memories int
	// MarkdownBytes bounds the bytes of the tenant's Markdown memory files
	// (MEMORY.md, daily notes, backups, policy files).
	MarkdownBytes int
}

func (l Limits) limit(k Kind) float64 {
	switch k {
	case EventsPerSecond:
		return l.EventsPerSecond
	case Memories:
		return float64(l.Memories)
	case MarkdownBytes:
		return float64(l.MarkdownBytes)
	}
	return 0
}

func (l Limits) burst() int {
	if l.EventsBurst > 0 {
		return l.EventsBurst
	}
	return max(1, int(math.Ceil(l.EventsPerSecond)))
}

// Config is every tenant's quotas.
type Config struct {
	// Default applies to every tenant not in Tenants.
	Default Limits
	// Tenants are the tenants with limits of their own, each whole (the
	// configuration fills what a tenant's override leaves out from Default).
	Tenants map[string]Limits
}

// For returns tenant's limits and the prefix of the configuration keys that set
// them ("quotas." or "quotas.tenants.<tenant>.").
func (c Config) For(tenant string) (Limits, string) {
	if l, ok := c.Tenants[tenant]; ok {
		return l, tenantPrefix(tenant)
	}
	return c.Default, keyPrefix
}

const keyPrefix = "quotas."

func tenantPrefix(tenant string) string { return keyPrefix + "tenants." + tenant + "." }

// Error is a refusal: which tenant, which quota (Key is its configuration key),
// the limit, and for a held quota what the tenant would hold.
type Error struct {
	Tenant string
	Kind   Kind
	Key    string
	Limit  float64
	// Burst is the token bucket's size (EventsPerSecond only).
	Burst int
	// Would is what the tenant would hold with the refused write (Memories,
	// MarkdownBytes).
	Would int
}

func (e *Error) Error() string {
	limit := strconv.FormatFloat(e.Limit, 'f', -1, 64)
	switch e.Kind {
	case EventsPerSecond:
		return fmt.Sprintf("%s: tenant %s sends more observations than %s allows (%s per second, burst %d)", ErrExceeded, e.Tenant, e.Key, limit, e.Burst)
	case Memories:
		return fmt.Sprintf("%s: tenant %s would hold %d memories, over %s (%s)", ErrExceeded, e.Tenant, e.Would, e.Key, limit)
	}
	return fmt.Sprintf("%s: tenant %s's Markdown memory would be %d bytes, over %s (%s)", ErrExceeded, e.Tenant, e.Would, e.Key, limit)
}

// Unwrap makes errors.Is(err, ErrExceeded) true.
func (e *Error) Unwrap() error { return ErrExceeded }

// Rate is the events_per_second quota: a token bucket per tenant. Each process
// (each ingest replica) keeps its own buckets: a tenant's rate over a deployment
// is up to the number of ingest replicas times its limit. A nil *Rate limits
// nothing.
type Rate struct {
	cfg     Config
	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	lim  *rate.Limiter
	last time.Time // the latest time taken: time never runs back in a bucket
}

// NewRate returns the token buckets of cfg's events_per_second quotas, or nil
// when no tenant has one.
func NewRate(cfg Config) *Rate {
	on := cfg.Default.EventsPerSecond > 0
	for _, l := range cfg.Tenants {
		on = on || l.EventsPerSecond > 0
	}
	if !on {
		return nil
	}
	return &Rate{cfg: cfg, buckets: map[string]*bucket{}}
}

// Take takes one observation of tenant, stored at at, from the tenant's bucket;
// an *Error when it is empty. Times earlier than the bucket's latest (a
// redelivery, a batch out of order) count as the latest, so a replayed old
// message cannot refill the bucket.
func (r *Rate) Take(tenant string, at time.Time) error {
	if r == nil {
		return nil
	}
	l, prefix := r.cfg.For(tenant)
	if l.EventsPerSecond <= 0 {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	b := r.buckets[tenant]
	if b == nil {
		b = &bucket{lim: rate.NewLimiter(rate.Limit(l.EventsPerSecond), l.burst())}
		r.buckets[tenant] = b
	}
	if at.After(b.last) {
		b.last = at
	}
	if b.lim.AllowN(b.last, 1) {
		return nil
	}
	return &Error{Tenant: tenant, Kind: EventsPerSecond, Key: prefix + string(EventsPerSecond), Limit: l.EventsPerSecond, Burst: l.burst()}
}

// Counter returns how much of one held quota (memories, Markdown bytes) a
// tenant holds now, read from the stores.
type Counter func(ctx context.Context, tenant string) (int, error)

// DefaultRefresh is how long a Meter trusts a count before it reads the stores
// again.
const DefaultRefresh = 10 * time.Second

// Meter is the memories and markdown_bytes quotas. Counting a tenant means
// reading every user's partition, so a count is kept for Refresh and what this
// process writes meanwhile is added to it (Added); writes by other processes
// show at the next refresh. A tenant can so pass a quota by what the other
// processes write within Refresh, never by more. A nil *Meter limits nothing.
type Meter struct {
	cfg      Config
	counters map[Kind]Counter
	refresh  time.Duration
	now      func() time.Time
	mu       sync.Mutex
	held     map[heldKey]held
}

type heldKey struct {
	tenant string
	kind   Kind
}

type held struct {
	n  int
	at time.Time
}

// NewMeter returns the meter of cfg's held quotas counting with memories and
// markdownBytes; nil when no tenant has either quota. refresh 0 is
// DefaultRefresh.
func NewMeter(cfg Config, memories, markdownBytes Counter, refresh time.Duration) (*Meter, error) {
	on := false
	for _, l := range append([]Limits{cfg.Default}, mapValues(cfg.Tenants)...) {
		on = on || l.Memories > 0 || l.MarkdownBytes > 0
	}
	if !on {
		return nil, nil
	}
	if memories == nil || markdownBytes == nil {
		return nil, fmt.Errorf("%w: the meter needs both counters", ErrInvalid)
	}
	if refresh <= 0 {
		refresh = DefaultRefresh
	}
	return &Meter{cfg: cfg, counters: map[Kind]Counter{Memories: memories, MarkdownBytes: markdownBytes},
		refresh: refresh, now: time.Now, held: map[heldKey]held{}}, nil
}

func mapValues(m map[string]Limits) []Limits {
	out := make([]Limits, 0, len(m))
	for _, l := range m {
		out = append(out, l)
	}
	return out
}

// Check reports, with an *Error, whether tenant holding n more of kind would be
// over its quota. Without that quota it reads nothing. An error reading the
// stores is returned as it is (not ErrExceeded): the caller retries.
func (m *Meter) Check(ctx context.Context, tenant string, kind Kind, n int) error {
	if m == nil {
		return nil
	}
	l, prefix := m.cfg.For(tenant)
	limit := l.limit(kind)
	if limit <= 0 {
		return nil
	}
	have, err := m.count(ctx, tenant, kind)
	if err != nil {
		return err
	}
	if would := have + n; float64(would) > limit {
		return &Error{Tenant: tenant, Kind: kind, Key: prefix + string(kind), Limit: limit, Would: would}
	}
	return nil
}

// Added counts n more of kind written by this process for tenant, until the
// next refresh reads the stores again.
func (m *Meter) Added(tenant string, kind Kind, n int) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	k := heldKey{tenant, kind}
	if h, ok := m.held[k]; ok {
		h.n += n
		m.held[k] = h
	}
}

// Recount drops tenant's counts: the next Check reads the stores again (after
// a delete, so that the room it made counts at once).
func (m *Meter) Recount(tenant string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for k := range m.held {
		if k.tenant == tenant {
			delete(m.held, k)
		}
	}
}

func (m *Meter) count(ctx context.Context, tenant string, kind Kind) (int, error) {
	k := heldKey{tenant, kind}
	m.mu.Lock()
	h, ok := m.held[k]
	m.mu.Unlock()
	if ok && m.now().Sub(h.at) < m.refresh {
		return h.n, nil
	}
	at := m.now()
	n, err := m.counters[kind](ctx, tenant)
	if err != nil {
		return 0, fmt.Errorf("quota: count the %s of tenant %s: %w", kind, tenant, err)
	}
	m.mu.Lock()
	m.held[k] = held{n: n, at: at}
	m.mu.Unlock()
	return n, nil
}
