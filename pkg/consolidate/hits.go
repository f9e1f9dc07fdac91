package consolidate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/cognitive"
	"github.com/agentmem/agentmem/pkg/obs"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// MetaHitEvents is the metadata key listing the ids of the last HitEventWindow
// memory_hit events applied to a record, oldest first: the dedupe of ApplyHits.
const MetaHitEvents = "hit_events"

// HitEventWindow is how many applied hit event ids a record remembers.
const HitEventWindow = 32

// recallContext is the reconsolidation context of a hit without a query.
const recallContext = "recalled in a context pack"

// ApplyHits applies one memory_hit event of the namespace (SPEC C4, C5): under the
// lease, each listed memory not yet hit by this event gets hit_count + 1 and, when
// episodic, is reconsolidated with the query as the new context, all in one
// update; then its "hit" and "reconsolidate" history entries are written. Ids
// that are not stored (deleted, merged, expired) or are not memory ids are
// skipped and logged. A hit of another namespace, or an event that is not a
// memory_hit, fails with ErrInvalidInput. ErrLeaseHeld means: retry later.
func (r *Runner) ApplyHits(ctx context.Context, tenant, userID string, hit events.Envelope) error {
	if err := validateNamespace(tenant, userID); err != nil {
		return err
	}
	if hit.Type != events.TypeMemoryHit || hit.MemoryHit == nil {
		return fmt.Errorf("%w: event %s is a %s, not a memory_hit", ErrInvalidInput, hit.ID, hit.Type)
	}
	if hit.Tenant != tenant || hit.UserID != userID {
		return fmt.Errorf("%w: event %s belongs to %s/%s, not %s/%s", ErrInvalidInput, hit.ID, hit.Tenant, hit.UserID, tenant, userID)
	}
	if err := events.ValidateID("id", hit.ID); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidInput, err)
	}
	log := r.logger.With(obs.Tenant(tenant), obs.User(userID), obs.EventID(hit.ID))
	var ids []string
	for _, id := range hit.MemoryHit.MemoryIDs {
		c, err := vectorstore.CanonicalID(id)
		if err != nil {
			log.Warn("hit names something that is not a memory id; skipped", zap.String("memory_id", id))
			continue
		}
		ids = append(ids, c)
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
		for _, rec := range recs {
			found[rec.ID] = true
			if err := r.applyHit(ctx, rec, hit, log); err != nil {
				return err
			}
		}
		for _, id := range ids {
			if !found[id] {
				log.Info("hit memory is not stored (deleted, merged or expired); skipped", zap.String("memory_id", id))
			}
		}
		return nil
	})
}

// applyHit counts hit on rec and reconsolidates it, once per event.
func (r *Runner) applyHit(ctx context.Context, rec vectorstore.Record, hit events.Envelope, log *zap.Logger) error {
	seen := cognitive.StringList(rec.Metadata[MetaHitEvents])
	if slices.Contains(seen, hit.ID) {
		log.Debug("hit already applied", zap.String("memory_id", rec.ID))
		return nil
	}
	seen = append(seen, hit.ID)
	if len(seen) > HitEventWindow {
		seen = seen[len(seen)-HitEventWindow:]
	}
	patch := vectorstore.Patch{HitCountDelta: 1, Metadata: map[string]any{MetaHitEvents: cognitive.ToAnyList(seen)}}
	now := r.deps.Now().UTC()
	newContext := hit.MemoryHit.Query
	if newContext == "" {
		newContext = recallContext
	}
	var update map[string]any
	if rec.MemoryType == vectorstore.Episodic {
		// The rewrite goes into the same patch as the count, so a crash cannot leave
		// a counted hit without its reconsolidation (or the reverse).
		text, err := r.deps.Reconsolidator.Reconsolidate(ctx, rec, newContext)
		if err != nil {
			return fmt.Errorf("consolidate: reconsolidate %s: %w", rec.ID, err)
		}
		vecs, err := r.deps.Embedder.Embed(ctx, []string{text})
		if err != nil {
			return fmt.Errorf("consolidate: embed reconsolidated %s: %w", rec.ID, err)
		}
		if len(vecs) != 1 {
			return fmt.Errorf("consolidate: embed reconsolidated %s: %d vectors for 1 text", rec.ID, len(vecs))
		}
		update = map[string]any{
			cognitive.UpdateTS:           now.Format(time.RFC3339Nano),
			cognitive.UpdateContext:      newContext,
			cognitive.UpdatePreviousText: rec.Text,
		}
		patch.Text, patch.Vector = &text, vecs[0]
		patch.Metadata[cognitive.MetaThing] = text
		patch.Metadata[cognitive.MetaUpdates] = append(cognitive.AnyList(rec.Metadata[cognitive.MetaUpdates]), update)
	}
	err := r.deps.Vectors.UpdatePayload(ctx, rec.Tenant, rec.UserID, rec.ID, patch)
	if errors.Is(err, vectorstore.ErrNotFound) {
		// Deleted or expired since the read (deletes do not take the lease).
		log.Info("hit memory vanished before the update; skipped", zap.String("memory_id", rec.ID))
		return nil
	}
	if err != nil {
		return fmt.Errorf("consolidate: count hit on %s: %w", rec.ID, err)
	}
	r.appendHistory(ctx, rec.Tenant, rec.UserID, rec.ID, events.Change{TS: now, Op: OpHit, Text: rec.Text,
		Detail: map[string]any{"event_id": hit.ID, "query": hit.MemoryHit.Query, "hit_count": rec.HitCount + 1}})
	if update != nil {
		r.appendHistory(ctx, rec.Tenant, rec.UserID, rec.ID, events.Change{TS: now, Op: OpReconsolidate, Text: *patch.Text,
			Detail: map[string]any{cognitive.UpdateContext: newContext, cognitive.UpdatePreviousText: rec.Text}})
	}
	return nil
}
