package qdrant

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	qc "github.com/qdrant/go-client/qdrant"

	"github.com/agentmem/agentmem/pkg/embed"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

const (
	// rrfK makes Qdrant's RRF score, 1/(k + 0-based position), equal the package
	// vectorstore definition 1/(60 + 1-based rank). Qdrant's own default k is 2.
	rrfK = 61
	// hybridDepth is how far down each side's ranking hybrid fusion looks, as a
	// multiple of Limit (the vectorstore contract).
	hybridDepth = 4
)

type partKey struct{ tenant, userID string }

// withDense asks for the dense vector only: the sparse one is derived from the text.
func withDense() *qc.WithVectorsSelector { return qc.NewWithVectorsInclude(vectorDense) }

// Upsert implements vectorstore.Backend.
//
// Ownership is checked before anything is written: if any id belongs to another
// partition (stored, or twice in the batch with different partitions), the call
// fails with ErrConflict and writes nothing. Each partition's points then go in one
// upsert conditioned on that partition (update_filter), so a point another
// partition created between the check and the write is left alone rather than
// overwritten. The batch is one request but not one transaction: Qdrant applies its
// operations in order.
func (s *backend) Upsert(ctx context.Context, recs []vectorstore.Record) error {
	owner := make(map[string]partKey, len(recs))
	var (
		order  []partKey
		points = make(map[partKey][]*qc.PointStruct)
		ids    []string
	)
	for _, n := range recs {
		p, err := toPoint(n)
		if err != nil {
			return s.Wrap("upsert", err)
		}
		k := partKey{n.Tenant, n.UserID}
		if prev, ok := owner[n.ID]; !ok {
			owner[n.ID] = k
			ids = append(ids, n.ID)
		} else if prev != k {
			return s.Wrap("upsert", fmt.Errorf("%w: record %s appears in the batch for two partitions", vectorstore.ErrConflict, n.ID))
		}
		if _, ok := points[k]; !ok {
			order = append(order, k)
		}
		points[k] = append(points[k], p)
	}
	ctx, cancel := s.callCtx(ctx)
	defer cancel()
	stored, err := s.client.Get(ctx, &qc.GetPoints{
		CollectionName: s.cfg.Collection,
		Ids:            pointIDs(ids),
		WithPayload:    qc.NewWithPayloadInclude(fieldTenant, fieldUserID),
		WithVectors:    qc.NewWithVectors(false),
	})
	if err != nil {
		return s.Wrap("upsert: ownership check", err)
	}
	for _, p := range stored {
		id, err := pointUUID(p.GetId())
		if err != nil {
			return s.Wrap("upsert: ownership check", err)
		}
		got := partKey{p.GetPayload()[fieldTenant].GetStringValue(), p.GetPayload()[fieldUserID].GetStringValue()}
		if got != owner[id] {
			return s.Wrap("upsert", fmt.Errorf("%w: record %s", vectorstore.ErrConflict, id))
		}
	}
	ops := make([]*qc.PointsUpdateOperation, len(order))
	for i, k := range order {
		ops[i] = qc.NewPointsUpdateUpsert(&qc.PointsUpdateOperation_PointStructList{
			Points:       points[k],
			UpdateFilter: partitionFilter(k.tenant, k.userID),
		})
	}
	return s.Wrap("upsert", s.update(ctx, ops...))
}

// update runs write operations in one request and waits for them to be applied.
func (s *backend) update(ctx context.Context, ops ...*qc.PointsUpdateOperation) error {
	res, err := s.client.UpdateBatch(ctx, &qc.UpdateBatchPoints{
		CollectionName: s.cfg.Collection,
		Wait:           qc.PtrOf(true),
		Operations:     ops,
	})
	if err != nil {
		return err
	}
	return checkUpdates(res...)
}

// Get implements vectorstore.Backend. It reads through a filtered scroll, not by bare
// ids, so the partition and expiry are enforced by the server.
func (s *backend) Get(ctx context.Context, f vectorstore.Filter) ([]vectorstore.Record, error) {
	ctx, cancel := s.callCtx(ctx)
	defer cancel()
	found, _, err := s.scroll(ctx, toFilter(f, time.Now()), nil, len(f.IDs))
	if err != nil {
		return nil, s.Wrap("get", err)
	}
	byID := make(map[string]vectorstore.Record, len(found))
	for _, r := range found {
		byID[r.ID] = r
	}
	out := make([]vectorstore.Record, 0, len(found))
	for _, id := range f.IDs {
		if r, ok := byID[id]; ok {
			out = append(out, r)
			delete(byID, id) // an id asked twice is returned once
		}
	}
	return out, nil
}

