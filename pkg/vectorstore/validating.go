package vectorstore

import (
	"context"
	"fmt"
	"sync/atomic"
)

// Backend is a store without the argument checks of the Store interface: Validating
// makes the checks once for every backend, and a backend package hands out only the
// Store that Validating returns, so no call reaches a backend unchecked. Backend is
// not a Store (it has no UpdatePayload), so it cannot be used as one by mistake.
//
// Validating calls a Backend only with arguments that passed the checks, in their
// normalised form (ids canonical, filters as Filter.Normalize returns them), never
// after Close, and never for a call that has nothing to do (no records, no ids, no
// patches). Backends wrap their own errors with Wrap's context.
type Backend interface {
	// Dimensions is the dense vector length the backend stores.
	Dimensions() int
	// Wrap adds the backend's context (which store, which operation) to an error;
	// sentinel errors keep matching. Validating wraps its check errors with it, so
	// that they read like the backend's own.
	Wrap(op string, err error) error

	// Upsert implements Store.Upsert; every record passed Record.Normalize.
	Upsert(ctx context.Context, recs []Record) error
	// Get implements Store.Get for f's partition and ids (f.IDs, at least one).
	Get(ctx context.Context, f Filter) ([]Record, error)
	// Search implements Store.Search; q passed Query.Normalize.
	Search(ctx context.Context, q Query) ([]Hit, error)
	// Scroll implements Store.Scroll; limit > 0 and offset is "" or canonical.
	Scroll(ctx context.Context, f Filter, offset string, limit int) ([]Record, string, error)
	// UpdatePayloads implements Store.UpdatePayloads with ids and byID as
	// NormalizePatches returns them (at least one id).
	UpdatePayloads(ctx context.Context, tenant, userID string, ids []string, byID map[string]Patch) (missing []string, err error)
	// Delete implements Store.Delete for f's partition and ids (f.IDs, at least
	// one; f.IncludeExpired set).
	Delete(ctx context.Context, f Filter) (int, error)
	// DeleteByFilter implements Store.DeleteByFilter.
	DeleteByFilter(ctx context.Context, f Filter) (int, error)
	// Count implements Store.Count.
	Count(ctx context.Context, f Filter) (int, error)
	// TermDocs implements Store.TermDocs for a valid partition and at least one
	// term.
	TermDocs(ctx context.Context, tenant, userID string, terms []string) ([]int, error)
	// Users implements Store.Users for a valid tenant.
	Users(ctx context.Context, tenant string) ([]string, error)
	// Close implements Store.Close; Validating calls it once.
	Close() error
}

// Validating returns the Store of b: every call's arguments are checked (tenant and
// user, ids, memory types, payload conditions, limits, modes, vector dimensions,
// patches) and normalised before b sees them, and a call after Close fails with
// ErrClosed. The errors are the sentinels of this package, wrapped by b.Wrap.
func Validating(b Backend) Store {
	return &validating{b: b, dims: b.Dimensions()}
}

type validating struct {
	b      Backend
	dims   int
	closed atomic.Bool
}

func (v *validating) checkOpen() error {
	if v.closed.Load() {
		return ErrClosed
	}
	return nil
}

// Upsert implements Store.
func (v *validating) Upsert(ctx context.Context, recs ...Record) error {
	if err := v.checkOpen(); err != nil {
		return err
	}
	if len(recs) == 0 {
		return nil
	}
	norm := make([]Record, len(recs))
	for i, r := range recs {
		n, err := r.Normalize(v.dims)
		if err != nil {
			return v.b.Wrap("upsert", err)
		}
		norm[i] = n
	}
	return v.b.Upsert(ctx, norm)
}

