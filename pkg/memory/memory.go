package memory

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/clock"
	"github.com/agentmem/agentmem/pkg/embed"
	"github.com/agentmem/agentmem/pkg/obs"
	"github.com/agentmem/agentmem/pkg/records"
	"github.com/agentmem/agentmem/pkg/redact"
	"github.com/agentmem/agentmem/pkg/vectorstore"
	"github.com/agentmem/agentmem/pkg/wordvec"
)

// Sentinel errors; every error of this package that is the caller's fault wraps
// ErrInvalid or ErrNotFound, so a request handler can answer 400 or 404 with
// errors.Is and 500 otherwise.
var (
	// ErrInvalid reports input that can never succeed. Request validation errors
	// wrap both ErrInvalid and events.ErrInvalidRequest; the message names the field.
	ErrInvalid = errors.New("memory: invalid input")
	// ErrNotFound reports a memory, item or history that does not exist (an expired
	// item does not exist).
	ErrNotFound = errors.New("memory: not found")
	// ErrInvalidConfig reports a Config or Deps that cannot work.
	ErrInvalidConfig = errors.New("memory: invalid config")
)

// DefaultHistoryStream is the default Config.HistoryStream.
const DefaultHistoryStream = "AGENTMEM_HISTORY"

// Config configures a Service. Zero fields take the defaults noted.
type Config struct {
	// HistoryStream is the JetStream stream of the history log (subjects
	// memhist.>); default "AGENTMEM_HISTORY". The consolidator appends to it too.
	HistoryStream string
	// MaxHistory bounds the changes kept per memory (newest kept), and the
	// stream's messages per memory; default 200.
	MaxHistory int
	// KEpisodic, KSemantic and KItem are the default per-type result counts of
	// Search, Recall and SearchItems (SPEC C4: 5 and 5); default 5 each.
	KEpisodic, KSemantic, KItem int
	// Rank tunes the re-ranking; see RankConfig.
	Rank RankConfig
	// Expansion tunes the query expansion with related words; see
	// ExpansionConfig.
	Expansion ExpansionConfig
	// Rerank tunes the re-ranking by sentence vectors; see RerankConfig.
	Rerank RerankConfig
	// QueryEmbedTimeout bounds the embedding of a read's query (recall, search);
	// past it the read ranks by BM25 alone and says so. Default 1.5s.
	QueryEmbedTimeout time.Duration
	// EmbedRetryAfter is how long after a failed query embedding reads skip the
	// embedder (fail fast during a known outage); default 10s.
	EmbedRetryAfter time.Duration
	// QueryCacheSize is how many query embeddings reads keep (embed.Cached); 0
	// keeps none.
	QueryCacheSize int
}

func (c *Config) setDefaults() {
	if c.HistoryStream == "" {
		c.HistoryStream = DefaultHistoryStream
	}
	if c.MaxHistory == 0 {
		c.MaxHistory = 200
	}
	if c.KEpisodic == 0 {
		c.KEpisodic = 5
	}
	if c.KSemantic == 0 {
		c.KSemantic = 5
	}
	if c.KItem == 0 {
		c.KItem = 5
	}
	if c.QueryEmbedTimeout == 0 {
		c.QueryEmbedTimeout = DefaultQueryEmbedTimeout
	}
	if c.EmbedRetryAfter == 0 {
		c.EmbedRetryAfter = DefaultEmbedRetryAfter
	}
	c.Rank.setDefaults()
	c.Expansion.setDefaults()
	c.Rerank.setDefaults()
}

// Validate reports configuration errors, naming the field.
func (c Config) Validate() error {
	var errs []error
	if err := events.ValidateID("HistoryStream", c.HistoryStream); err != nil {
		errs = append(errs, err)
	}
	if c.MaxHistory < 1 {
		errs = append(errs, fmt.Errorf("MaxHistory is %d, want >= 1", c.MaxHistory))
	}
	for _, k := range []struct {
		name string
		v    int
	}{{"KEpisodic", c.KEpisodic}, {"KSemantic", c.KSemantic}, {"KItem", c.KItem}} {
		if k.v < 1 || k.v > events.MaxLimit {
			errs = append(errs, fmt.Errorf("%s is %d, want 1..%d", k.name, k.v, events.MaxLimit))
		}
	}
	if c.QueryEmbedTimeout < 0 {
		errs = append(errs, fmt.Errorf("QueryEmbedTimeout is %s, want > 0", c.QueryEmbedTimeout))
	}
	if c.EmbedRetryAfter < 0 {
		errs = append(errs, fmt.Errorf("EmbedRetryAfter is %s, want >= 0", c.EmbedRetryAfter))
	}
	if c.QueryCacheSize < 0 {
		errs = append(errs, fmt.Errorf("QueryCacheSize is %d, want >= 0", c.QueryCacheSize))
	}
	errs = append(errs, c.Rank.validate()...)
	errs = append(errs, c.Expansion.validate()...)
	errs = append(errs, c.Rerank.validate()...)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return nil
}

