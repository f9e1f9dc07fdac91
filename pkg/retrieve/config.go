package retrieve

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/bus"
	"github.com/agentmem/agentmem/pkg/docstore"
	"github.com/agentmem/agentmem/pkg/eventstore"
	"github.com/agentmem/agentmem/pkg/memory"
	"github.com/agentmem/agentmem/pkg/obs"
	"github.com/agentmem/agentmem/pkg/policy"
	"github.com/agentmem/agentmem/pkg/priority"
	"github.com/agentmem/agentmem/pkg/quota"
	"github.com/agentmem/agentmem/pkg/session"
	"github.com/agentmem/agentmem/pkg/vectorstore"
	"github.com/agentmem/agentmem/pkg/writes"
)

// Sentinel errors. Request handlers map them, and those of the stores, to the micro
// error codes of events/rpc.go (400, 404, 429, 500, 503).
var (
	// ErrInvalidConfig reports a Config or Deps that cannot work.
	ErrInvalidConfig = errors.New("retrieve: invalid config")
	// ErrNotFound reports a session that has nothing stored.
	ErrNotFound = errors.New("retrieve: not found")
	// ErrUnavailable reports an optional dependency that is not configured.
	ErrUnavailable = errors.New("retrieve: unavailable")
	// ErrNotReady is what Ready returns before Run has registered the service.
	ErrNotReady = errors.New("retrieve: service not started")
)

// Defaults of Config.
const (
	DefaultServiceName     = "agentmem-retriever"
	DefaultVersion         = "1.0.0"
	DefaultQueueGroup      = "agentmem-retriever"
	DefaultAutoLoadLines   = 200
	DefaultKEpisodic       = 5
	DefaultKSemantic       = 5
	DefaultMaxTokens       = 2000 // memory.context_budget_tokens' default
	DefaultItemsLimit      = 20
	DefaultRecentTurns     = 4
	DefaultSummaryMaxChars = 1200
	DefaultPolicyCacheSize = 10000
	DefaultDocCacheSize    = 1024
	DefaultDigestCacheSize = 16384
	DefaultDrainTimeout    = 30 * time.Second
	// DefaultConcurrency: enough requests at once to keep the CPUs busy while some
	// wait on the stores, few enough that a burst does not pile up goroutines.
	DefaultConcurrency = 32
	// DefaultContextWindowTokens is memory.context_window_tokens' default.
	DefaultContextWindowTokens = 8192
)

// Memories is the episodic/semantic/item memory service; *memory.Service implements it.
// Every call is scoped to the tenant of the request subject; requests have been
// validated before they are passed on.
type Memories interface {
	// RecallStatus returns the user's best memories of each type for query, at
	// most limits[type] of each, best first (SPEC C4), and what the recall did
	// without when the embedder was unavailable (then it ranks by BM25 alone).
	RecallStatus(ctx context.Context, tenant, userID, query string, types []vectorstore.MemoryType, limits map[vectorstore.MemoryType]int) (memory.Recalled, error)

	// The writes, applied through pkg/writes.
	writes.Memories

	Get(ctx context.Context, tenant string, req events.GetRequest) (events.Memory, error)
	Search(ctx context.Context, tenant string, req events.SearchRequest) (events.SearchReply, error)
	History(ctx context.Context, tenant string, req events.HistoryRequest) (events.HistoryReply, error)

	GetItem(ctx context.Context, tenant string, req events.ItemKeyRequest) (events.MemoryItem, error)
	ListItems(ctx context.Context, tenant string, req events.ItemScopeRequest) (events.ItemListReply, error)
	// PackItems lists the persona, user-profile and session items of a context
	// pack at once, each list as ListItems gives it.
	PackItems(ctx context.Context, tenant, userID, sessionID string, limit int) (memory.PackItems, error)
	SearchItems(ctx context.Context, tenant string, req events.ItemSearchRequest) (events.ItemListReply, error)
}

// Consolidator runs consolidation for one user now; *consolidate.Runner implements it.
type Consolidator interface {
	Consolidate(ctx context.Context, tenant, userID string) (events.ConsolidateReply, error)
}

