// Package config is the one configuration of every agentmem binary: built-in defaults,
// then an optional YAML file, then environment variables named AGENTMEM_<KEY>, where
// <KEY> is the dotted key with "." and "_" both written "_" and upper-cased
// (memory.auto_load_lines is AGENTMEM_MEMORY_AUTO_LOAD_LINES). Because the set of keys
// is fixed, that mapping is unambiguous, and an AGENTMEM_ variable or file key that
// matches no key is an error rather than a silently ignored typo.
package config

import (
	"time"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/policy"
	"github.com/agentmem/agentmem/pkg/quota"
)

// Config is the whole configuration. Field tags are the YAML keys.
type Config struct {
	// DataDir is the base of local state whose own path is left empty: memory.dir,
	// vector.path and nats.embedded.store_dir default to directories under it.
	DataDir string  `koanf:"data_dir"`
	Memory  Memory  `koanf:"memory"`
	NATS    NATS    `koanf:"nats"`
	LLM     LLM     `koanf:"llm"`
	Embed   Embed   `koanf:"embed"`
	Vector  Vector  `koanf:"vector"`
	Search  Search  `koanf:"search"`
	Ingest  Ingest  `koanf:"ingest"`
	Limits  Limits  `koanf:"limits"`
	Quotas  Quotas  `koanf:"quotas"`
	HTTP    HTTP    `koanf:"http"`
	Log     Log     `koanf:"log"`
	Runtime Runtime `koanf:"runtime"`
}

// Memory is the Markdown memory (SPEC A) and, inline in the same block, the policy
// defaults of SPEC B1 that a namespace's policy_overrides.json is overlaid on.
type Memory struct {
	Dir           string `koanf:"dir"`
	Enabled       bool   `koanf:"enabled"`
	AutoLoadLines int    `koanf:"auto_load_lines"`
	Backend       string `koanf:"backend"` // filesystem | jetstream
	MaxLines      int    `koanf:"max_lines"`
	TargetLines   int    `koanf:"target_lines"`
	// BackupsKeep is how many backups of overwritten files a namespace keeps (A8).
	BackupsKeep int `koanf:"backups_keep"`
	// ContextWindowTokens is the agents' model context window that
	// session_summary_token_percent is a share of (B2).
	ContextWindowTokens int `koanf:"context_window_tokens"`
	// ContextBudgetTokens is the default token budget of a context pack (a
	// request's max_tokens overrides it); 0 leaves the budget to
	// ContextBudgetPercent.
	ContextBudgetTokens int `koanf:"context_budget_tokens"`
	// ContextBudgetPercent, when above 0, bounds the default budget to this share
	// of ContextWindowTokens as well: the budget is the smaller of the two.
	ContextBudgetPercent int `koanf:"context_budget_percent"`
	// CompressMaxTokenLoss is the percentage of MEMORY.md's distinct dates,
	// numbers, names, file names and identifiers a long-term compression may
	// drop (B4); 0, the default, allows none.
	CompressMaxTokenLoss int `koanf:"compress_max_token_loss"`
	// AgentLearning lets the extractor promote a session's impersonal
	// error→fix pairs and procedures to the scope of the agent that held it
	// (issue 31); off by default: what an agent learns then reaches every
	// user it serves.
	AgentLearning bool `koanf:"agent_learning"`

	policy.Policy `koanf:",squash"`
}

// Memory backends.
const (
	MemoryBackendFilesystem = "filesystem"
	MemoryBackendJetStream  = "jetstream"
)

// NATS is the connection every worker makes, the embedded server of "agentmem up", and
// the stream and durable consumer settings. At most one of creds_file, nkey_file,
// user (with password or password_file) and token_file may be set.
type NATS struct {
	URL          string   `koanf:"url"` // comma-separated for a cluster
	CredsFile    string   `koanf:"creds_file"`
	NKeyFile     string   `koanf:"nkey_file"`
	User         string   `koanf:"user"`
	Password     Secret   `koanf:"password"`
	PasswordFile string   `koanf:"password_file"`
	TokenFile    string   `koanf:"token_file"`
	TLS          TLS      `koanf:"tls"`
	Embedded     Embedded `koanf:"embedded"`
	Stream       Stream   `koanf:"stream"`
	Consumer     Consumer `koanf:"consumer"`
}

// TLS is client TLS. It is in use when Enabled is set or any file is given; CertFile and
// KeyFile go together.
type TLS struct {
	Enabled    bool   `koanf:"enabled"`
	CAFile     string `koanf:"ca_file"`
	CertFile   string `koanf:"cert_file"`
	KeyFile    string `koanf:"key_file"`
	ServerName string `koanf:"server_name"`
}

