package consolidate

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/obs"
	"github.com/agentmem/agentmem/pkg/records"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// HitEventWindow is how many applied hit event ids a record remembers (metadata
// records.MetaHitEvents, oldest first): the dedupe of ApplyHits.
const HitEventWindow = 32

// recallContext is the reconsolidation context of a hit without a query.
const recallContext = "recalled in a context pack"

// ApplyHits applies memory_hit events of the namespace (SPEC C4, C5), in the order
// given: under one lease, each listed memory gets hit_count + 1 for every event
// that has not hit it yet and, when episodic, is reconsolidated once with the
// newest such event's query as the new context (see planHits), all in one patch
// per memory, and the patches of all memories written by one UpdatePayloads;
// then each memory's "hit" and "reconsolidate" history entries are written.
// Applying several events at once costs one read and one write for the batch and
// one history append per memory instead of one per event, and re-embeds only a
// text that changed. Ids that are not stored
// (deleted, merged, expired) or are not memory ids are skipped and logged. A hit
// of another namespace, or an event that is not a memory_hit, fails the whole
// call with ErrInvalidInput before anything is written. ErrLeaseHeld means: retry
// later.
func (r *Runner) ApplyHits(ctx context.Context, tenant, userID string, hits ...events.Envelope) error {
	if err := validateNamespace(tenant, userID); err != nil {
		return err
	}
	log := r.logger.With(obs.Tenant(tenant), obs.User(userID))
	// In the order they were made, not the order concurrent handlers delivered
	// them: planHits weighs them one after the other.
	hits = slices.Clone(hits)
	slices.SortStableFunc(hits, func(a, b events.Envelope) int {
		return cmp.Or(a.TS.Compare(b.TS), strings.Compare(a.ID, b.ID))
	})
	var ids []string
	// listed[i] holds hits[i]'s memory ids in canonical form, parsed once here
	// rather than once per memory the batch touches.
	listed := make([][]string, len(hits))
	for i, hit := range hits {
		if err := validateHit(tenant, userID, hit); err != nil {
			return err
		}
		for _, id := range hit.MemoryHit.MemoryIDs {
			c, err := vectorstore.CanonicalID(id)
			if err != nil {
				log.Warn("hit names something that is not a memory id; skipped", obs.EventID(hit.ID), obs.MemoryID(id))
				continue
			}
			listed[i] = append(listed[i], c)
		}
		ids = append(ids, listed[i]...)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	if len(ids) == 0 {
		return nil
	}
	return r.withLease(ctx, tenant, userID, func(ctx context.Context) error {
		recs, err := r.deps.Vectors.Get(ctx, tenant, userID, ids...)
		if err != nil {
			return fmt.Errorf("consolidate: read hit memories of %s/%s: %w", tenant, userID, err)
		}
		found := make(map[string]bool, len(recs))
		plans := make([]hitPlan, 0, len(recs))
		asked := 0 // rewrites asked for, up to MaxReconsolidations
		for _, rec := range recs {
			found[rec.ID] = true
			p, err := r.planHits(ctx, rec, hits, listed, asked < r.cfg.MaxReconsolidations, log)
			if err != nil {
				return err
			}
			if p.asked {
				asked++
			}
			if p.count > 0 {
				plans = append(plans, p)
			}
		}
		for _, id := range ids {
			if !found[id] {
				log.Info("hit memory is not stored (deleted, merged or expired); skipped", obs.MemoryID(id))
			}
		}
		if err := r.embedRewrites(ctx, plans); err != nil {
			return err
		}
		return r.applyHitPlans(ctx, tenant, userID, plans, log)
	})
}

// validateHit checks that hit is a valid memory_hit of the namespace.
func validateHit(tenant, userID string, hit events.Envelope) error {
	if hit.Type != events.TypeMemoryHit || hit.MemoryHit == nil {
		return fmt.Errorf("%w: event %s is a %s, not a memory_hit", ErrInvalidInput, hit.ID, hit.Type)
	}
	if hit.Tenant != tenant || hit.UserID != userID {
		return fmt.Errorf("%w: event %s belongs to %s/%s, not %s/%s", ErrInvalidInput, hit.ID, hit.Tenant, hit.UserID, tenant, userID)
	}
	if err := events.ValidateID("id", hit.ID); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidInput, err)
	}
	return nil
}

// hitPlan is what the new hits of one memory change: one patch and the history
// entries describing it.
type hitPlan struct {
	rec     vectorstore.Record
	count   int  // new (not yet applied) events hitting rec
	asked   bool // the reconsolidator was asked for a rewrite
	patch   vectorstore.Patch
	changes []events.Change
}