// scroll reads one page in id order from offset (nil: the start).
func (s *backend) scroll(ctx context.Context, filter *qc.Filter, offset *qc.PointId, limit int) ([]vectorstore.Record, *qc.PointId, error) {
	pts, next, err := s.client.ScrollAndOffset(ctx, &qc.ScrollPoints{
		CollectionName: s.cfg.Collection,
		Filter:         filter,
		Offset:         offset,
		Limit:          qc.PtrOf(uint32(min(limit, math.MaxUint32))),
		WithPayload:    qc.NewWithPayload(true),
		WithVectors:    withDense(),
	})
	if err != nil {
		return nil, nil, err
	}
	recs := make([]vectorstore.Record, len(pts))
	for i, p := range pts {
		if recs[i], err = fromPoint(p.GetId(), p.GetPayload(), p.GetVectors()); err != nil {
			return nil, nil, err
		}
	}
	return recs, next, nil
}

// Scroll implements vectorstore.Backend. Qdrant scrolls in point id order, and a UUID
// id orders as its canonical string, so pages come in ascending id order; next is
// the id Qdrant reports as the next page's first.
func (s *backend) Scroll(ctx context.Context, f vectorstore.Filter, offset string, limit int) ([]vectorstore.Record, string, error) {
	var from *qc.PointId
	if offset != "" {
		from = qc.NewIDUUID(offset)
	}
	if selectsNothing(f) {
		return nil, "", nil
	}
	ctx, cancel := s.callCtx(ctx)
	defer cancel()
	recs, next, err := s.scroll(ctx, toFilter(f, time.Now()), from, limit)
	if err != nil {
		return nil, "", s.Wrap("scroll", err)
	}
	return recs, next.GetUuid(), nil
}

// Search implements vectorstore.Backend: one Query API call per search. Hybrid sends
// two prefetches (dense and sparse, each 4×Limit deep, each with the filter) fused
// by RRF; a query text without terms leaves only the dense prefetch, as the sparse
// side would find nothing.
func (s *backend) Search(ctx context.Context, q vectorstore.Query) ([]vectorstore.Hit, error) {
	if selectsNothing(q.Filter) {
		return nil, nil
	}
	filter := toFilter(q.Filter, time.Now())
	req := &qc.QueryPoints{
		CollectionName: s.cfg.Collection,
		Filter:         filter,
		Limit:          qc.PtrOf(uint64(q.Limit)),
		WithPayload:    qc.NewWithPayload(true),
		WithVectors:    withDense(),
	}
	sparse := embed.Sparse(q.Text)
	for _, t := range q.Expansion {
		// A query word occurring once has the value 1, so Weight scales the term's
		// contribution as the embedded store does.
		sparse = sparse.With(t.Term, float32(t.Weight))
	}
	switch q.Mode {
	case vectorstore.Dense:
		req.Query, req.Using = qc.NewQueryDense(q.Vector), qc.PtrOf(vectorDense)
	case vectorstore.Sparse:
		if len(sparse.Indices) == 0 {
			return nil, nil
		}
		req.Query, req.Using = qc.NewQuerySparse(sparse.Indices, sparse.Values), qc.PtrOf(vectorSparse)
	case vectorstore.Hybrid:
		depth := qc.PtrOf(uint64(q.Limit) * hybridDepth)
		req.Prefetch = []*qc.PrefetchQuery{{
			Query: qc.NewQueryDense(q.Vector), Using: qc.PtrOf(vectorDense), Filter: filter, Limit: depth,
		}}
		if len(sparse.Indices) > 0 {
			req.Prefetch = append(req.Prefetch, &qc.PrefetchQuery{
				Query: qc.NewQuerySparse(sparse.Indices, sparse.Values), Using: qc.PtrOf(vectorSparse), Filter: filter, Limit: depth,
			})
		}
		req.Query = qc.NewQueryRRF(&qc.Rrf{K: qc.PtrOf(uint32(rrfK))})
	}
	ctx, cancel := s.callCtx(ctx)
	defer cancel()
	pts, err := s.client.Query(ctx, req)
	if err != nil {
		return nil, s.Wrap("search", err)
	}
	hits := make([]vectorstore.Hit, len(pts))
	for i, p := range pts {
		rec, err := fromPoint(p.GetId(), p.GetPayload(), p.GetVectors())
		if err != nil {
			return nil, s.Wrap("search", err)
		}
		hits[i] = vectorstore.Hit{Record: rec, Score: float64(p.GetScore())}
	}
	return hits, nil
}