// InUse reports whether TLS is to be used.
func (t TLS) InUse() bool {
	return t.Enabled || t.CAFile != "" || t.CertFile != "" || t.KeyFile != ""
}

// Embedded is the in-process nats-server of "agentmem up".
type Embedded struct {
	StoreDir string `koanf:"store_dir"`
	Listen   string `koanf:"listen"` // "" = in-process connections only
}

// Stream is the AGENTMEM JetStream stream.
type Stream struct {
	MaxAge time.Duration `koanf:"max_age"` // 0 = unlimited
	// DLQMaxAge bounds how long the dead-letter stream keeps a dead letter;
	// 0 keeps them until replayed (a tenant flooding past its quota fills it).
	DLQMaxAge       time.Duration `koanf:"dlq_max_age"`
	DuplicateWindow time.Duration `koanf:"duplicate_window"`
	Replicas        int           `koanf:"replicas"`
}

// Consumer is every worker's durable consumer.
type Consumer struct {
	AckWait    time.Duration   `koanf:"ack_wait"`
	MaxDeliver int             `koanf:"max_deliver"`
	Backoff    []time.Duration `koanf:"backoff"` // ack deadline of each delivery; [0] == ack_wait; in the environment: "30s,1m,5m"
}

// LLM is the OpenAI-compatible chat endpoint; an empty BaseURL selects the offline
// rule-based implementations.
type LLM struct {
	BaseURL    string        `koanf:"base_url"`
	Model      string        `koanf:"model"`
	APIKey     Secret        `koanf:"api_key"`
	APIKeyFile string        `koanf:"api_key_file"`
	Timeout    time.Duration `koanf:"timeout"`
	MaxRetries int           `koanf:"max_retries"`
	// Concurrency bounds the model calls in flight from one process, every step
	// together (ingest's write decisions, the extractor's chunks, consolidation).
	Concurrency int `koanf:"concurrency"`
	// DecideBatchSize is how many observations one write-decision request asks
	// about; 1 asks each alone.
	DecideBatchSize int `koanf:"decide_batch_size"`
}

// MaxLLMRetries is the most llm.max_retries allows (pkg/llm's bound).
const MaxLLMRetries = 10

// MaxDecideBatchSize is the most llm.decide_batch_size allows (pkg/processor's
// MaxDecideBatchSize).
const MaxDecideBatchSize = 64

// Offline reports whether no LLM endpoint is configured.
func (l LLM) Offline() bool { return l.BaseURL == "" }

// Embed is the embedder: the built-in offline "local" one, the built-in USE-lite
// sentence encoder ("use-lite", weights in the binary or from ModelDir) or an
// OpenAI-compatible endpoint.
type Embed struct {
	Provider   string `koanf:"provider"` // local | use-lite | openai
	BaseURL    string `koanf:"base_url"`
	Model      string `koanf:"model"`
	APIKey     Secret `koanf:"api_key"`
	APIKeyFile string `koanf:"api_key_file"`
	Dimensions int    `koanf:"dimensions"`
	BatchSize  int    `koanf:"batch_size"`
	// QueryCacheSize is how many query embeddings reads keep (least recently
	// used go first); 0 keeps none.
	QueryCacheSize int `koanf:"query_cache_size"`
	// ModelDir holds the USE-lite model files (model.json, its weight shards,
	// vocab.json) for its float32 weights; empty uses the int8 weights built
	// into the binary.
	ModelDir string `koanf:"model_dir"`
}

// Embedding providers.
const (
	EmbedProviderLocal   = "local"
	EmbedProviderUSELite = "use-lite"
	EmbedProviderOpenAI  = "openai"
)

// Lexical reports whether the provider's vectors only restate the words of the
// text (the local embedder's hashed n-grams): recall then ranks by keyword
// alone, since fusing such vectors in measured worse (memory.RankConfig.Mode);
// the other providers are semantic and get the hybrid recall (vector.fusion).
func (e Embed) Lexical() bool { return e.Provider == EmbedProviderLocal }

// USELiteDimensions is the length of USE-lite's vectors (pkg/embed/uselite); with
// that provider embed.dimensions defaults to it and must equal it.
const USELiteDimensions = 512