// Deps are the shared parts a Service uses.
type Deps struct {
	Vectors  vectorstore.Store
	Embedder embed.Embedder
	// JS holds the history stream.
	JS jetstream.JetStream
	// Now is the service's clock: timestamps, ages for ranking, and item expiry
	// (default time.Now).
	Now func() time.Time
}

// Service is the memory service: the mem0-style API over the vector store (SPEC
// C2), memory items (D4), the shared recall-and-rank primitive and the history log.
// It is safe for concurrent use.
type Service struct {
	cfg     Config
	vectors vectorstore.Store
	emb     embed.Embedder
	query   embed.Embedder // emb, or emb with a cache (Config.QueryCacheSize)
	log     *HistoryLog
	logger  *zap.Logger
	clock   func() time.Time          // deps.Now, not truncated
	words   *wordvec.Table            // nil: neither query expansion nor re-ranking
	termsOf func(string) textTermList // the re-ranking's tokenizer, cached; nil without it

	// embedDownUntil is the Unix nanosecond time until which reads skip the
	// embedder (0: not known to be down); embedErr its last error.
	embedDownUntil atomic.Int64
	embedErr       atomic.Pointer[string]
}

// New creates or updates the history stream and returns the service.
func New(ctx context.Context, cfg Config, deps Deps, logger *zap.Logger) (*Service, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var missing []error
	if deps.Vectors == nil {
		missing = append(missing, errors.New("Deps.Vectors is required"))
	}
	if deps.Embedder == nil {
		missing = append(missing, errors.New("Deps.Embedder is required"))
	}
	if deps.JS == nil {
		missing = append(missing, errors.New("Deps.JS is required"))
	}
	if err := errors.Join(missing...); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if deps.Now == nil {
		deps.Now = time.Now
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	query := deps.Embedder
	if cfg.QueryCacheSize > 0 {
		c, err := embed.NewCached(deps.Embedder, cfg.QueryCacheSize)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
		}
		query = c
	}
	log, err := newHistoryLog(ctx, deps.JS, cfg)
	if err != nil {
		return nil, err
	}
	var words *wordvec.Table
	if cfg.Expansion.Enabled || cfg.Rerank.Enabled {
		words = wordvec.Default() // parsed here, not on the first request
	}
	var termsOf func(string) textTermList
	if cfg.Rerank.Enabled {
		termsOf = newTermCache()
	}
	return &Service{
		words:   words,
		termsOf: termsOf,
		cfg:     cfg,
		vectors: deps.Vectors,
		emb:     deps.Embedder,
		query:   query,
		log:     log,
		logger:  logger,
		clock:   deps.Now,
	}, nil
}

// timeResolution is what the vector store keeps of a time; the service's clock is
// cut to it so that times in metadata equal the record's own.
const timeResolution = time.Microsecond

// nowAt is the service's clock, or the time of the write being applied
// (clock.At), cut to what the vector store keeps.
func (s *Service) nowAt(ctx context.Context) time.Time {
	return clock.Now(ctx, s.clock).UTC().Truncate(timeResolution)
}

// Log is the history log, shared with the consolidator.
func (s *Service) Log() *HistoryLog { return s.log }

// vectorTypes are the memory types of the C2 API; items have their own calls.
var vectorTypes = []vectorstore.MemoryType{vectorstore.Episodic, vectorstore.Semantic}

// invalid wraps a validation error with ErrInvalid, keeping its own sentinels.
func invalid(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrInvalid, err)
}

// invalidf is an ErrInvalid naming what is wrong.
func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// storeErr adds context to a vector store error and maps its input errors to
// ErrInvalid and its not-found to ErrNotFound.
func storeErr(op string, err error) error {
	switch {
	case errors.Is(err, vectorstore.ErrNotFound):
		return fmt.Errorf("%w: %s: %w", ErrNotFound, op, err)
	case errors.Is(err, vectorstore.ErrInvalidFilter), errors.Is(err, vectorstore.ErrInvalidQuery),
		errors.Is(err, vectorstore.ErrInvalidRecord):
		return fmt.Errorf("%w: %s: %w", ErrInvalid, op, err)
	}
	return fmt.Errorf("memory: %s: %w", op, err)
}