// UpdatePayloads implements vectorstore.Backend as read, merge, write: one scroll
// reads every patched record of the partition (unexpired), every patch is
// applied and validated, then one batch request writes only the changed payload
// fields (a set-payload operation per record) and vectors (one update-vectors
// operation for all), each write conditioned on the partition.
//
// Not atomic: Qdrant applies a batch's operations in order, so a failure part way
// leaves the earlier ones applied (each is idempotent but a hit-count delta, which
// is written as the resulting value). Nor atomic across concurrent writers: two
// HitCountDelta updates of one record racing here can lose one increment, as
// Qdrant has no server-side increment. agentmem serialises hit updates per
// namespace in the consolidator, which is the only writer of hit counts.
func (s *backend) UpdatePayloads(ctx context.Context, tenant, userID string, ids []string, byID map[string]vectorstore.Patch) ([]string, error) {
	ctx, cancel := s.callCtx(ctx)
	defer cancel()
	found, _, err := s.scroll(ctx, toFilter(vectorstore.Filter{Tenant: tenant, UserID: userID, IDs: ids}, time.Now()), nil, len(ids))
	if err != nil {
		return nil, s.Wrap("update", err)
	}
	var (
		ops     []*qc.PointsUpdateOperation
		vectors []*qc.PointVectors
		stored  = make(map[string]bool, len(found))
	)
	for _, rec := range found {
		stored[rec.ID] = true
		patch := byID[rec.ID]
		set, err := s.patchPayload(rec, patch)
		if err != nil {
			return nil, s.Wrap("update", err)
		}
		if len(set) > 0 {
			ops = append(ops, qc.NewPointsUpdateSetPayload(&qc.PointsUpdateOperation_SetPayload{
				Payload:        set,
				PointsSelector: qc.NewPointsSelectorFilter(partitionFilter(tenant, userID, rec.ID)),
			}))
		}
		if vecs := pointVectors(patch.Vector, patch.Text); len(vecs) > 0 {
			vectors = append(vectors, &qc.PointVectors{Id: qc.NewIDUUID(rec.ID), Vectors: qc.NewVectorsMap(vecs)})
		}
	}
	if len(vectors) > 0 {
		ops = append(ops, qc.NewPointsUpdateUpdateVectors(&qc.PointsUpdateOperation_UpdateVectors{
			Points:       vectors,
			UpdateFilter: partitionFilter(tenant, userID),
		}))
	}
	var missing []string
	for _, id := range ids {
		if !stored[id] {
			missing = append(missing, id)
		}
	}
	if len(ops) == 0 {
		return missing, nil
	}
	err = s.update(ctx, ops...)
	if isNotFound(err) {
		// A record was deleted between the read and the write.
		err = fmt.Errorf("%w: a patched record was deleted during the update: %w", vectorstore.ErrNotFound, err)
	}
	if err != nil {
		return nil, s.Wrap("update", err)
	}
	return missing, nil
}

// patchPayload applies p to rec, validates the result, and returns the payload
// fields that change.
func (s *backend) patchPayload(rec vectorstore.Record, p vectorstore.Patch) (map[string]*qc.Value, error) {
	set := make(map[string]*qc.Value)
	if p.Text != nil {
		rec.Text = *p.Text
		set[fieldText] = qc.NewValueString(rec.Text)
	}
	if p.Vector != nil {
		rec.Vector = p.Vector
	}
	if p.Metadata != nil {
		merged := maps.Clone(rec.Metadata)
		if merged == nil {
			merged = make(map[string]any, len(p.Metadata))
		}
		maps.Copy(merged, p.Metadata)
		v, err := metadataValue(merged)
		if err != nil {
			return nil, fmt.Errorf("%w: record %s: %w", vectorstore.ErrInvalidRecord, rec.ID, err)
		}
		set[fieldMetadata] = v
	}
	if p.HitCountDelta != 0 {
		rec.HitCount = max(0, rec.HitCount+p.HitCountDelta)
		set[fieldHitCount] = qc.NewValueInt(int64(rec.HitCount))
	}
	if p.Confidence != nil {
		rec.Confidence = *p.Confidence
		set[fieldConfidence] = qc.NewValueDouble(rec.Confidence)
	}
	if p.ExpiresAt != nil {
		set[fieldExpiresAt] = expiresValue(*p.ExpiresAt)
	}
	if _, err := rec.Normalize(s.cfg.Dimensions); err != nil {
		return nil, err
	}
	return set, checkStrings(rec)
}

