package consolidate

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/obs"
	"github.com/agentmem/agentmem/pkg/processor"
	"github.com/agentmem/agentmem/pkg/records"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// MetaSourceMemoryIDs links a fact to the episode it was found in (next to the
// provenance keys records.MetaSourceEventIDs and records.MetaSourceMeta).
const MetaSourceMemoryIDs = "source_memory_ids"

// writeFacts is step 2: the semantic writer over the episodes after the
// watermark (minus the lookback). It returns how many new facts it stored and the
// new watermark.
func (r *Runner) writeFacts(ctx context.Context, tenant, userID string, watermark time.Time) (int, time.Time, error) {
	f := vectorstore.Filter{Tenant: tenant, UserID: userID, MemoryTypes: []vectorstore.MemoryType{vectorstore.Episodic}}
	if !watermark.IsZero() {
		f.Since = watermark.Add(-r.cfg.SemanticLookback)
	}
	episodes, err := r.scroll(ctx, f)
	if err != nil {
		return 0, watermark, fmt.Errorf("consolidate: read episodes of %s/%s: %w", tenant, userID, err)
	}
	if len(episodes) == 0 {
		return 0, watermark, nil
	}
	known, err := r.scroll(ctx, vectorstore.Filter{Tenant: tenant, UserID: userID, MemoryTypes: []vectorstore.MemoryType{vectorstore.Semantic}})
	if err != nil {
		return 0, watermark, fmt.Errorf("consolidate: read facts of %s/%s: %w", tenant, userID, err)
	}
	facts, err := r.deps.Semantic.Facts(ctx, episodes, known)
	if err != nil {
		return 0, watermark, fmt.Errorf("consolidate: semantic writer for %s/%s: %w", tenant, userID, err)
	}
	next := watermark
	for _, ep := range episodes {
		if ep.TS.After(next) {
			next = ep.TS
		}
	}
	// The writer promises no duplicates of known facts; the id check makes it so
	// whatever writer is plugged in, since FactRecord ids derive from the fact.
	stored := make(map[string]bool, len(known))
	for _, k := range known {
		stored[k.ID] = true
	}
	var (
		recs  []vectorstore.Record
		texts []string
	)
	for _, fact := range facts {
		rec := records.FactRecord(tenant, userID, fact)
		if stored[rec.ID] {
			continue
		}
		stored[rec.ID] = true
		addProvenance(&rec, episodes, fact)
		recs, texts = append(recs, rec), append(texts, rec.Text)
	}
	if len(recs) == 0 {
		return 0, next, nil
	}
	vecs, err := r.deps.Embedder.Embed(ctx, texts)
	if err != nil {
		return 0, watermark, fmt.Errorf("consolidate: embed facts of %s/%s: %w", tenant, userID, err)
	}
	if len(vecs) != len(recs) {
		return 0, watermark, fmt.Errorf("consolidate: embed facts of %s/%s: %d vectors for %d texts", tenant, userID, len(vecs), len(recs))
	}
	for i := range recs {
		recs[i].Vector = vecs[i]
	}
	if err := r.deps.Vectors.Upsert(ctx, recs...); err != nil {
		return 0, watermark, fmt.Errorf("consolidate: store facts of %s/%s: %w", tenant, userID, err)
	}
	now := r.deps.Now().UTC()
	for _, rec := range recs {
		r.appendHistory(ctx, tenant, userID, rec.ID, events.Change{TS: now, Op: OpAdd, Text: rec.Text,
			Detail: map[string]any{"source": "semantic_writer", records.MetaSourceChatID: rec.ChatID}})
	}
	return len(recs), next, nil
}

// addProvenance copies the provenance of the episode the fact was first seen in
// (same chat and time) into the fact's record.
func addProvenance(rec *vectorstore.Record, episodes []vectorstore.Record, fact records.Fact) {
	for _, ep := range episodes {
		if ep.ChatID != fact.SourceChatID || !ep.TS.Equal(fact.FirstSeen) {
			continue
		}
		rec.Metadata[MetaSourceMemoryIDs] = []any{ep.ID}
		for _, k := range []string{records.MetaSourceEventIDs, records.MetaSourceMeta} {
			if v, ok := ep.Metadata[k]; ok {
				rec.Metadata[k] = v
			}
		}
		return
	}
}

// mergeAndSeparate is steps 3 and 4: the executor's merge/separate pass, then the
// history of what it changed.
func (r *Runner) mergeAndSeparate(ctx context.Context, tenant, userID string) (merged, separated int, err error) {
	rm := &recordingMerger{Merger: r.deps.Merger}
	rs := &recordingSeparator{Separator: r.deps.Separator}
	ex, err := NewExecutor(ExecutorConfig{Thresholds: r.cfg.Thresholds, Now: r.deps.Now},
		r.deps.Vectors, r.deps.Embedder, rm, rs, r.logger)
	if err != nil {
		return 0, 0, err // ErrInvalidConfig
	}
	res, runErr := ex.Consolidate(ctx, tenant, userID)
	// Record what reached the store even when the run failed part way.
	r.recordMerges(ctx, tenant, userID, rm.done())
	r.recordSeparations(ctx, tenant, userID, rs.done())
	if runErr != nil {
		return res.Merged, res.Separated, fmt.Errorf("consolidate: %w", runErr)
	}
	return res.Merged, res.Separated, nil
}

