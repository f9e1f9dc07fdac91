package extract

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/bus"
	"github.com/agentmem/agentmem/pkg/docstore"
	"github.com/agentmem/agentmem/pkg/embed"
	"github.com/agentmem/agentmem/pkg/eventstore"
	"github.com/agentmem/agentmem/pkg/kvcas"
	"github.com/agentmem/agentmem/pkg/lifecycle"
	"github.com/agentmem/agentmem/pkg/llm"
	"github.com/agentmem/agentmem/pkg/markdown"
	"github.com/agentmem/agentmem/pkg/obs"
	"github.com/agentmem/agentmem/pkg/pipeline"
	"github.com/agentmem/agentmem/pkg/processor"
	"github.com/agentmem/agentmem/pkg/quota"
	"github.com/agentmem/agentmem/pkg/records"
	"github.com/agentmem/agentmem/pkg/redact"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// Sentinel errors of the worker.
var (
	// ErrInvalidConfig is returned for a WorkerConfig or WorkerDeps that cannot work.
	ErrInvalidConfig = errors.New("extract: invalid config")
	// ErrState reports an extraction record in the state bucket that cannot be read.
	ErrState = errors.New("extract: unreadable extraction state")
)

// DefaultStateBucket is the KV bucket holding one extraction record per session.
const DefaultStateBucket = "agentmem_extractions"

// WorkerConfig configures the extractor worker.
type WorkerConfig struct {
	// Consumer is the durable; default bus.WorkerConsumer(bus.WorkerExtractor, defaults).
	Consumer bus.ConsumerSpec
	// Concurrency is how many sessions one replica handles at once, of different
	// users (a user's sessions are handled one after the other); default 4.
	Concurrency int
	// Router configures the retries of a failed session and the handler timeout.
	// The timeout must cover an extraction with its LLM retries.
	Router bus.RouterConfig
	// StateBucket is the KV bucket of extraction records; default DefaultStateBucket.
	StateBucket string
	// Limits bound each session_ended the worker consumes (events.Admit); one
	// outside them is dead-lettered. The session's observations are read through
	// the event store, which applies its own (the same configuration).
	Limits events.Limits

	// ChunkMessages cuts a session longer than this into chunks asked separately
	// (concurrently) whose results are kept until the session is extracted, so a
	// retry resumes after the chunks done; 0 asks the whole session at once (the
	// offline extractor, whose Markdown must not depend on chunking).
	ChunkMessages int
	// ModelConcurrency is how many chunk extractions and write decisions of one
	// session run at once; default 1. The model client bounds the process's calls
	// in flight anyway (llm.Config.Concurrency).
	ModelConcurrency int
	// CallTimeout and CallBudget describe the model: the timeout of one attempt
	// and the longest one call may take with its retries (llm.Config.CallBudget).
	// With CallTimeout set each attempt gets the deadline AttemptBudget derives
	// from its session; 0 leaves it to the Router's HandlerTimeout.
	CallTimeout, CallBudget time.Duration
	// Ingest names the ingest durable whose write decisions are reused.
	Ingest IngestReuse
	// AgentLearning (memory.agent_learning) promotes a session's impersonal
	// error→fix pairs and procedures to the scope of the agent that held it
	// (agentLessons), with their provenance in the state bucket.
	AgentLearning bool
}

func (c *WorkerConfig) setDefaults() {
	if c.Consumer.Durable == "" && len(c.Consumer.FilterSubjects) == 0 {
		c.Consumer = bus.WorkerConsumer(bus.WorkerExtractor, bus.ConsumerDefaults{})
	}
	if c.StateBucket == "" {
		c.StateBucket = DefaultStateBucket
	}
}

// Validate reports configuration errors, naming the field.
func (c WorkerConfig) Validate() error {
	if err := c.Consumer.Validate(); err != nil {
		return fmt.Errorf("%w: Consumer: %w", ErrInvalidConfig, err)
	}
	if c.Concurrency < 0 {
		return fmt.Errorf("%w: Concurrency %d is negative", ErrInvalidConfig, c.Concurrency)
	}
	if c.ChunkMessages < 0 || c.ModelConcurrency < 0 || c.CallTimeout < 0 || c.CallBudget < 0 || c.Ingest.Wait < 0 {
		return fmt.Errorf("%w: ChunkMessages, ModelConcurrency, CallTimeout, CallBudget and Ingest.Wait must not be negative", ErrInvalidConfig)
	}
	// Bucket names are stream-name tokens; the ID alphabet is a safe subset.
	if err := events.ValidateID("StateBucket", c.StateBucket); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return nil
}