// Delete implements vectorstore.Backend. The delete request always carries the
// partition filter with the ids, never bare ids.
func (s *backend) Delete(ctx context.Context, f vectorstore.Filter) (int, error) {
	n, err := s.deleteMatching(ctx, f)
	return n, s.Wrap("delete", err)
}

// DeleteByFilter implements vectorstore.Backend.
func (s *backend) DeleteByFilter(ctx context.Context, f vectorstore.Filter) (int, error) {
	if selectsNothing(f) {
		return 0, nil
	}
	n, err := s.deleteMatching(ctx, f)
	return n, s.Wrap("delete by filter", err)
}

// deleteMatching counts, then deletes, what f selects, with one evaluation time for
// both. Qdrant's delete does not report how many points it removed, so the count
// is exact only without a concurrent writer in the partition.
func (s *backend) deleteMatching(ctx context.Context, f vectorstore.Filter) (int, error) {
	filter := toFilter(f, time.Now())
	ctx, cancel := s.callCtx(ctx)
	defer cancel()
	n, err := s.count(ctx, filter)
	if err != nil || n == 0 {
		return 0, err
	}
	res, err := s.client.Delete(ctx, &qc.DeletePoints{
		CollectionName: s.cfg.Collection,
		Wait:           qc.PtrOf(true),
		Points:         qc.NewPointsSelectorFilter(filter),
	})
	if err != nil {
		return 0, err
	}
	if err := checkUpdates(res); err != nil {
		return 0, err
	}
	return n, nil
}

// Count implements vectorstore.Backend with an exact count.
func (s *backend) Count(ctx context.Context, f vectorstore.Filter) (int, error) {
	if selectsNothing(f) {
		return 0, nil
	}
	ctx, cancel := s.callCtx(ctx)
	defer cancel()
	n, err := s.count(ctx, toFilter(f, time.Now()))
	return n, s.Wrap("count", err)
}

func (s *backend) count(ctx context.Context, filter *qc.Filter) (int, error) {
	n, err := s.client.Count(ctx, &qc.CountPoints{
		CollectionName: s.cfg.Collection,
		Filter:         filter,
		Exact:          qc.PtrOf(true),
	})
	return int(n), err
}

// TermDocs implements vectorstore.Backend: Qdrant applies IDF inside its index
// and has no call that reads a term's document count, so the counts are
// unknown (nil).
func (s *backend) TermDocs(context.Context, string, string, []string) ([]int, error) {
	return nil, nil
}

// maxFacetUsers bounds the users a tenant's Users call returns: Qdrant's facet
// has no paging, only a limit.
const maxFacetUsers = 1 << 20

// Users implements vectorstore.Backend: an exact facet of user_id (a keyword
// index) over the tenant's points.
func (s *backend) Users(ctx context.Context, tenant string) ([]string, error) {
	ctx, cancel := s.callCtx(ctx)
	defer cancel()
	hits, err := s.client.Facet(ctx, &qc.FacetCounts{
		CollectionName: s.cfg.Collection,
		Key:            fieldUserID,
		Filter:         &qc.Filter{Must: []*qc.Condition{qc.NewMatchKeyword(fieldTenant, tenant)}},
		Limit:          qc.PtrOf(uint64(maxFacetUsers)),
		Exact:          qc.PtrOf(true),
	})
	if err != nil {
		return nil, s.Wrap("users", err)
	}
	users := make([]string, 0, len(hits))
	for _, h := range hits {
		if u := h.GetValue().GetStringValue(); u != "" {
			users = append(users, u)
		}
	}
	slices.Sort(users)
	return users, nil
}
