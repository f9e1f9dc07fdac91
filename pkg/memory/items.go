package memory

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"go.uber.org/zap"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/obs"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// Memory items (SPEC D4): keyed structured memories stored as vector records of
// type item, so that they are searched like every other memory.

var itemType = []vectorstore.MemoryType{vectorstore.Item}

// scrollPage is the page size of full scans (list, sweep).
const scrollPage = 256

// SaveItem upserts the user's item by (scope, kind, key, and the session for scope
// session): a new item gets created_ts (the item's own when it is set and not in
// the future, else now), a replaced one keeps its created_ts; updated_ts is now.
// It returns the item as stored.
func (s *Service) SaveItem(ctx context.Context, tenant, userID string, it events.MemoryItem) (events.MemoryItem, error) {
	return s.putItem(ctx, tenant, events.ItemRequest{UserID: userID, Item: it}, false)
}

// UpdateItem replaces an existing item like SaveItem; ErrNotFound when the item
// does not exist (or has expired).
func (s *Service) UpdateItem(ctx context.Context, tenant string, req events.ItemRequest) (events.MemoryItem, error) {
	return s.putItem(ctx, tenant, req, true)
}

func (s *Service) putItem(ctx context.Context, tenant string, req events.ItemRequest, mustExist bool) (events.MemoryItem, error) {
	if err := firstErr(events.ValidateID("tenant", tenant), req.Validate()); err != nil {
		return events.MemoryItem{}, invalid(err)
	}
	it := req.Item
	it.Content = redactText(it.Content)
	id := ItemID(tenant, req.UserID, it.Scope, it.Kind, it.Key, it.SessionID)
	prev, err := s.fetch(ctx, tenant, req.UserID, id, itemType)
	found := err == nil
	if err != nil && (mustExist || !errors.Is(err, ErrNotFound)) {
		return events.MemoryItem{}, err
	}
	now := s.nowAt(ctx)
	var vec []float32
	switch {
	case found:
		old, err := toItem(prev)
		if err != nil {
			return events.MemoryItem{}, err
		}
		it.CreatedTS = old.CreatedTS
		if prev.Text == it.Content {
			vec = prev.Vector
		}
	case it.CreatedTS.IsZero() || it.CreatedTS.After(now):
		it.CreatedTS = now
	}
	it.CreatedTS = it.CreatedTS.UTC().Truncate(timeResolution)
	it.UpdatedTS = now
	if vec == nil {
		if vec, err = embedOne(ctx, s.emb, it.Content); err != nil {
			return events.MemoryItem{}, err
		}
	}
	if err := s.vectors.Upsert(ctx, itemRecord(tenant, req.UserID, it, vec)); err != nil {
		return events.MemoryItem{}, storeErr("save item "+it.Key, err)
	}
	return it, nil
}

// GetItem returns one item by its key; ErrNotFound when it does not exist or has
// expired.
func (s *Service) GetItem(ctx context.Context, tenant string, req events.ItemKeyRequest) (events.MemoryItem, error) {
	if err := firstErr(events.ValidateID("tenant", tenant), req.Validate()); err != nil {
		return events.MemoryItem{}, invalid(err)
	}
	rec, err := s.fetch(ctx, tenant, req.UserID, ItemID(tenant, req.UserID, req.Scope, req.Kind, req.Key, req.SessionID), itemType)
	if err != nil {
		return events.MemoryItem{}, err
	}
	return toItem(rec)
}

// ListItems returns the live items of one scope (and session), ordered by kind
// then key, paged by req.Offset and req.Limit (0: up to events.MaxLimit).
func (s *Service) ListItems(ctx context.Context, tenant string, req events.ItemScopeRequest) (events.ItemListReply, error) {
	if err := firstErr(events.ValidateID("tenant", tenant), req.Validate()); err != nil {
		return events.ItemListReply{}, invalid(err)
	}
	var items []events.MemoryItem
	err := s.scanItems(ctx, scopeFilter(tenant, req), func(it events.MemoryItem) { items = append(items, it) })
	if err != nil {
		return events.ItemListReply{}, err
	}
	return events.ItemListReply{Items: itemPage(items, req.Offset, req.Limit)}, nil
}

// PackItems are the memory items of a context pack (SPEC D1).
type PackItems struct {
	Persona, UserProfile, Session []events.MemoryItem
}

// PackItems returns what ListItems gives for the user's persona scope, user scope
// and (with a sessionID) the session's items, each at most limit (0:
// events.MaxLimit), from one scan of the user's items instead of one per scope.
func (s *Service) PackItems(ctx context.Context, tenant, userID, sessionID string, limit int) (PackItems, error) {
	err := firstErr(events.ValidateID("tenant", tenant), events.ValidateID("user_id", userID))
	if err == nil && sessionID != "" {
		err = events.ValidateID("session_id", sessionID)
	}
	if err == nil && (limit < 0 || limit > events.MaxLimit) {
		err = fmt.Errorf("limit is %d, want 0 (default) to %d", limit, events.MaxLimit)
	}
	if err != nil {
		return PackItems{}, invalid(err)
	}
	var out PackItems
	f := vectorstore.Filter{Tenant: tenant, UserID: userID, MemoryTypes: itemType, IncludeExpired: true}
	err = s.scanItems(ctx, f, func(it events.MemoryItem) {
		switch {
		case it.Scope == events.ScopePersona:
			out.Persona = append(out.Persona, it)
		case it.Scope == events.ScopeUser:
			out.UserProfile = append(out.UserProfile, it)
		case it.Scope == events.ScopeSession && sessionID != "" && it.SessionID == sessionID:
			out.Session = append(out.Session, it)
		}
	})
	if err != nil {
		return PackItems{}, err
	}
	out.Persona = itemPage(out.Persona, 0, limit)
	out.UserProfile = itemPage(out.UserProfile, 0, limit)
	out.Session = itemPage(out.Session, 0, limit)
	return out, nil
}