// WorkerDeps are the parts the worker uses. Decider, Semantic, Vectors and Embedder
// go together: all nil means no semantic facts are written.
type WorkerDeps struct {
	Dial      pipeline.Dialer
	JS        jetstream.JetStream // the state bucket and memory_written events
	Events    *eventstore.Store
	Docs      *docstore.Store
	Extractor Extractor
	Decider   processor.WriteDecider
	Semantic  processor.SemanticWriter
	Vectors   vectorstore.Store
	Embedder  embed.Embedder
	Metrics   *obs.Metrics
	// Summaries handles summary_due events (SPEC B2); nil acknowledges them
	// without a summary (logged).
	Summaries *lifecycle.SessionSummaries
	// Evolver, when set, reflects on the session after its summary_due (SPEC
	// B5): about every 20 messages, in namespaces with evolution_enabled.
	Evolver *lifecycle.Evolver
	// Keyring seals each extraction record, which holds what the session said,
	// with its user's key (kvcas.Sealed); nil keeps them plain.
	Keyring *kvcas.Keyring
	// Quota is the tenants' memories and markdown_bytes quotas: a session whose
	// entries or facts would take its tenant over one is dead-lettered with
	// class quota before anything is written. Nil limits nothing.
	Quota *quota.Meter
}

func (d WorkerDeps) validate() error {
	var missing []string
	for _, p := range []struct {
		name string
		nil  bool
	}{{"JS", d.JS == nil}, {"Events", d.Events == nil}, {"Docs", d.Docs == nil}, {"Extractor", d.Extractor == nil}} {
		if p.nil {
			missing = append(missing, p.name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: WorkerDeps %s missing", ErrInvalidConfig, strings.Join(missing, ", "))
	}
	set := 0
	for _, ok := range []bool{d.Decider != nil, d.Semantic != nil, d.Vectors != nil, d.Embedder != nil} {
		if ok {
			set++
		}
	}
	if set != 0 && set != 4 {
		return fmt.Errorf("%w: WorkerDeps Decider, Semantic, Vectors and Embedder must be all set (semantic facts) or all nil", ErrInvalidConfig)
	}
	return nil
}

func (d WorkerDeps) semantic() bool { return d.Semantic != nil }

// Worker is the extractor stream worker: on session_ended it reads the session back
// from the event store (SPEC D2), extracts categorized entries (A3), appends them to
// the files their categories route to (A4, with the capacity bound A7), writes the
// stable facts of the session as semantic memories (C8) and publishes memory_written.
//
// Each session takes effect exactly once across redeliveries, duplicated
// session_ended events and crashes, through a KV record per session: "extracted"
// holds the extraction (entries with their timestamps, facts with provenance) before
// anything is written, "applied" once everything is. A retry after a crash reuses
// the stored extraction, so the extractor, whose model would answer differently, is
// asked once, and the idempotent writes (deduplicated entries, deterministic fact
// ids, memory_written with a derived message id) repeat harmlessly. Sessions are
// serialised per replica; two replicas handling two session_ended events of one
// session at the same instant may both ask the extractor, but only the first
// extraction stored is ever applied.
type Worker struct {
	cfg    WorkerConfig
	deps   WorkerDeps
	logger *zap.Logger
	pipe   *pipeline.Worker
	locks  sessionLocks
	state  jetstream.KeyValue // set by Run before the pipeline starts
}

// NewWorker returns the worker; nothing connects before Run.
func NewWorker(cfg WorkerConfig, deps WorkerDeps, logger *zap.Logger) (*Worker, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := deps.validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	w := &Worker{cfg: cfg, deps: deps, logger: logger.Named("extractor"), locks: sessionLocks{m: make(map[string]*sessionLock)}}
	pipe, err := pipeline.New(pipeline.Config{
		Worker:      bus.WorkerExtractor,
		Consumer:    cfg.Consumer,
		Concurrency: cfg.Concurrency,
		// Entries are appended, and facts weighed against those before them, in
		// the order a user's sessions are handled: the stream's, as in a replay.
		InOrderPerUser: true,
		Router:         cfg.Router,
		Dial:           deps.Dial,
		Metrics:        deps.Metrics,
		Limits:         cfg.Limits,
	}, w.handle, logger)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	w.pipe = pipe
	return w, nil
}

// Run provisions the state bucket and consumes until ctx ends; see pipeline.Worker.Run.
func (w *Worker) Run(ctx context.Context) error {
	kv, err := kvcas.EnsureKV(ctx, w.deps.JS, jetstream.KeyValueConfig{
		Bucket:      w.cfg.StateBucket,
		Description: "agentmem extractor: one extraction record per session",
		History:     1,
		Storage:     jetstream.FileStorage,
	})
	if err != nil {
		return fmt.Errorf("extract: %w", err)
	}
	w.state = kvcas.Sealed(kv, w.deps.Keyring, kvcas.OwnerAt(0))
	return w.pipe.Run(ctx)
}

// Ready reports whether the worker is consuming, for /readyz.
func (w *Worker) Ready(ctx context.Context) error { return w.pipe.Ready(ctx) }

// Extraction statuses.
const (
	statusExtracted = "extracted"
	statusApplied   = "applied"
)

// extraction is a session's record in the state bucket.
type extraction struct {
	Status  string        `json:"status"`
	EventID string        `json:"event_id"` // the session_ended event that extracted
	Entries []storedEntry `json:"entries"`
	Facts   []storedFact  `json:"facts,omitempty"`
	// ProcessedBy is ProcessedByRulesFallback when the rules extracted in the
	// model's place: a later pass finds such sessions by it.
	ProcessedBy string `json:"processed_by,omitempty"`
	// Learned are the entries promoted to the agent's scope (AgentLearning).
	Learned []storedEntry `json:"learned,omitempty"`
}

// held is what applying ex adds to its tenant's held quotas, at most: its
// entries' bytes and its facts (an entry or fact already stored adds nothing).
func (ex *extraction) held() map[quota.Kind]int {
	out := map[quota.Kind]int{}
	for _, e := range ex.Entries {
		out[quota.MarkdownBytes] += len(e.Content)
	}
	if len(ex.Facts) > 0 {
		out[quota.Memories] = len(ex.Facts)
	}
	return out
}

type storedEntry struct {
	Time     time.Time         `json:"ts"`
	Category markdown.Category `json:"category"`
	Content  string            `json:"content"`
}

type storedFact struct {
	Fact           string           `json:"fact"`
	SourceChatID   string           `json:"source_chatid"`
	FirstSeen      time.Time        `json:"first_seen"`
	SourceEventIDs []string         `json:"source_event_ids"`
	SourceMeta     []map[string]any `json:"source_meta,omitempty"`
	ProcessedBy    string           `json:"processed_by,omitempty"`
}

// handle processes one session_ended event; see Worker.
func (w *Worker) handle(ctx context.Context, env events.Envelope) error {
	if env.Type == events.TypeSummaryDue {
		return w.summarize(ctx, env)
	}
	if env.Type != events.TypeSessionEnded {
		return bus.Permanent(fmt.Errorf("extract: event %s is a %s, want %s", env.ID, env.Type, events.TypeSessionEnded))
	}
	key := env.Tenant + "." + env.UserID + "." + env.SessionID
	unlock, err := w.locks.lock(ctx, key)
	if err != nil {
		return fmt.Errorf("extract: session %s: %w", key, err)
	}
	defer unlock()
	log := w.logger.With(obs.Tenant(env.Tenant), obs.User(env.UserID), obs.Session(env.SessionID), obs.EventID(env.ID))

	ex, rev, err := w.load(ctx, key)
	if err != nil {
		return err
	}
	if ex == nil {
		if ex, rev, err = w.extract(ctx, key, env, log); err != nil {
			return err
		}
	}
	if ex.Status == statusApplied {
		log.Debug("session applied; nothing to do", zap.String("by_event", ex.EventID))
		return nil
	}
	held := ex.held()
	for kind, n := range held {
		if err := w.deps.Quota.Check(ctx, env.Tenant, kind, n); err != nil {
			return fmt.Errorf("extract: session %s: %w", key, err)
		}
	}
	if err := w.apply(ctx, env, ex, log); err != nil {
		return err
	}
	for kind, n := range held {
		w.deps.Quota.Added(env.Tenant, kind, n)
	}
	ex.Status = statusApplied
	data, err := json.Marshal(ex)
	if err != nil {
		return fmt.Errorf("extract: encode state of %s: %w", key, err)
	}
	if _, err := w.state.Update(ctx, key, data, rev); err != nil {
		// A lost race means another handler applied the same record: done either way,
		// but only once the record says so.
		if cur, _, lerr := w.load(ctx, key); lerr == nil && cur != nil && cur.Status == statusApplied {
			return nil
		}
		return fmt.Errorf("extract: mark session %s applied: %w", key, err)
	}
	log.Info("session extracted", zap.Int("entries", len(ex.Entries)), zap.Int("facts", len(ex.Facts)))
	return nil
}

// extractEntries asks the extractor, and with a Reporter logs, naming the
// session, when the rules stood in for the model; by is then
// ProcessedByRulesFallback.
func (w *Worker) extractEntries(ctx context.Context, conv []Message, log *zap.Logger) (found []Extracted, by string, err error) {
	rep, ok := w.deps.Extractor.(Reporter)
	if !ok {
		found, err = w.deps.Extractor.Extract(ctx, conv)
		return found, "", err
	}
	r, err := rep.ExtractReport(ctx, conv)
	if err == nil && r.ProcessedBy != "" {
		log.Warn("model extraction unusable; the offline rules extracted this session instead",
			zap.String("processed_by", r.ProcessedBy), zap.Int("entries", len(r.Entries)), zap.String("reason", r.Reason))
	}
	return r.Entries, r.ProcessedBy, err
}

// load returns the session's record and its revision; nil when there is none.
func (w *Worker) load(ctx context.Context, key string) (*extraction, uint64, error) {
	e, err := w.state.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("extract: read state of %s: %w", key, err)
	}
	var ex extraction
	if err := json.Unmarshal(e.Value(), &ex); err != nil || (ex.Status != statusExtracted && ex.Status != statusApplied) {
		return nil, 0, bus.Permanent(fmt.Errorf("%w: key %s revision %d: %q", ErrState, key, e.Revision(), e.Value()))
	}
	return &ex, e.Revision(), nil
}

// extract reads the session, asks the extractor and finds the facts, and stores the
// result before anything is written. If another handler stored one first, that one
// is returned instead.
func (w *Worker) extract(ctx context.Context, key string, env events.Envelope, log *zap.Logger) (*extraction, uint64, error) {
	stored, err := w.deps.Events.ListSession(ctx, env.Tenant, env.UserID, env.SessionID, 0, 0)
	if err != nil {
		return nil, 0, fmt.Errorf("extract: read session %s: %w", key, err)
	}
	conv, sources := conversation(stored)
	ex := &extraction{Status: statusExtracted, EventID: env.ID, Entries: []storedEntry{}}
	chunks := 0
	if !ShouldExtract(conv) {
		// SPEC A3: nothing said, nothing to ask a model about.
		ex.Status = statusApplied
		log.Debug("nothing to extract", zap.Int("observations", len(stored)))
	} else {
		if budget := w.cfg.AttemptBudget(len(conv)); budget > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, budget)
			defer cancel()
		}
		// The entries and the facts are independent: asked at the same time.
		var (
			found    []Extracted
			extErr   error
			factsErr error
			wg       sync.WaitGroup
		)
		gctx, cancel := context.WithCancel(ctx)
		defer cancel()
		wg.Go(func() {
			if found, chunks, ex.ProcessedBy, extErr = w.extractChunks(gctx, key, conv, log); extErr != nil {
				cancel()
			}
		})
		if w.deps.semantic() {
			wg.Go(func() {
				if ex.Facts, factsErr = w.facts(gctx, env, conv, sources); factsErr != nil {
					cancel()
				}
			})
		}
		wg.Wait()
		if extErr != nil {
			log.Warn("extraction failed; nothing written", zap.Error(extErr))
			if errors.Is(extErr, llm.ErrRequest) {
				return nil, 0, bus.Permanent(fmt.Errorf("extract: session %s: %w", key, extErr))
			}
			return nil, 0, fmt.Errorf("extract: session %s: %w", key, extErr)
		}
		if factsErr != nil {
			return nil, 0, factsErr
		}
		// One stamp for the whole session, from the event rather than the clock, so
		// every retry formats byte-identical entries.
		stamp := env.TS.UTC().Truncate(time.Minute)
		for _, e := range found {
			content := markdown.SanitizeContent(e.Content)
			if !ValidCategory(e.Category) || strings.TrimSpace(content) == "" {
				log.Warn("extractor returned an unusable entry; dropped", zap.String("category", string(e.Category)))
				continue
			}
			ex.Entries = append(ex.Entries, storedEntry{Time: stamp, Category: e.Category, Content: content})
		}
		if w.cfg.AgentLearning && env.AgentID != "" {
			ex.Learned = agentLessons(ex.Entries, conv, env.UserID)
		}
	}
	data, err := json.Marshal(ex)
	if err != nil {
		return nil, 0, fmt.Errorf("extract: encode state of %s: %w", key, err)
	}
	rev, err := w.state.Create(ctx, key, data)
	if errors.Is(err, jetstream.ErrKeyExists) {
		cur, curRev, lerr := w.load(ctx, key)
		if lerr != nil {
			return nil, 0, lerr
		}
		if cur != nil {
			log.Info("another handler extracted this session first; using its result", zap.String("by_event", cur.EventID))
			w.dropChunks(ctx, key, chunks, log)
			return cur, curRev, nil
		}
	}
	if err != nil {
		return nil, 0, fmt.Errorf("extract: store state of %s: %w", key, err)
	}
	w.dropChunks(ctx, key, chunks, log)
	return ex, rev, nil
}