// Get implements Store.
func (v *validating) Get(ctx context.Context, tenant, userID string, ids ...string) ([]Record, error) {
	if err := v.checkOpen(); err != nil {
		return nil, err
	}
	f, err := Filter{Tenant: tenant, UserID: userID, IDs: ids}.Normalize()
	if err != nil {
		return nil, v.b.Wrap("get", err)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	return v.b.Get(ctx, f)
}

// Search implements Store.
func (v *validating) Search(ctx context.Context, q Query) ([]Hit, error) {
	if err := v.checkOpen(); err != nil {
		return nil, err
	}
	q, err := q.Normalize(v.dims)
	if err != nil {
		return nil, v.b.Wrap("search", err)
	}
	return v.b.Search(ctx, q)
}

// Scroll implements Store.
func (v *validating) Scroll(ctx context.Context, f Filter, offset string, limit int) ([]Record, string, error) {
	if err := v.checkOpen(); err != nil {
		return nil, "", err
	}
	f, err := f.Normalize()
	if err != nil {
		return nil, "", v.b.Wrap("scroll", err)
	}
	if limit < 1 {
		return nil, "", v.b.Wrap("scroll", fmt.Errorf("%w: limit %d, want > 0", ErrInvalidQuery, limit))
	}
	if offset != "" {
		if offset, err = CanonicalID(offset); err != nil {
			return nil, "", v.b.Wrap("scroll", fmt.Errorf("offset: %w", err))
		}
	}
	return v.b.Scroll(ctx, f, offset, limit)
}

// UpdatePayload implements Store: UpdatePayloads of one patch.
func (v *validating) UpdatePayload(ctx context.Context, tenant, userID, id string, patch Patch) error {
	missing, err := v.UpdatePayloads(ctx, tenant, userID, map[string]Patch{id: patch})
	if err == nil && len(missing) > 0 {
		err = v.b.Wrap("update", fmt.Errorf("%w: record %s", ErrNotFound, missing[0]))
	}
	return err
}

// UpdatePayloads implements Store.
func (v *validating) UpdatePayloads(ctx context.Context, tenant, userID string, patches map[string]Patch) ([]string, error) {
	if err := v.checkOpen(); err != nil {
		return nil, err
	}
	ids, byID, err := NormalizePatches(tenant, userID, patches, v.dims)
	if err != nil {
		return nil, v.b.Wrap("update", err)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	return v.b.UpdatePayloads(ctx, tenant, userID, ids, byID)
}

// Delete implements Store.
func (v *validating) Delete(ctx context.Context, tenant, userID string, ids ...string) (int, error) {
	if err := v.checkOpen(); err != nil {
		return 0, err
	}
	f, err := Filter{Tenant: tenant, UserID: userID, IDs: ids, IncludeExpired: true}.Normalize()
	if err != nil {
		return 0, v.b.Wrap("delete", err)
	}
	if len(ids) == 0 {
		return 0, nil
	}
	return v.b.Delete(ctx, f)
}

// DeleteByFilter implements Store.
func (v *validating) DeleteByFilter(ctx context.Context, f Filter) (int, error) {
	if err := v.checkOpen(); err != nil {
		return 0, err
	}
	f, err := f.Normalize()
	if err != nil {
		return 0, v.b.Wrap("delete by filter", err)
	}
	return v.b.DeleteByFilter(ctx, f)
}

// Count implements Store.
func (v *validating) Count(ctx context.Context, f Filter) (int, error) {
	if err := v.checkOpen(); err != nil {
		return 0, err
	}
	f, err := f.Normalize()
	if err != nil {
		return 0, v.b.Wrap("count", err)
	}
	return v.b.Count(ctx, f)
}

// TermDocs implements Store.
func (v *validating) TermDocs(ctx context.Context, tenant, userID string, terms []string) ([]int, error) {
	if err := v.checkOpen(); err != nil {
		return nil, err
	}
	if err := ValidatePartition(tenant, userID); err != nil {
		return nil, v.b.Wrap("term docs", err)
	}
	if len(terms) > MaxExpansion {
		return nil, v.b.Wrap("term docs", fmt.Errorf("%w: %d terms, want at most %d", ErrInvalidQuery, len(terms), MaxExpansion))
	}
	if len(terms) == 0 {
		return []int{}, nil
	}
	return v.b.TermDocs(ctx, tenant, userID, terms)
}

// Users implements Store.
func (v *validating) Users(ctx context.Context, tenant string) ([]string, error) {
	if err := v.checkOpen(); err != nil {
		return nil, err
	}
	if err := ValidatePartition(tenant, "any"); err != nil {
		return nil, v.b.Wrap("users", err)
	}
	return v.b.Users(ctx, tenant)
}

// Close implements Store: the backend is closed once, and later calls fail with
// ErrClosed.
func (v *validating) Close() error {
	if v.closed.Swap(true) {
		return nil
	}
	return v.b.Close()
}