// canonicalID parses a memory id, naming the field when it is not a UUID.
func canonicalID(field, id string) (string, error) {
	c, err := vectorstore.CanonicalID(id)
	if err != nil {
		return "", invalidf("%s %q is not a memory id (a UUID)", field, id)
	}
	return c, nil
}

// embedOne embeds one text with e (s.emb, or s.query for a read's query).
func embedOne(ctx context.Context, e embed.Embedder, text string) ([]float32, error) {
	vecs, err := e.Embed(ctx, []string{text})
	if err != nil {
		return nil, fmt.Errorf("memory: embed: %w", err)
	}
	if len(vecs) != 1 {
		return nil, fmt.Errorf("memory: embed: %d vectors for 1 text", len(vecs))
	}
	return vecs[0], nil
}

// live reports whether r is visible at now: the service's clock decides expiry,
// so every read asks the store for expired records too and filters here.
func live(r vectorstore.Record, now time.Time) bool {
	return r.ExpiresAt.IsZero() || now.Before(r.ExpiresAt)
}

// fetch returns the partition's live record id of one of types, or ErrNotFound.
func (s *Service) fetch(ctx context.Context, tenant, userID, id string, types []vectorstore.MemoryType) (vectorstore.Record, error) {
	recs, _, err := s.vectors.Scroll(ctx, vectorstore.Filter{
		Tenant: tenant, UserID: userID, IDs: []string{id}, MemoryTypes: types, IncludeExpired: true,
	}, "", 1)
	if err != nil {
		return vectorstore.Record{}, storeErr("get "+id, err)
	}
	if len(recs) == 0 || !live(recs[0], s.nowAt(ctx)) {
		return vectorstore.Record{}, fmt.Errorf("%w: memory %s of user %s", ErrNotFound, id, userID)
	}
	return recs[0], nil
}

// appendHistory records a change after the store write it describes. The record
// is the truth and the write already happened, so a failure is logged rather
// than failing the call (a retry would not redo the write, only repeat the error).
func (s *Service) appendHistory(ctx context.Context, tenant, userID, id string, ch events.Change) {
	if err := s.log.Append(ctx, tenant, userID, id, ch); err != nil {
		s.logger.Warn("memory history not recorded", obs.Tenant(tenant), obs.User(userID),
			obs.MemoryID(id), zap.String("op", ch.Op), zap.Error(err))
	}
}

// Add writes one memory (SPEC C2 add). The id is deterministic from the input, so
// adding the same memory again (a retried request) changes nothing and returns the
// same id; see the package documentation.
func (s *Service) Add(ctx context.Context, tenant string, req events.AddRequest) (events.AddReply, error) {
	if err := firstErr(events.ValidateID("tenant", tenant), req.Validate()); err != nil {
		return events.AddReply{}, invalid(err)
	}
	now := s.nowAt(ctx)
	rec, err := newRecord(tenant, req, now)
	if err != nil {
		return events.AddReply{}, err
	}
	existing, err := s.vectors.Get(ctx, tenant, req.UserID, rec.ID)
	if err != nil {
		return events.AddReply{}, storeErr("add", err)
	}
	if len(existing) > 0 {
		return events.AddReply{MemoryIDs: []string{rec.ID}}, nil
	}
	if rec.Vector, err = embedOne(ctx, s.emb, rec.Text); err != nil {
		return events.AddReply{}, err
	}
	if err := s.vectors.Upsert(ctx, rec); err != nil {
		return events.AddReply{}, storeErr("add", err)
	}
	s.appendHistory(ctx, tenant, req.UserID, rec.ID, events.Change{
		TS: now, Op: "add", Text: rec.Text, Detail: map[string]any{"memory_type": string(rec.MemoryType)},
	})
	return events.AddReply{MemoryIDs: []string{rec.ID}}, nil
}

// Get returns one episodic or semantic memory (SPEC C2 get).
func (s *Service) Get(ctx context.Context, tenant string, req events.GetRequest) (events.Memory, error) {
	if err := firstErr(events.ValidateID("tenant", tenant), req.Validate()); err != nil {
		return events.Memory{}, invalid(err)
	}
	id, err := canonicalID("id", req.ID)
	if err != nil {
		return events.Memory{}, err
	}
	rec, err := s.fetch(ctx, tenant, req.UserID, id, vectorTypes)
	if err != nil {
		return events.Memory{}, err
	}
	return toMemory(rec), nil
}