// source is what a message's provenance needs.
type source struct {
	meta map[string]any // nil when the observation had none
	who  string
	seq  uint64 // stream sequence of the observation
}

// conversation turns the session's observations into the extractor's messages:
// messages of every role, and tool results as tool messages (their outputs carry
// file and table structures). Tool calls and turn markers say nothing to remember.
// What ingest dead-lettered never gets here: the event store admits what it
// reads as ingest did (events.Admit, claims).
func conversation(stored []eventstore.Stored) ([]Message, map[string]source) {
	conv := make([]Message, 0, len(stored))
	sources := make(map[string]source, len(stored))
	for _, st := range stored {
		o := st.Envelope.Observation
		if o == nil {
			continue
		}
		var m Message
		switch o.EffectiveKind() {
		case events.KindMessage:
			m = Message{Role: string(o.Role), Text: o.Text}
		case events.KindToolResult:
			m = Message{Role: RoleTool, Text: o.ToolResult.Output}
		default:
			continue
		}
		m.Text = redact.Clean(m.Text) // no credential or planted instruction reaches an entry
		if strings.TrimSpace(m.Text) == "" {
			continue
		}
		m.TS, m.EventID = st.Envelope.TS, st.Envelope.ID
		conv = append(conv, m)
		src := source{seq: st.Seq}
		if len(o.Meta) > 0 {
			src.meta = records.PlainMeta(o.Meta)
		}
		src.who = records.Speaker(o.Meta)
		sources[m.EventID] = src
	}
	return conv, sources
}