// recordMerges writes the history of each merge whose merged record is stored.
func (r *Runner) recordMerges(ctx context.Context, tenant, userID string, calls []mergeCall) {
	if len(calls) == 0 {
		return
	}
	ids := make([]string, len(calls))
	for i, c := range calls {
		ids[i] = MergedRecord(c.a, c.b, c.text, nil).ID
	}
	present, ok := r.present(ctx, tenant, userID, ids)
	if !ok {
		return
	}
	now := r.deps.Now().UTC()
	for i, c := range calls {
		id := ids[i]
		if _, ok := present[id]; !ok {
			continue
		}
		r.appendHistory(ctx, tenant, userID, id, events.Change{TS: now, Op: OpMerge, Text: c.text,
			Detail: map[string]any{records.MetaMergedFromIDs: []any{c.a.ID, c.b.ID}}})
		for _, orig := range []vectorstore.Record{c.a, c.b} {
			r.appendHistory(ctx, tenant, userID, orig.ID, events.Change{TS: now, Op: OpMergedInto, Text: orig.Text,
				Detail: map[string]any{"merged_into": id}})
		}
	}
}

// recordSeparations writes the history of each separation that marked both
// records.
func (r *Runner) recordSeparations(ctx context.Context, tenant, userID string, calls []separateCall) {
	if len(calls) == 0 {
		return
	}
	var ids []string
	for _, c := range calls {
		ids = append(ids, c.a.ID, c.b.ID)
	}
	present, ok := r.present(ctx, tenant, userID, ids)
	if !ok {
		return
	}
	now := r.deps.Now().UTC()
	for _, c := range calls {
		a, okA := present[c.a.ID]
		b, okB := present[c.b.ID]
		if !okA || !okB || !slices.Contains(records.StringList(a.Metadata[records.MetaSeparatedFromIDs]), b.ID) ||
			!slices.Contains(records.StringList(b.Metadata[records.MetaSeparatedFromIDs]), a.ID) {
			continue
		}
		for _, s := range []struct {
			rec, other vectorstore.Record
			text       string
		}{{c.a, c.b, c.ta}, {c.b, c.a, c.tb}} {
			r.appendHistory(ctx, tenant, userID, s.rec.ID, events.Change{TS: now, Op: OpSeparate, Text: s.text,
				Detail: map[string]any{"separated_from": s.other.ID, records.UpdatePreviousText: s.rec.Text}})
		}
	}
}

// present returns the stored records among ids by id; ok is false (and the
// failure logged) when the store cannot be read.
func (r *Runner) present(ctx context.Context, tenant, userID string, ids []string) (map[string]vectorstore.Record, bool) {
	recs, err := r.deps.Vectors.Get(ctx, tenant, userID, ids...)
	if err != nil {
		r.logger.Warn("could not check consolidated records; their history is not recorded",
			obs.Tenant(tenant), obs.User(userID), zap.Error(err))
		return nil, false
	}
	out := make(map[string]vectorstore.Record, len(recs))
	for _, rec := range recs {
		out[rec.ID] = rec
	}
	return out, true
}

type mergeCall struct {
	a, b vectorstore.Record
	text string
}

// recordingMerger remembers the merges the executor asked for, so that their
// history can be written after the run.
type recordingMerger struct {
	processor.Merger
	mu    sync.Mutex
	calls []mergeCall
}

func (m *recordingMerger) Merge(ctx context.Context, a, b vectorstore.Record) (processor.Rewrite, error) {
	rw, err := m.Merger.Merge(ctx, a, b)
	if err == nil {
		m.mu.Lock()
		m.calls = append(m.calls, mergeCall{a, b, rw.Text})
		m.mu.Unlock()
	}
	return rw, err
}

func (m *recordingMerger) done() []mergeCall {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls
}

type separateCall struct {
	a, b   vectorstore.Record
	ta, tb string
}

// recordingSeparator remembers the separations the executor asked for.
type recordingSeparator struct {
	processor.Separator
	mu    sync.Mutex
	calls []separateCall
}

func (s *recordingSeparator) Separate(ctx context.Context, a, b vectorstore.Record) (processor.Rewrite, processor.Rewrite, error) {
	ta, tb, err := s.Separator.Separate(ctx, a, b)
	if err == nil {
		s.mu.Lock()
		s.calls = append(s.calls, separateCall{a, b, ta.Text, tb.Text})
		s.mu.Unlock()
	}
	return ta, tb, err
}

func (s *recordingSeparator) done() []separateCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}