// Config configures the retriever. Zero values take the defaults above.
type Config struct {
	// ServiceName is the micro service name (discovery: nats micro list).
	ServiceName string
	// Version is the micro service version (SemVer).
	Version string
	// QueueGroup is shared by every replica, so each request is answered once.
	QueueGroup string
	// Policy is the base policy (SPEC B1); a namespace's policy_overrides.json is
	// overlaid on it, once per session (SPEC B5).
	Policy policy.Policy
	// AutoLoadLines is how many lines of MEMORY.md form the core of a pack (SPEC A2).
	AutoLoadLines int
	// KEpisodic and KSemantic bound the vector memories of a pack (SPEC C4).
	KEpisodic, KSemantic int
	// MaxTokens is the prompt budget when a request does not set one (in agentmem,
	// memory.context_budget_tokens and memory.context_budget_percent).
	MaxTokens int
	// ItemsLimit bounds each list of memory items in a pack (persona, profile, session).
	ItemsLimit int
	// RecentTurns is how many of the session's latest turns a pack carries.
	RecentTurns int
	// SummaryMaxChars bounds the text of session.summary.
	SummaryMaxChars int
	// PolicyCacheSize bounds how many sessions' policies are cached.
	PolicyCacheSize int
	// DocCacheSize bounds how many Markdown files (MEMORY.md with its chunk index,
	// topic files) are kept between requests, each checked with the docstore's
	// ReadFileIfChanged before use.
	DocCacheSize int
	// DigestCacheSize bounds how many messages' summary lines are kept for the
	// digests of session summaries (a session past its summary trigger).
	DigestCacheSize int
	// DrainTimeout bounds how long Run waits for in-flight requests at shutdown.
	DrainTimeout time.Duration
	// MaxTextBytes bounds each text a request stores or searches with (append
	// content, add and update text, item content, queries, a restored session's
	// texts); a longer one is a 400. Default events.DefaultMaxTextBytes.
	MaxTextBytes int
	// Concurrency is how many requests one replica serves at once (each on a
	// goroutine of its own); default DefaultConcurrency.
	Concurrency int
	// ContextWindowTokens is the agents' context window (memory.context_window_tokens,
	// default DefaultContextWindowTokens), the base of the session summary's token
	// trigger: a pack reads a session's summary only once it can have one.
	ContextWindowTokens int
	// RemoteEmbedder says that the query's embedding is a round trip (a remote
	// embedder): the recall then runs beside the pack's other reads, which are
	// done by the time the vector arrives. With the local embedder the recall is
	// CPU work, which a goroutine of its own only delays on two cores.
	RemoteEmbedder bool
	// MinScore is the relevance floor (search.min_score): a search hit or a
	// vector memory of a pack scoring below it is left out, so that a query about
	// nothing the user said finds nothing rather than the least unrelated
	// memories. Scores are the re-ranker's (memory.RankConfig); 0 keeps every hit.
	MinScore float64
	// DLQStream is the dead-letter stream dlq.list and dlq.replay read; default
	// bus.DefaultDLQStream.
	DLQStream string
}

func (c *Config) setDefaults() {
	setDefault(&c.ServiceName, DefaultServiceName)
	setDefault(&c.Version, DefaultVersion)
	setDefault(&c.QueueGroup, DefaultQueueGroup)
	if c.Policy == (policy.Policy{}) {
		c.Policy = policy.Defaults()
	}
	setDefault(&c.AutoLoadLines, DefaultAutoLoadLines)
	setDefault(&c.KEpisodic, DefaultKEpisodic)
	setDefault(&c.KSemantic, DefaultKSemantic)
	setDefault(&c.MaxTokens, DefaultMaxTokens)
	setDefault(&c.ItemsLimit, DefaultItemsLimit)
	setDefault(&c.RecentTurns, DefaultRecentTurns)
	setDefault(&c.SummaryMaxChars, DefaultSummaryMaxChars)
	setDefault(&c.PolicyCacheSize, DefaultPolicyCacheSize)
	setDefault(&c.DocCacheSize, DefaultDocCacheSize)
	setDefault(&c.DigestCacheSize, DefaultDigestCacheSize)
	setDefault(&c.DrainTimeout, DefaultDrainTimeout)
	setDefault(&c.MaxTextBytes, events.DefaultMaxTextBytes)
	setDefault(&c.Concurrency, DefaultConcurrency)
	setDefault(&c.ContextWindowTokens, DefaultContextWindowTokens)
	setDefault(&c.DLQStream, bus.DefaultDLQStream)
}