// Search is the C2 search: Recall over the requested vector memory types
// (episodic and semantic by default; markdown is the retriever's and ignored
// here). A positive req.Limit caps each type and the whole result; otherwise each
// type gets its K of Config.
func (s *Service) Search(ctx context.Context, tenant string, req events.SearchRequest) (events.SearchReply, error) {
	if err := firstErr(events.ValidateID("tenant", tenant), req.Validate()); err != nil {
		return events.SearchReply{}, invalid(err)
	}
	var types []vectorstore.MemoryType
	for _, t := range req.MemoryTypes {
		if vt := vectorstore.MemoryType(t); vt.Valid() && !slices.Contains(types, vt) {
			types = append(types, vt)
		}
	}
	if len(req.MemoryTypes) == 0 {
		types = vectorTypes
	}
	reply := events.SearchReply{Results: []events.SearchResult{}}
	if len(types) == 0 {
		return reply, nil
	}
	var limits map[vectorstore.MemoryType]int
	if req.Limit > 0 {
		limits = make(map[vectorstore.MemoryType]int, len(types))
		for _, t := range types {
			limits[t] = req.Limit
		}
	}
	recalled, err := s.RecallStatus(ctx, tenant, req.UserID, req.Query, types, limits)
	if err != nil {
		return events.SearchReply{}, err
	}
	ranked := recalled.Ranked
	reply.Degraded = recalled.Degraded
	if req.Limit > 0 && len(ranked) > req.Limit {
		ranked = ranked[:req.Limit]
	}
	for _, r := range ranked {
		reply.Results = append(reply.Results, toSearchResult(r))
	}
	return reply, nil
}

// Update rewrites a memory's text and/or metadata (SPEC C2 update). A new text is
// re-embedded; an episodic memory gets an update entry {ts, context,
// previous_text} in metadata.updates, as reconsolidation writes (C5).
func (s *Service) Update(ctx context.Context, tenant string, req events.UpdateRequest) (events.Memory, error) {
	if err := firstErr(events.ValidateID("tenant", tenant), req.Validate()); err != nil {
		return events.Memory{}, invalid(err)
	}
	id, err := canonicalID("id", req.ID)
	if err != nil {
		return events.Memory{}, err
	}
	rec, err := s.fetch(ctx, tenant, req.UserID, id, vectorTypes)
	if err != nil {
		return events.Memory{}, err
	}
	if err := checkCallerMetadata(rec.MemoryType, req.Metadata); err != nil {
		return events.Memory{}, err
	}
	now := s.nowAt(ctx)
	patch := vectorstore.Patch{Metadata: cloneMap(req.Metadata)}
	if patch.Metadata == nil {
		patch.Metadata = map[string]any{}
	}
	text := rec.Text
	if req.Text = redactText(req.Text); req.Text != "" && req.Text != rec.Text {
		text = req.Text
		if patch.Vector, err = embedOne(ctx, s.emb, text); err != nil {
			return events.Memory{}, err
		}
		patch.Text = &text
	}
	setMirroredText(rec.MemoryType, patch.Metadata, text)
	if rec.MemoryType == vectorstore.Episodic {
		patch.Metadata[records.MetaUpdates] = records.AppendUpdate(rec, now, "updated through the memory API")
	}
	if err := s.vectors.UpdatePayload(ctx, tenant, req.UserID, id, patch); err != nil {
		return events.Memory{}, storeErr("update "+id, err)
	}
	detail := map[string]any{"previous_text": rec.Text}
	if len(req.Metadata) > 0 {
		detail["metadata"] = cloneMap(req.Metadata)
	}
	s.appendHistory(ctx, tenant, req.UserID, id, events.Change{TS: now, Op: "update", Text: text, Detail: detail})
	updated, err := s.fetch(ctx, tenant, req.UserID, id, vectorTypes)
	if err != nil {
		return events.Memory{}, err
	}
	return toMemory(updated), nil
}