// planHits folds the events of hits that list rec and have not hit it yet into
// one patch: hit_count + their number (SPEC C4: each event counts once) and their
// ids appended to hit_events (the last HitEventWindow kept). An episodic memory is
// reconsolidated once for the whole batch, with the query of its newest use as the
// new context (SPEC C5: time, chat and who untouched, one more updates entry).
// Once per use would append an updates entry, with the whole previous text, for
// every context request: a memory used a thousand times in a burst would carry a
// thousand copies of itself, and every update would rewrite them all. For the
// same reason a "hit" history entry holds no copy of the text, which a hit does
// not change: the history value is rewritten whole on every append, so a copy per
// use made a hot memory's history mostly copies of its text. listed[i] holds
// hits[i]'s canonical memory ids. Without mayRewrite (the batch spent its
// MaxReconsolidations) a reconsolidation due is shed: the hits count, the text
// and the reconsolidation marks stay, so a later use reconsolidates the memory.
// The vector is left to embedRewrites.
func (r *Runner) planHits(ctx context.Context, rec vectorstore.Record, hits []events.Envelope, listed [][]string, mayRewrite bool, log *zap.Logger) (hitPlan, error) {
	p := hitPlan{rec: rec}
	seen := records.StringList(rec.Metadata[records.MetaHitEvents])
	now := r.deps.Now().UTC()
	// The hits are weighed one after the other, each against what the ones
	// before it did (applied tracks the reconsolidation marks), so a batch ends
	// as the same hits handled one by one would: which query rewrites the memory
	// does not depend on where a delivery batch happened to end (a replay
	// batches otherwise than the live run did).
	applied := rec
	applied.Metadata = maps.Clone(rec.Metadata)
	if applied.Metadata == nil {
		applied.Metadata = map[string]any{}
	}
	var newest *events.MemoryHit
	for i, hit := range hits {
		if !slices.Contains(listed[i], rec.ID) {
			continue
		}
		if slices.Contains(seen, hit.ID) {
			log.Debug("hit already applied", obs.EventID(hit.ID), obs.MemoryID(rec.ID))
			continue
		}
		seen = append(seen, hit.ID)
		p.count++
		// The newest use that may still reconsolidate (issue 22: once per session,
		// or per window without one) gives the new context.
		if session := hitSession(hit); mayReconsolidate(applied, session, now, r.cfg.ReconsolidateWindow) {
			newest = hit.MemoryHit
			maps.Copy(applied.Metadata, reconsolidatedIn(applied, now, session))
		}
		p.changes = append(p.changes, events.Change{TS: now, Op: OpHit,
			Detail: map[string]any{"event_id": hit.ID, "query": hit.MemoryHit.Query, "hit_count": rec.HitCount + p.count}})
	}
	if p.count == 0 {
		return p, nil
	}
	if len(seen) > HitEventWindow {
		seen = seen[len(seen)-HitEventWindow:]
	}
	// The rewrite goes into the same patch as the count, so a crash cannot leave
	// a counted hit without its reconsolidation (or the reverse).
	p.patch = vectorstore.Patch{HitCountDelta: p.count, Metadata: map[string]any{records.MetaHitEvents: records.ToAnyList(seen)}}
	if rec.MemoryType != vectorstore.Episodic {
		return p, nil
	}
	if newest == nil {
		r.metrics.reconsolidation(outcomeSkipped)
		log.Debug("memory already reconsolidated in this session or window", obs.MemoryID(rec.ID))
		return p, nil
	}
	if !mayRewrite {
		r.metrics.reconsolidation(outcomeShed)
		log.Debug("reconsolidation shed: the batch of hits asked for its most rewrites", obs.MemoryID(rec.ID))
		return p, nil
	}
	p.asked = true
	newContext := cmp.Or(newest.Query, recallContext)
	rw, err := rewriteFromBase(ctx, r.deps.Reconsolidator, rec, newContext)
	switch {
	case errors.Is(err, ErrRewriteLosesFacts):
		// The text stays; the session counts as done, so the model is not asked
		// again for every pack of it.
		r.metrics.reconsolidation(outcomeRejected)
		log.Warn("reconsolidation rejected; the memory keeps its text", obs.MemoryID(rec.ID), zap.Error(err))
		copyReconsolidationMarks(p.patch.Metadata, applied)
		return p, nil
	case err != nil:
		return hitPlan{}, fmt.Errorf("consolidate: reconsolidate %s: %w", rec.ID, err)
	}
	rp := reconsolidationPatch(rec, rw, newContext, now)
	if rp.Text != nil {
		r.metrics.reconsolidation(outcomeRewritten)
	} else {
		r.metrics.reconsolidation(outcomeContext)
	}
	p.changes = append(p.changes, reconsolidationChange(rec, rp, now))
	p.patch.Text = rp.Text
	maps.Copy(p.patch.Metadata, rp.Metadata)
	copyReconsolidationMarks(p.patch.Metadata, applied)
	return p, nil
}