// facts runs the write decision over the user's messages and the semantic writer
// over the resulting episodes (SPEC C3, C8), against the facts already known of the
// user, and attaches to each fact the events and observation meta it came from.
func (w *Worker) facts(ctx context.Context, env events.Envelope, conv []Message, sources map[string]source) ([]storedFact, error) {
	var users []userMessage
	for _, m := range conv {
		if m.Role != RoleUser {
			continue
		}
		cobs := records.Observation{Role: m.Role, Text: m.Text, TS: m.TS, ChatID: env.SessionID, Who: sources[m.EventID].who, EventID: m.EventID}
		users = append(users, userMessage{obs: cobs, seq: sources[m.EventID].seq})
	}
	episodes, eventIDs, err := w.episodes(ctx, env, users, w.logger)
	if err != nil {
		return nil, err
	}
	episodeEvent := make(map[string]string, len(episodes)) // episode record id → event id
	for i, ep := range episodes {
		episodeEvent[ep.ID] = eventIDs[i]
	}
	if len(episodes) == 0 {
		return nil, nil
	}
	known, err := w.knownFacts(ctx, env.Tenant, env.UserID)
	if err != nil {
		return nil, err
	}
	found, err := w.deps.Semantic.Facts(ctx, episodes, known)
	if err != nil {
		return nil, fmt.Errorf("extract: semantic facts of session %s: %w", env.SessionID, err)
	}
	out := make([]storedFact, 0, len(found))
	for _, f := range found {
		sf := storedFact{Fact: f.Fact, SourceChatID: f.SourceChatID, FirstSeen: f.FirstSeen, ProcessedBy: f.ProcessedBy}
		// Writers report a fact's first episode by its time; every episode said at
		// that instant is a source. A fact matching none is credited to all of them.
		for _, ep := range episodes {
			if ep.TS.Equal(f.FirstSeen) {
				sf.SourceEventIDs = append(sf.SourceEventIDs, episodeEvent[ep.ID])
			}
		}
		if len(sf.SourceEventIDs) == 0 {
			for _, ep := range episodes {
				sf.SourceEventIDs = append(sf.SourceEventIDs, episodeEvent[ep.ID])
			}
		}
		for _, id := range sf.SourceEventIDs {
			if meta := sources[id].meta; meta != nil {
				sf.SourceMeta = append(sf.SourceMeta, meta)
			}
		}
		out = append(out, sf)
	}
	return out, nil
}