// scanItems calls fn with every live item f selects.
func (s *Service) scanItems(ctx context.Context, f vectorstore.Filter, fn func(events.MemoryItem)) error {
	now := s.nowAt(ctx)
	return s.scan(ctx, f, func(r vectorstore.Record) error {
		if !live(r, now) {
			return nil
		}
		it, err := toItem(r)
		if err == nil {
			fn(it)
		}
		return err
	})
}

// itemPage orders items by kind then key and returns items[offset:] cut to limit
// (0: events.MaxLimit).
func itemPage(items []events.MemoryItem, offset, limit int) []events.MemoryItem {
	slices.SortFunc(items, func(a, b events.MemoryItem) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Key, b.Key))
	})
	if limit == 0 {
		limit = events.MaxLimit
	}
	items = items[min(offset, len(items)):]
	return slices.Clip(items[:min(limit, len(items))])
}

// DeleteItem deletes one item by its key and reports whether it existed.
func (s *Service) DeleteItem(ctx context.Context, tenant string, req events.ItemKeyRequest) (events.DeleteReply, error) {
	if err := firstErr(events.ValidateID("tenant", tenant), req.Validate()); err != nil {
		return events.DeleteReply{}, invalid(err)
	}
	n, err := s.vectors.Delete(ctx, tenant, req.UserID, ItemID(tenant, req.UserID, req.Scope, req.Kind, req.Key, req.SessionID))
	if err != nil {
		return events.DeleteReply{}, storeErr("delete item "+req.Key, err)
	}
	return events.DeleteReply{Deleted: n}, nil
}

// DeleteScope deletes every item of one scope (and session); Limit and Offset of
// the request do not apply.
func (s *Service) DeleteScope(ctx context.Context, tenant string, req events.ItemScopeRequest) (events.DeleteReply, error) {
	if err := firstErr(events.ValidateID("tenant", tenant), req.Validate()); err != nil {
		return events.DeleteReply{}, invalid(err)
	}
	n, err := s.vectors.DeleteByFilter(ctx, scopeFilter(tenant, req))
	if err != nil {
		return events.DeleteReply{}, storeErr("delete scope "+string(req.Scope), err)
	}
	return events.DeleteReply{Deleted: n}, nil
}

// SearchItems finds live items by text, ranked like Recall, in one scope or all;
// at most req.Limit (0: Config.KItem).
func (s *Service) SearchItems(ctx context.Context, tenant string, req events.ItemSearchRequest) (events.ItemListReply, error) {
	if err := firstErr(events.ValidateID("tenant", tenant), req.Validate()); err != nil {
		return events.ItemListReply{}, invalid(err)
	}
	recalled, err := s.recall(ctx, vectorstore.Filter{Tenant: tenant, UserID: req.UserID, Scope: string(req.Scope)},
		req.Query, itemType, map[vectorstore.MemoryType]int{vectorstore.Item: req.Limit})
	if err != nil {
		return events.ItemListReply{}, err
	}
	ranked := recalled.Ranked
	reply := events.ItemListReply{Items: make([]events.MemoryItem, 0, len(ranked))}
	for _, r := range ranked {
		it, err := toItem(r.Record)
		if err != nil {
			return events.ItemListReply{}, err
		}
		reply.Items = append(reply.Items, it)
	}
	return reply, nil
}

// SweepExpired deletes the user's records that have expired by the service's
// clock and returns how many it deleted. It scans the user's records rather than
// asking the store for Filter.ExpiredOnly because the store judges expiry by the
// wall clock and the service by Deps.Now; the two agree in production.
func (s *Service) SweepExpired(ctx context.Context, tenant, userID string) (int, error) {
	if err := firstErr(events.ValidateID("tenant", tenant), events.ValidateID("user_id", userID)); err != nil {
		return 0, invalid(err)
	}
	now := s.nowAt(ctx)
	var expired []string
	err := s.scan(ctx, vectorstore.Filter{Tenant: tenant, UserID: userID, IncludeExpired: true}, func(r vectorstore.Record) error {
		if !live(r, now) {
			expired = append(expired, r.ID)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	deleted := 0
	for batch := range slices.Chunk(expired, scrollPage) {
		n, err := s.vectors.Delete(ctx, tenant, userID, batch...)
		deleted += n
		if err != nil {
			return deleted, storeErr("sweep", err)
		}
	}
	if deleted > 0 {
		s.logger.Info("expired memories swept", obs.Tenant(tenant), obs.User(userID), zap.Int("deleted", deleted))
	}
	return deleted, nil
}

// scopeFilter selects the items of one scope, and of one session for scope
// session, expired or not.
func scopeFilter(tenant string, req events.ItemScopeRequest) vectorstore.Filter {
	return vectorstore.Filter{
		Tenant: tenant, UserID: req.UserID, MemoryTypes: itemType,
		Scope: string(req.Scope), ChatID: req.SessionID, IncludeExpired: true,
	}
}

// scan calls fn for every record f selects, page by page.
func (s *Service) scan(ctx context.Context, f vectorstore.Filter, fn func(vectorstore.Record) error) error {
	offset := ""
	for {
		recs, next, err := s.vectors.Scroll(ctx, f, offset, scrollPage)
		if err != nil {
			return storeErr("scan", err)
		}
		for _, r := range recs {
			if err := fn(r); err != nil {
				return err
			}
		}
		if next == "" {
			return nil
		}
		offset = next
	}
}