// reconsolidationChange is the history entry of patch, rec's reconsolidation:
// the new context and the one it replaced, and the text only when the patch
// rewrote it (a copy of an unchanged text per use would fill the history).
func reconsolidationChange(rec vectorstore.Record, patch vectorstore.Patch, now time.Time) events.Change {
	c := events.Change{TS: now, Op: OpReconsolidate, Detail: map[string]any{records.UpdateContext: patch.Metadata[records.MetaContext]}}
	if prev, ok := rec.Metadata[records.MetaContext]; ok {
		c.Detail[records.UpdatePreviousContext] = prev
	}
	if patch.Text != nil {
		c.Text = *patch.Text
		c.Detail[records.UpdatePreviousText] = rec.Text
	}
	return c
}

// copyReconsolidationMarks copies the marks the reconsolidating hits left on
// applied (when, and in which sessions) into md.
func copyReconsolidationMarks(md map[string]any, applied vectorstore.Record) {
	for _, k := range []string{records.MetaReconsolidatedAt, records.MetaReconsolidatedSessions} {
		if v, ok := applied.Metadata[k]; ok {
			md[k] = v
		}
	}
}

// hitSession is the session key of a hit's context request, "" without one.
func hitSession(hit events.Envelope) string {
	if hit.SessionID == "" {
		return ""
	}
	return hit.Tenant + "." + hit.UserID + "." + hit.SessionID
}

// embedRewrites sets the vector of every plan whose text changed, in one Embed
// call. A text rewritten back to what it was keeps its stored vector: embedding
// is deterministic, so it would only cost time.
func (r *Runner) embedRewrites(ctx context.Context, plans []hitPlan) error {
	var (
		texts []string
		which []int
	)
	for i, p := range plans {
		if p.patch.Text != nil && *p.patch.Text != p.rec.Text {
			texts, which = append(texts, *p.patch.Text), append(which, i)
		}
	}
	if len(texts) == 0 {
		return nil
	}
	vecs, err := r.deps.Embedder.Embed(ctx, texts)
	if err != nil {
		return fmt.Errorf("consolidate: embed %d reconsolidated memories: %w", len(texts), err)
	}
	if len(vecs) != len(texts) {
		return fmt.Errorf("consolidate: embed reconsolidated memories: %d vectors for %d texts", len(vecs), len(texts))
	}
	for j, i := range which {
		plans[i].patch.Vector = vecs[j]
	}
	return nil
}

// historyAppenders is how many history appends of one batch of hits are in
// flight at once.
const historyAppenders = 16

// applyHitPlans writes every plan's patch in one UpdatePayloads (one transaction
// where the store has them, instead of one per memory), then each updated
// memory's history. A memory the update no longer finds was deleted or expired
// since the read (deletes do not take the lease) and is skipped. The appends
// (one JetStream publish and ack each, on a subject per memory, so their order
// across memories means nothing) run side by side: one after the other, a
// batch of a hundred memories held its lease for a hundred round trips, and
// each paid its own write and wake-up.
func (r *Runner) applyHitPlans(ctx context.Context, tenant, userID string, plans []hitPlan, log *zap.Logger) error {
	if len(plans) == 0 {
		return nil
	}
	patches := make(map[string]vectorstore.Patch, len(plans))
	for _, p := range plans {
		patches[p.rec.ID] = p.patch
	}
	missing, err := r.deps.Vectors.UpdatePayloads(ctx, tenant, userID, patches)
	if err != nil {
		return fmt.Errorf("consolidate: count hits on %d memories of %s/%s: %w", len(plans), tenant, userID, err)
	}
	for _, id := range missing {
		log.Info("hit memory vanished before the update; skipped", obs.MemoryID(id))
	}
	var g errgroup.Group
	g.SetLimit(historyAppenders)
	for _, p := range plans {
		if _, vanished := slices.BinarySearch(missing, p.rec.ID); !vanished {
			g.Go(func() error {
				r.appendHistory(ctx, tenant, userID, p.rec.ID, p.changes...)
				return nil // logged by appendHistory: history follows the change it records
			})
		}
	}
	return g.Wait()
}