// knownFactsPage is the page size of the scroll over a user's semantic memories.
const knownFactsPage = 256

func (w *Worker) knownFacts(ctx context.Context, tenant, user string) ([]vectorstore.Record, error) {
	filter := vectorstore.Filter{Tenant: tenant, UserID: user, MemoryTypes: []vectorstore.MemoryType{vectorstore.Semantic}}
	var known []vectorstore.Record
	for offset := ""; ; {
		page, next, err := w.deps.Vectors.Scroll(ctx, filter, offset, knownFactsPage)
		if err != nil {
			return nil, fmt.Errorf("extract: known facts of %s/%s: %w", tenant, user, err)
		}
		known = append(known, page...)
		if next == "" {
			return known, nil
		}
		offset = next
	}
}

// apply writes an extraction: entries, facts, then memory_written. Every step is
// idempotent, so a retry after a partial apply completes it without duplicates.
func (w *Worker) apply(ctx context.Context, env events.Envelope, ex *extraction, log *zap.Logger) error {
	ns := docstore.Namespace{Tenant: env.Tenant, User: env.UserID}
	body := &events.MemoryWritten{SourceSessionID: env.SessionID}
	if len(ex.Entries) > 0 {
		entries := make([]markdown.Entry, len(ex.Entries))
		for i, e := range ex.Entries {
			entries[i] = markdown.Entry{Time: e.Time, Category: e.Category, Content: e.Content}
			body.Entries = append(body.Entries, events.WrittenEntry{File: docstore.RouteCategory(e.Category), Category: string(e.Category), Content: e.Content})
		}
		res, err := w.deps.Docs.AppendEntries(ctx, ns, entries)
		if err != nil {
			return fmt.Errorf("extract: write entries of session %s: %w", env.SessionID, err)
		}
		log.Debug("entries appended", zap.Any("appended", res.Appended), zap.Int("skipped", res.Skipped), zap.Int("dropped", res.Dropped))
	}
	if err := w.learn(ctx, env, ex.Learned); err != nil {
		return err
	}
	if len(ex.Facts) > 0 {
		ids, err := w.upsertFacts(ctx, env, ex.Facts)
		if err != nil {
			return err
		}
		body.MemoryIDs = ids
	}
	if len(body.Entries) == 0 && len(body.MemoryIDs) == 0 {
		return nil // memory_written announces something written
	}
	return w.publishWritten(ctx, env, ex.EventID, body)
}

