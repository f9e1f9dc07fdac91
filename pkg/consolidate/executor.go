package consolidate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/agentmem/agentmem/pkg/embed"
	"github.com/agentmem/agentmem/pkg/obs"
	"github.com/agentmem/agentmem/pkg/processor"
	"github.com/agentmem/agentmem/pkg/records"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// DefaultPageSize is how many records the executor reads per Scroll call.
const DefaultPageSize = 256

// ExecutorConfig configures an Executor. Zero values take the defaults noted.
type ExecutorConfig struct {
	// Thresholds of the planner; zero fields take the SPEC values.
	Thresholds Thresholds
	// PageSize is the Scroll page size (default 256).
	PageSize int
	// Now stamps update entries (default time.Now).
	Now func() time.Time
}

func (c *ExecutorConfig) setDefaults() {
	c.Thresholds = c.Thresholds.withDefaults()
	if c.PageSize == 0 {
		c.PageSize = DefaultPageSize
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Validate reports what is wrong with the configuration (after defaults), if
// anything.
func (c ExecutorConfig) Validate() error {
	if c.PageSize < 0 {
		return fmt.Errorf("%w: page size %d is negative", ErrInvalidConfig, c.PageSize)
	}
	return c.Thresholds.Validate()
}

// Executor carries out consolidation plans and reconsolidation on a vector store.
type Executor struct {
	cfg    ExecutorConfig
	store  vectorstore.Store
	emb    embed.Embedder
	merger processor.Merger
	sep    processor.Separator
	logger *zap.Logger
}

// NewExecutor returns an Executor. A nil merger or separator takes the rule-based
// one; a nil logger logs nothing.
func NewExecutor(cfg ExecutorConfig, store vectorstore.Store, emb embed.Embedder, m processor.Merger, s processor.Separator, logger *zap.Logger) (*Executor, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if store == nil || emb == nil {
		return nil, fmt.Errorf("%w: the executor needs a store and an embedder", ErrInvalidConfig)
	}
	if m == nil {
		m = processor.NewRuleMerger()
	}
	if s == nil {
		s = processor.NewRuleSeparator()
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	return &Executor{cfg: cfg, store: store, emb: emb, merger: m, sep: s, logger: logger}, nil
}

// Result counts what one consolidation run did.
type Result struct {
	Merged    int // pairs merged into one record
	Separated int // pairs rewritten to be distinct
	// Cleaned counts originals of an earlier merge that were still stored (a run
	// stopped between its insert and its delete, or a redelivered observation
	// re-created them) and were deleted.
	Cleaned int
}

// Consolidate merges and separates the episodic memories of one user (SPEC C6).
//
// A merge inserts the merged record first, under an id derived from both
// originals, and deletes the originals after. A run that stops in between leaves
// the merged record and both originals; the next run finds the originals' ids in
// the merged record's merged_from_ids and deletes them before planning, so nothing
// is lost and the store converges to what one complete run gives. Two runs at once
// plan the same merges (the plan is deterministic) and upsert the same ids.
func (e *Executor) Consolidate(ctx context.Context, tenant, userID string) (Result, error) {
	var res Result
	recs, err := e.episodes(ctx, tenant, userID)
	if err != nil {
		return res, err
	}
	if recs, res.Cleaned, err = e.cleanMerged(ctx, tenant, userID, recs); err != nil {
		return res, err
	}
	for _, act := range Plan(recs, e.cfg.Thresholds) {
		switch act.Kind {
		case ActionMerge:
			err = e.merge(ctx, act)
			if err == nil {
				res.Merged++
			}
		case ActionSeparate:
			var done bool
			done, err = e.separate(ctx, act)
			if done {
				res.Separated++
			}
		}
		if err != nil {
			return res, fmt.Errorf("consolidate: consolidate %s/%s: %s %s and %s: %w", tenant, userID, act.Kind, act.A.ID, act.B.ID, err)
		}
	}
	e.logger.Info("consolidated", obs.Tenant(tenant), obs.User(userID),
		zap.Int("episodes", len(recs)), zap.Int("merged", res.Merged),
		zap.Int("separated", res.Separated), zap.Int("cleaned", res.Cleaned))
	return res, nil
}

// episodes reads every episodic record of the user.
func (e *Executor) episodes(ctx context.Context, tenant, userID string) ([]vectorstore.Record, error) {
	if err := vectorstore.ValidatePartition(tenant, userID); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidInput, err)
	}
	f := vectorstore.Filter{Tenant: tenant, UserID: userID, MemoryTypes: []vectorstore.MemoryType{vectorstore.Episodic}}
	var all []vectorstore.Record
	offset := ""
	for {
		page, next, err := e.store.Scroll(ctx, f, offset, e.cfg.PageSize)
		if err != nil {
			return nil, fmt.Errorf("consolidate: read episodes of %s/%s: %w", tenant, userID, err)
		}
		all = append(all, page...)
		if next == "" {
			return all, nil
		}
		offset = next
	}
}

// cleanMerged deletes records that a stored record was merged from, and returns
// the others.
func (e *Executor) cleanMerged(ctx context.Context, tenant, userID string, recs []vectorstore.Record) ([]vectorstore.Record, int, error) {
	mergedInto := make(map[string]bool)
	for _, r := range recs {
		for _, id := range records.StringList(r.Metadata[records.MetaMergedFromIDs]) {
			if id != r.ID {
				mergedInto[id] = true
			}
		}
	}
	var stale []string
	live := recs[:0:0]
	for _, r := range recs {
		if mergedInto[r.ID] {
			stale = append(stale, r.ID)
		} else {
			live = append(live, r)
		}
	}
	if len(stale) == 0 {
		return live, 0, nil
	}
	n, err := e.store.Delete(ctx, tenant, userID, stale...)
	if err != nil {
		return nil, 0, fmt.Errorf("consolidate: delete already merged records of %s/%s: %w", tenant, userID, err)
	}
	e.logger.Info("deleted originals of earlier merges", obs.Tenant(tenant),
		obs.User(userID), zap.Strings("ids", stale))
	return live, n, nil
}

// merge inserts the merged record, then deletes the originals.
func (e *Executor) merge(ctx context.Context, act Action) error {
	merged, err := e.merger.Merge(ctx, act.A, act.B)
	if err != nil {
		return err
	}
	vecs, err := e.embed(ctx, merged.Text)
	if err != nil {
		return err
	}
	m := MergedRecord(act.A, act.B, merged.Text, vecs[0])
	markProcessedBy(m.Metadata, merged)
	if err := e.store.Upsert(ctx, m); err != nil {
		return err
	}
	_, err = e.store.Delete(ctx, act.A.Tenant, act.A.UserID, act.A.ID, act.B.ID)
	return err
}

// separate rewrites both records of act; done is false when one of them was gone
// (another run consolidated it meanwhile), which is not an error.
func (e *Executor) separate(ctx context.Context, act Action) (done bool, err error) {
	ta, tb, err := e.sep.Separate(ctx, act.A, act.B)
	if err != nil {
		return false, err
	}
	vecs, err := e.embed(ctx, ta.Text, tb.Text)
	if err != nil {
		return false, err
	}
	for i, r := range []struct {
		rec, other vectorstore.Record
		rw         processor.Rewrite
	}{{act.A, act.B, ta}, {act.B, act.A, tb}} {
		patch := e.rewritePatch(r.rec, r.rw.Text, vecs[i], "separated from memory "+r.other.ID)
		markProcessedBy(patch.Metadata, r.rw)
		patch.Metadata[records.MetaSeparatedFromIDs] = records.ToAnyList(union(records.StringList(r.rec.Metadata[records.MetaSeparatedFromIDs]), []string{r.other.ID}))
		err := e.store.UpdatePayload(ctx, r.rec.Tenant, r.rec.UserID, r.rec.ID, patch)
		if errors.Is(err, vectorstore.ErrNotFound) {
			e.logger.Info("memory gone before it was separated", obs.MemoryID(r.rec.ID))
			return false, nil
		}
		if err != nil {
			return false, err
		}
	}
	return true, nil
}

// rewritePatch replaces rec's text and vector and appends an update entry that
// keeps the previous text. Time, chat and speaker are not in the patch, so they
// never change.
func (e *Executor) rewritePatch(rec vectorstore.Record, text string, vec []float32, why string) vectorstore.Patch {
	return vectorstore.Patch{
		Text:   &text,
		Vector: vec,
		Metadata: map[string]any{
			records.MetaThing:   text,
			records.MetaUpdates: records.AppendUpdate(rec, e.cfg.Now(), why),
			// A merge or separation makes a new statement: reconsolidation
			// rewrites from it from now on.
			records.MetaBaseText: text,
		},
	}
}

// markProcessedBy marks md, the metadata of a record rw is written to, with
// rw.ProcessedBy when the rules wrote rw in the model's place. A model's rewrite
// leaves the key as it is: an earlier step's fallback mark stays until a redo.
func markProcessedBy(md map[string]any, rw processor.Rewrite) {
	if rw.ProcessedBy != "" {
		md[records.MetaProcessedBy] = rw.ProcessedBy
	}
}

// embed embeds texts and checks the embedder kept its contract.
func (e *Executor) embed(ctx context.Context, texts ...string) ([][]float32, error) {
	vecs, err := e.emb.Embed(ctx, texts)
	if err != nil {
		return nil, fmt.Errorf("embed: %w", err)
	}
	if len(vecs) != len(texts) {
		return nil, fmt.Errorf("embed: %d vectors for %d texts", len(vecs), len(texts))
	}
	return vecs, nil
}

// Reconsolidate rewrites the user's episodic memories ids after their use in
// newContext (SPEC C5): newContext becomes the record's context, an update entry
// {ts, context, previous_text, previous_context} is appended, the text (and
// vector) become r's rewrite of the base text (records.MetaBaseText, so rewrites
// never stack) when r rewrites it (the offline reconsolidator does not), and
// time, chat, speaker and the statement (thing) are never touched. A rewrite
// that loses a number, date or entity of the statement is rejected and logged;
// that memory keeps its text. Semantic and item records among ids are left alone: a fact is not an
// experience to re-live, and its text is what deduplicates it. Ids that are not
// stored are reported with vectorstore.ErrNotFound after the others are done. A
// nil r takes the rule-based reconsolidator.
//
// The append is a read-modify-write of the updates list: two reconsolidations of
// one memory at the same instant may keep only one of their entries.
func (e *Executor) Reconsolidate(ctx context.Context, tenant, userID string, ids []string, newContext string, r processor.Reconsolidator) error {
	if err := vectorstore.ValidatePartition(tenant, userID); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidInput, err)
	}
	if r == nil {
		r = processor.NewRuleReconsolidator()
	}
	recs, err := e.store.Get(ctx, tenant, userID, ids...)
	if err != nil {
		return fmt.Errorf("consolidate: reconsolidate %s/%s: %w", tenant, userID, err)
	}
	var (
		targets []vectorstore.Record
		patches []vectorstore.Patch
		texts   []string // the rewritten texts, embedded in one call
		written []int    // indexes into patches of the rewritten texts
		found   = make(map[string]bool, len(recs))
	)
	for _, rec := range recs {
		found[rec.ID] = true
		if rec.MemoryType != vectorstore.Episodic {
			continue
		}
		rw, err := rewriteFromBase(ctx, r, rec, newContext)
		if errors.Is(err, ErrRewriteLosesFacts) {
			e.logger.Warn("reconsolidation rejected; the memory keeps its text", obs.MemoryID(rec.ID), zap.Error(err))
			continue
		}
		if err != nil {
			return fmt.Errorf("consolidate: reconsolidate %s: %w", rec.ID, err)
		}
		patch := reconsolidationPatch(rec, rw, newContext, e.cfg.Now())
		if patch.Text != nil {
			texts, written = append(texts, rw.Text), append(written, len(patches))
		}
		targets, patches = append(targets, rec), append(patches, patch)
	}
	if len(texts) > 0 {
		vecs, err := e.embed(ctx, texts...)
		if err != nil {
			return fmt.Errorf("consolidate: reconsolidate %s/%s: %w", tenant, userID, err)
		}
		for j, i := range written {
			patches[i].Vector = vecs[j]
		}
	}
	for i, rec := range targets {
		if err := e.store.UpdatePayload(ctx, tenant, userID, rec.ID, patches[i]); err != nil {
			return fmt.Errorf("consolidate: reconsolidate %s: %w", rec.ID, err)
		}
	}
	var missing []string
	for _, id := range ids {
		if c, err := vectorstore.CanonicalID(id); err != nil || !found[c] {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("consolidate: reconsolidate %s/%s: %w: %v", tenant, userID, vectorstore.ErrNotFound, slices.Compact(missing))
	}
	return nil
}