// Vector is the vector store and the episodic memory thresholds (SPEC C4, C6, C7).
type Vector struct {
	Backend             string        `koanf:"backend"` // embedded | qdrant
	Path                string        `koanf:"path"`    // embedded store file
	Qdrant              Qdrant        `koanf:"qdrant"`
	Collection          string        `koanf:"collection"`
	KEpisodic           int           `koanf:"k_episodic"`
	KSemantic           int           `koanf:"k_semantic"`
	MergeThreshold      float64       `koanf:"merge_threshold"`
	SeparateThreshold   float64       `koanf:"separate_threshold"`
	SameChatWindow      time.Duration `koanf:"same_chat_window"`
	CrossChatWindow     time.Duration `koanf:"cross_chat_window"`
	ConsolidateInterval time.Duration `koanf:"consolidate_interval"`
	// SemanticExpansion adds to a recall's keyword search the words of the
	// user's memories that mean nearly what a query word means (pkg/wordvec,
	// memory.ExpansionConfig): "instruments" finds "I play the guitar".
	SemanticExpansion bool `koanf:"semantic_expansion"`
	// SemanticRerank re-ranks a recall's candidates by the similarity of
	// sentence vectors made of word vectors (pkg/wordvec, memory.RerankConfig).
	// With SemanticExpansion it lifted LoCoMo recall@10 by about a point
	// (BENCHMARKS.md); English words only, other text is left as it was.
	SemanticRerank bool `koanf:"semantic_rerank"`
	// Fusion is how a recall with a semantic embedder (embed.provider use-lite
	// or openai) combines the keyword and the dense rankings: FusionKeyword
	// ranks by the keyword score plus up to half as much for the dense
	// similarity (memory.FusionKeyword), FusionRRF by the store's reciprocal
	// rank fusion. The local embedder is lexical and recalls by keyword alone,
	// whatever this says.
	Fusion string `koanf:"fusion"`
	// MaxLoadedRecords bounds the records the embedded store holds in memory,
	// the least recently read users' dropped past it
	// (embedded.Config.MaxLoadedRecords); negative: no bound.
	MaxLoadedRecords int `koanf:"max_loaded_records"`
}

// Recall fusions (memory.Fusion).
const (
	FusionKeyword = "keyword"
	FusionRRF     = "rrf"
)

// Vector backends.
const (
	VectorBackendEmbedded = "embedded"
	VectorBackendQdrant   = "qdrant"
)

// DefaultMinScore is search.min_score's default. Scores are relative to the
// query's best keyword match (1); a memory that shares no word with the query
// and is found by the dense side or the word-vector expansion alone scores far
// lower: "where do I study?" finds "I'm a student at Peking University" at
// 0.026, while an unrelated memory of a query about nothing the user said
// scores 0 to 0.008. 0.01 drops the latter and keeps the former (LoCoMo R@10
// 82.6 against 82.6-83.1 without a floor; every scenario passed). Higher floors
// (0.1 to 0.7) cost LoCoMo's development split no more than the runs' noise
// (0.3 up to 0.9 point in a paired run) and every scenario passed, but they drop
// such matches (pkg/app TestEpisodicMemoryLifecycle), BENCHMARKS.md.
const DefaultMinScore = 0.01

// Search tunes what search and the context pack's vector memories return.
type Search struct {
	// MinScore is the relevance floor: a search hit, or a vector memory of a
	// context pack, scoring below it is left out (the re-ranker's score,
	// docs/architecture.md); 0 keeps every hit.
	MinScore float64 `koanf:"min_score"`
}

// Qdrant is the gRPC connection to Qdrant, and its REST API for backups.
type Qdrant struct {
	Addr string `koanf:"addr"` // host:port of the gRPC API
	// HTTPURL is the REST API (http://host:6333): the snapshot API `agentmem
	// backup` and `restore` copy the collection with is REST only. Empty: no
	// backup of the collection.
	HTTPURL    string `koanf:"http_url"`
	APIKey     Secret `koanf:"api_key"`
	APIKeyFile string `koanf:"api_key_file"`
	TLS        TLS    `koanf:"tls"`
}

// Ingest is the ingest worker's batching: the observations one replica has in
// flight are handled in batches of up to batch_size (one session-state write per
// session, one embedding call, one vector-store transaction and one memory_written
// per session each), a batch that is not full waiting batch_linger for more.
type Ingest struct {
	Concurrency int           `koanf:"concurrency"` // observations in flight per replica; >= batch_size
	BatchSize   int           `koanf:"batch_size"`
	BatchLinger time.Duration `koanf:"batch_linger"`
	// ContextMessages is how many messages said before an observation its episodic
	// memory keeps as context (ingest.Config.ContextMessages); -1 for none.
	ContextMessages int `koanf:"context_messages"`
}