func setDefault[T comparable](dst *T, def T) {
	var zero T
	if *dst == zero {
		*dst = def
	}
}

// Validate reports the first unusable field of c (after defaults).
func (c Config) Validate() error {
	if err := events.ValidateID("ServiceName", c.ServiceName); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if err := c.Policy.Validate(); err != nil {
		return fmt.Errorf("%w: Policy: %w", ErrInvalidConfig, err)
	}
	for _, f := range []struct {
		name string
		v    int
	}{
		{"AutoLoadLines", c.AutoLoadLines}, {"KEpisodic", c.KEpisodic}, {"KSemantic", c.KSemantic},
		{"MaxTokens", c.MaxTokens}, {"ItemsLimit", c.ItemsLimit}, {"RecentTurns", c.RecentTurns},
		{"SummaryMaxChars", c.SummaryMaxChars}, {"PolicyCacheSize", c.PolicyCacheSize},
		{"DocCacheSize", c.DocCacheSize}, {"DigestCacheSize", c.DigestCacheSize}, {"MaxTextBytes", c.MaxTextBytes}, {"Concurrency", c.Concurrency},
	} {
		if f.v < 1 {
			return fmt.Errorf("%w: %s is %d; it must be positive", ErrInvalidConfig, f.name, f.v)
		}
	}
	if c.ItemsLimit > events.MaxLimit {
		return fmt.Errorf("%w: ItemsLimit is %d; at most %d", ErrInvalidConfig, c.ItemsLimit, events.MaxLimit)
	}
	if math.IsNaN(c.MinScore) || math.IsInf(c.MinScore, 0) || c.MinScore < 0 {
		return fmt.Errorf("%w: MinScore is %v; it must be a number >= 0", ErrInvalidConfig, c.MinScore)
	}
	if c.DrainTimeout < 0 {
		return fmt.Errorf("%w: DrainTimeout is %s; it must not be negative", ErrInvalidConfig, c.DrainTimeout)
	}
	return nil
}

// Deps are the shared parts the retriever works on. Consolidator may be nil: the
// consolidate endpoint then answers 503.
type Deps struct {
	Conn         *nats.Conn
	JS           jetstream.JetStream // publishes memory_hit events and restored sessions
	Docs         *docstore.Store
	Events       *eventstore.Store
	Sessions     *session.Store
	Memories     Memories
	Consolidator Consolidator
	// Compressor serves the compress endpoint; nil answers it 503.
	Compressor Compressor
	// Transfer serves export, import and forget (pkg/transfer); nil answers
	// them 503.
	Transfer Transfer
	// Summarize writes the summary of session.summary and session.archive from a
	// session's messages, oldest first (the extractor's, extract.SummarizeSession,
	// passed in so that the retriever does not import another component).
	Summarize Summarizer
	// Gate, when set, marks every request as foreground work, so that background
	// work of the process that waits on it (ingest batches) lets reads go first.
	Gate *priority.Gate
	// Quota is the tenants' memories and markdown_bytes quotas, checked before
	// a write that grows them is recorded (429 when over); nil limits nothing.
	Quota *quota.Meter
	// Metrics counts refused requests; nil counts them in a registry of their own.
	Metrics *obs.RPCMetrics
	Now     func() time.Time // default time.Now
}

// Summarizer summarises a conversation in at most maxChars bytes.
type Summarizer func(conv []session.Message, maxChars int) string

func (d *Deps) validate() error {
	missing := ""
	switch {
	case d.Conn == nil:
		missing = "Conn"
	case d.JS == nil:
		missing = "JS"
	case d.Docs == nil:
		missing = "Docs"
	case d.Events == nil:
		missing = "Events"
	case d.Sessions == nil:
		missing = "Sessions"
	case d.Memories == nil:
		missing = "Memories"
	case d.Summarize == nil:
		missing = "Summarize"
	}
	if missing != "" {
		return fmt.Errorf("%w: Deps.%s is required", ErrInvalidConfig, missing)
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	return nil
}

// *memory.Service is the implementation of Memories.
var _ Memories = (*memory.Service)(nil)