// Delete removes episodic and semantic memories by id (SPEC C2 delete) and
// returns how many it removed; ids that do not exist are skipped, so a retried
// delete succeeds.
func (s *Service) Delete(ctx context.Context, tenant string, req events.DeleteRequest) (events.DeleteReply, error) {
	if err := firstErr(events.ValidateID("tenant", tenant), req.Validate()); err != nil {
		return events.DeleteReply{}, invalid(err)
	}
	ids := make([]string, len(req.IDs))
	for i, id := range req.IDs {
		c, err := canonicalID(fmt.Sprintf("ids[%d]", i), id)
		if err != nil {
			return events.DeleteReply{}, err
		}
		ids[i] = c
	}
	recs, _, err := s.vectors.Scroll(ctx, vectorstore.Filter{
		Tenant: tenant, UserID: req.UserID, IDs: ids, MemoryTypes: vectorTypes, IncludeExpired: true,
	}, "", len(ids))
	if err != nil {
		return events.DeleteReply{}, storeErr("delete", err)
	}
	if len(recs) == 0 {
		return events.DeleteReply{}, nil
	}
	found := make([]string, len(recs))
	for i, r := range recs {
		found[i] = r.ID
	}
	n, err := s.vectors.Delete(ctx, tenant, req.UserID, found...)
	if err != nil {
		return events.DeleteReply{}, storeErr("delete", err)
	}
	now := s.nowAt(ctx)
	for _, r := range recs {
		s.appendHistory(ctx, tenant, req.UserID, r.ID, events.Change{TS: now, Op: "delete", Text: r.Text})
	}
	return events.DeleteReply{Deleted: n}, nil
}

// Reset deletes every record of the user, of every memory type, and the user's
// history (SPEC C2 reset), and returns how many records it deleted. Other users
// are untouched.
func (s *Service) Reset(ctx context.Context, tenant string, req events.ResetRequest) (events.ResetReply, error) {
	if err := firstErr(events.ValidateID("tenant", tenant), req.Validate()); err != nil {
		return events.ResetReply{}, invalid(err)
	}
	n, err := s.vectors.DeleteByFilter(ctx, vectorstore.Filter{Tenant: tenant, UserID: req.UserID, IncludeExpired: true})
	if err != nil {
		return events.ResetReply{}, storeErr("reset", err)
	}
	if err := s.log.purgeUser(ctx, tenant, req.UserID); err != nil {
		return events.ResetReply{Deleted: n}, err
	}
	s.logger.Info("memories reset", obs.Tenant(tenant), obs.User(req.UserID), zap.Int("deleted", n))
	return events.ResetReply{Deleted: n}, nil
}

// History lists a memory's changes, oldest first (SPEC C2 history). A deleted
// memory keeps its history; ErrNotFound only when there is neither a history nor
// a memory with that id.
func (s *Service) History(ctx context.Context, tenant string, req events.HistoryRequest) (events.HistoryReply, error) {
	if err := firstErr(events.ValidateID("tenant", tenant), req.Validate()); err != nil {
		return events.HistoryReply{}, invalid(err)
	}
	id, err := canonicalID("id", req.ID)
	if err != nil {
		return events.HistoryReply{}, err
	}
	changes, err := s.log.List(ctx, tenant, req.UserID, id)
	if err != nil {
		return events.HistoryReply{}, err
	}
	if len(changes) > 0 && changes[0].Op == "add" {
		return events.HistoryReply{ID: id, Changes: changes}, nil
	}
	// The pipeline (ingest, extraction) writes memories without a history entry,
	// which would cost a write per observation; the creation is told from the
	// record instead, so every reader (CLI, SDK, inspector) sees the same history.
	rec, err := s.fetch(ctx, tenant, req.UserID, id, vectorTypes)
	switch {
	case err == nil:
		changes = append([]events.Change{creation(rec)}, changes...)
	case len(changes) == 0 || !errors.Is(err, ErrNotFound):
		return events.HistoryReply{}, err
	}
	return events.HistoryReply{ID: id, Changes: changes}, nil
}

// creation is the "create" change of a memory the pipeline wrote: its time, its
// statement (without the earlier messages kept as its context) and the session
// it came from.
func creation(rec vectorstore.Record) events.Change {
	statement, _ := records.SplitContext(rec)
	ch := events.Change{TS: rec.TS, Op: "create", Text: statement, Detail: map[string]any{"memory_type": string(rec.MemoryType)}}
	if rec.ChatID != "" {
		ch.Detail["session"] = rec.ChatID
	}
	return ch
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// finite reports whether v is a usable number.
func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// redactText is text with its credentials replaced by markers (pkg/redact): what
// a caller writes through add, update or an item is remembered like what an
// agent says, never a secret in clear. Planted instructions are not dropped
// here: a caller that writes a memory is the one instructing.
func redactText(text string) string {
	text, _ = redact.Text(text)
	return text
}