// Limits bound what one event or request may ask agentmem to store.
type Limits struct {
	// MaxTextBytes bounds each text: an observation's text, tool-call arguments
	// and tool-result output (over it: dead-lettered by ingest, left out by the
	// extractor), append content, add and update text, item content and queries
	// (over it: the retriever answers 400). It is well below NATS's max_payload
	// (1 MiB by default), so that replies carrying such texts fit in a message.
	MaxTextBytes int `koanf:"max_text_bytes"`
	// MaxClockSkew is how far after the stream stored an event its ts may be
	// (events.Limits.MaxClockSkew); a later ts, or one before 1970, is
	// dead-lettered by the workers and left out by every reader of the stream.
	MaxClockSkew time.Duration `koanf:"max_clock_skew"`
}

// Events are the limits every reader of the event stream applies (events.Admit).
func (l Limits) Events() events.Limits {
	return events.Limits{MaxTextBytes: l.MaxTextBytes, MaxClockSkew: l.MaxClockSkew}
}

// MaxTextBytesCeiling is the largest limits.max_text_bytes: half of NATS's default
// max_payload, so a request carrying one such text still fits in a message.
const MaxTextBytesCeiling = 512 << 10

// Quotas bound each tenant (pkg/quota): a tenant over one is refused, an RPC
// with 429 and an event dead-lettered with class quota. 0 is no limit, every
// quota's default.
type Quotas struct {
	// EventsPerSecond is the observations per second one ingest replica accepts
	// of a tenant, in the stream's time (a token bucket per tenant and replica).
	EventsPerSecond float64 `koanf:"events_per_second"`
	// EventsBurst is the bucket's size; 0 is one second's worth.
	EventsBurst int `koanf:"events_burst"`
	// Memories bounds the vector-store records a tenant holds.
	Memories int `koanf:"memories"`
	// MarkdownBytes bounds the bytes of a tenant's Markdown memory files.
	MarkdownBytes int `koanf:"markdown_bytes"`
	// Tenants overrides the quotas above for the tenants it names, key by key:
	// what a tenant's entry leaves out is the default. In a file
	// quotas.tenants.<tenant>.memories; in the environment one JSON object,
	// AGENTMEM_QUOTAS_TENANTS='{"acme":{"memories":100000}}'.
	Tenants TenantQuotas `koanf:"tenants"`
}

// TenantQuotas are the per-tenant overrides of Quotas, by tenant.
type TenantQuotas map[string]TenantQuota

// TenantQuota is one tenant's overrides; a nil field is the default's value.
type TenantQuota struct {
	EventsPerSecond *float64 `koanf:"events_per_second" json:"events_per_second"`
	EventsBurst     *int     `koanf:"events_burst" json:"events_burst"`
	Memories        *int     `koanf:"memories" json:"memories"`
	MarkdownBytes   *int     `koanf:"markdown_bytes" json:"markdown_bytes"`
}

// Quota is the quotas as pkg/quota takes them: each tenant's overrides
// filled in from the defaults.
func (q Quotas) Quota() quota.Config {
	def := quota.Limits{EventsPerSecond: q.EventsPerSecond, EventsBurst: q.EventsBurst, Memories: q.Memories, MarkdownBytes: q.MarkdownBytes}
	out := quota.Config{Default: def}
	if len(q.Tenants) > 0 {
		out.Tenants = make(map[string]quota.Limits, len(q.Tenants))
	}
	for t, o := range q.Tenants {
		l := def
		override(&l.EventsPerSecond, o.EventsPerSecond)
		override(&l.EventsBurst, o.EventsBurst)
		override(&l.Memories, o.Memories)
		override(&l.MarkdownBytes, o.MarkdownBytes)
		out.Tenants[t] = l
	}
	return out
}

func override[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}

// HTTP is the operations server (/metrics, /healthz, /readyz, and the web
// inspector at /ui/ when UI is on).
type HTTP struct {
	Listen string `koanf:"listen"` // "" disables it
	// UI serves the web inspector (pkg/inspector) at /ui/; `agentmem up` turns it on.
	UI bool `koanf:"ui"`
	// UIPasswordFile holds the inspector's HTTP basic-auth password; without one the
	// inspector serves loopback clients only.
	UIPasswordFile string `koanf:"ui_password_file"`
	// UIHosts are the host names, besides loopback ones (localhost, 127.0.0.1,
	// [::1]), under which the inspector answers (exact names, port ignored): a
	// request naming any other Host is refused, so that a DNS-rebinding page cannot
	// reach it. In the environment: "mem.example.com,inspector.local".
	UIHosts []string `koanf:"ui_hosts"`
}