// upsertFacts stores the facts not yet in the store and returns the ids of all. A
// fact already stored (by an earlier attempt, or by another session meanwhile) is
// left alone: replacing it would reset its hit count.
func (w *Worker) upsertFacts(ctx context.Context, env events.Envelope, facts []storedFact) ([]string, error) {
	recs := make([]vectorstore.Record, len(facts))
	ids := make([]string, len(facts))
	for i, f := range facts {
		rec := records.FactRecord(env.Tenant, env.UserID, records.Fact{Fact: f.Fact, SourceChatID: f.SourceChatID, FirstSeen: f.FirstSeen, ProcessedBy: f.ProcessedBy})
		rec.Metadata[records.MetaSourceEventIDs] = records.ToAnyList(f.SourceEventIDs)
		if len(f.SourceMeta) > 0 {
			metas := make([]any, len(f.SourceMeta))
			for j, m := range f.SourceMeta {
				metas[j] = m
			}
			rec.Metadata[records.MetaSourceMeta] = metas
		}
		recs[i], ids[i] = rec, rec.ID
	}
	existing, err := w.deps.Vectors.Get(ctx, env.Tenant, env.UserID, ids...)
	if err != nil {
		return nil, fmt.Errorf("extract: read facts of session %s: %w", env.SessionID, err)
	}
	have := make(map[string]bool, len(existing))
	for _, r := range existing {
		have[r.ID] = true
	}
	var fresh []vectorstore.Record
	var texts []string
	for _, r := range recs {
		if !have[r.ID] {
			fresh = append(fresh, r)
			texts = append(texts, r.Text)
		}
	}
	if len(fresh) == 0 {
		return ids, nil
	}
	vecs, err := w.deps.Embedder.Embed(ctx, texts)
	if err != nil {
		return nil, fmt.Errorf("extract: embed facts of session %s: %w", env.SessionID, err)
	}
	if len(vecs) != len(fresh) {
		return nil, fmt.Errorf("extract: embedder returned %d vectors for %d facts", len(vecs), len(fresh))
	}
	for i := range fresh {
		fresh[i].Vector = vecs[i]
	}
	if err := w.deps.Vectors.Upsert(ctx, fresh...); err != nil {
		return nil, fmt.Errorf("extract: store facts of session %s: %w", env.SessionID, err)
	}
	return ids, nil
}