// Log selects the zap logger.
type Log struct {
	Level  string `koanf:"level"`  // debug | info | warn | error
	Format string `koanf:"format"` // json | console
}

// Runtime is the Go runtime of the process.
type Runtime struct {
	// GCMinHeapMB is the heap size (MiB) below which the garbage collector does
	// not start a cycle: GOGC is raised while the live heap is small so that the
	// next cycle starts near this size, and is 100 again once the live heap is
	// over half of it. 0 leaves GOGC alone, as does a GOGC environment variable.
	GCMinHeapMB int `koanf:"gc_min_heap_mb"`
}

// Default returns the built-in configuration, with "~" expanded and the paths derived
// from data_dir filled in.
func Default() Config {
	c := defaults()
	c.resolvePaths()
	return c
}

// defaults is the configuration before path resolution: derived paths are still empty,
// so that Load can tell whether a file or the environment set them.
func defaults() Config {
	return Config{
		DataDir: "~/.agentmem",
		Memory: Memory{
			Enabled:       true,
			AutoLoadLines: 200,
			Backend:       MemoryBackendFilesystem,
			MaxLines:      500,
			TargetLines:   400,
			BackupsKeep:   20,
			// 8192 tokens: the smallest window of the models agents commonly run.
			ContextWindowTokens: 8192,
			// 2000 tokens: the first ~15 ranked memories, where nearly all of
			// LoCoMo's recall@10 is, at under 10% of its conversations (BENCHMARKS.md).
			ContextBudgetTokens: 2000,
			Policy:              policy.Defaults(),
		},
		NATS: NATS{
			URL:    "nats://127.0.0.1:4222",
			Stream: Stream{DuplicateWindow: 2 * time.Minute, Replicas: 1},
			Consumer: Consumer{
				AckWait:    30 * time.Second,
				MaxDeliver: 5,
				Backoff:    []time.Duration{30 * time.Second, time.Minute, 5 * time.Minute}, // BackOff[0] is the first ack deadline: it equals AckWait
			},
		},
		LLM: LLM{Timeout: 60 * time.Second, MaxRetries: 3, Concurrency: 32, DecideBatchSize: 16},
		Embed: Embed{
			Provider:       EmbedProviderLocal,
			Dimensions:     384,
			BatchSize:      64,
			QueryCacheSize: 4096,
		},
		Vector: Vector{
			Backend:             VectorBackendEmbedded,
			Collection:          "memories",
			KEpisodic:           5,
			KSemantic:           5,
			MergeThreshold:      0.85,
			SeparateThreshold:   0.65,
			SameChatWindow:      30 * time.Minute,
			CrossChatWindow:     7 * 24 * time.Hour,
			ConsolidateInterval: 10 * time.Minute,
			SemanticExpansion:   true,
			SemanticRerank:      true,
			Fusion:              FusionKeyword,
			MaxLoadedRecords:    100_000, // embedded.DefaultMaxLoadedRecords (TestVectorStoreDefaults)
		},
		Search: Search{MinScore: DefaultMinScore},
		// Four batches in flight hide one batch's round trips behind the others'.
		Ingest: Ingest{Concurrency: 512, BatchSize: 128, BatchLinger: 5 * time.Millisecond, ContextMessages: 2},
		Limits: Limits{MaxTextBytes: events.DefaultMaxTextBytes, MaxClockSkew: events.DefaultMaxClockSkew},
		// Loopback, like the embedded NATS server: /metrics and the inspector are
		// for this host unless a deployment opens them (compose, deploy/k8s do).
		HTTP: HTTP{Listen: "127.0.0.1:9090"},
		Log:  Log{Level: "info", Format: "json"},
		// A worker's live heap is small (tens of MiB) and its garbage plentiful: at
		// GOGC=100 alone the collector ran every ~40 ms under load, and its mark
		// phases set the context requests' p99 (BENCHMARKS.md).
		Runtime: Runtime{GCMinHeapMB: 128},
	}
}

// ContextBudget is the default token budget of a context pack: ContextBudgetTokens,
// or ContextBudgetPercent of ContextWindowTokens when that is set and smaller (or
// the tokens are 0). Never below 1.
func (m Memory) ContextBudget() int {
	budget := m.ContextBudgetTokens
	if m.ContextBudgetPercent > 0 {
		if share := m.ContextWindowTokens * m.ContextBudgetPercent / 100; budget == 0 || share < budget {
			budget = share
		}
	}
	return max(budget, 1)
}