// publishWritten announces the session's memories. The event id derives from the
// session_ended event that extracted them (whichever event applies them), so a retry
// within the stream's duplicate window publishes nothing new.
func (w *Worker) publishWritten(ctx context.Context, ended events.Envelope, extractedBy string, body *events.MemoryWritten) error {
	env := events.New(events.TypeMemoryWritten, ended.Tenant, ended.UserID, ended.AgentID, ended.SessionID)
	env.ID = writtenID(extractedBy)
	env.MemoryWritten = body
	msg, err := eventstore.Msg(env)
	if err != nil {
		return bus.Permanent(fmt.Errorf("extract: memory_written for %s: %w", ended.ID, err))
	}
	pubCtx, cancel := kvcas.WithRequestTimeout(ctx)
	defer cancel()
	if _, err := w.deps.JS.PublishMsg(pubCtx, msg); err != nil {
		return fmt.Errorf("extract: publish memory_written for %s: %w", ended.ID, kvcas.NoReply(ctx, err))
	}
	return nil
}

// maxIDLength is the longest valid event id (events.ValidateID).
const maxIDLength = 128

// writtenID is the memory_written event id for a session_ended event id: readable
// when it fits, else a digest, since event ids may already be of maximal length.
func writtenID(endedID string) string {
	const prefix = "written-"
	if len(prefix)+len(endedID) <= maxIDLength {
		return prefix + endedID
	}
	sum := sha256.Sum256([]byte(endedID))
	return prefix + hex.EncodeToString(sum[:])
}

// sessionLocks serialises the handlers of one session within a replica, so that
// session_ended events of one session arriving together extract once.
type sessionLocks struct {
	mu sync.Mutex
	m  map[string]*sessionLock
}

type sessionLock struct {
	held chan struct{} // a token: full while held
	refs int
}

// lock waits for the session's lock or for ctx to end.
func (l *sessionLocks) lock(ctx context.Context, key string) (unlock func(), err error) {
	l.mu.Lock()
	sl := l.m[key]
	if sl == nil {
		sl = &sessionLock{held: make(chan struct{}, 1)}
		l.m[key] = sl
	}
	sl.refs++
	l.mu.Unlock()
	select {
	case sl.held <- struct{}{}:
		return func() {
			<-sl.held
			l.release(key, sl)
		}, nil
	case <-ctx.Done():
		l.release(key, sl)
		return nil, ctx.Err()
	}
}

func (l *sessionLocks) release(key string, sl *sessionLock) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if sl.refs--; sl.refs == 0 {
		delete(l.m, key)
	}
}
