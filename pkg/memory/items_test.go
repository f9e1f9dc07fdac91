package memory_test

import (
	"context"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/memory"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

func itemKeys(items []events.MemoryItem) []string {
	keys := make([]string, len(items))
	for i, it := range items {
		keys[i] = string(it.Kind) + "/" + it.Key
	}
	return keys
}

func TestItemsLifecycle(t *testing.T) {
	f := newFixture(t, memory.Config{})
	ctx := context.Background()
	drink := events.MemoryItem{
		Scope: events.ScopeUser, Kind: events.ItemPreference, Key: "drink", Content: "Prefers green tea in the morning",
		Data: map[string]any{"drink": "tea", "cups": float64(2)}, Source: "chat", Confidence: 0.8,
		Meta: map[string]any{"dia_id": "D1:3"},
	}
	saved, err := f.svc.SaveItem(ctx, "acme", "u1", drink)
	if err != nil {
		t.Fatal(err)
	}
	if !saved.CreatedTS.Equal(t0) || !saved.UpdatedTS.Equal(t0) {
		t.Errorf("timestamps %s/%s, want both %s", saved.CreatedTS, saved.UpdatedTS, t0)
	}
	key := events.ItemKeyRequest{UserID: "u1", Scope: events.ScopeUser, Kind: events.ItemPreference, Key: "drink"}
	got, err := f.svc.GetItem(ctx, "acme", key)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, saved) {
		t.Errorf("get %+v\nwant %+v", got, saved)
	}

	// Saving the same key again replaces the item and keeps created_ts.
	f.clock.Advance(time.Hour)
	drink.Content = "Prefers black coffee"
	resaved, err := f.svc.SaveItem(ctx, "acme", "u1", drink)
	if err != nil {
		t.Fatal(err)
	}
	if !resaved.CreatedTS.Equal(t0) || !resaved.UpdatedTS.Equal(t0.Add(time.Hour)) {
		t.Errorf("re-save timestamps %s/%s", resaved.CreatedTS, resaved.UpdatedTS)
	}
	if n := f.count(t, "acme", "u1", vectorstore.Item); n != 1 {
		t.Errorf("%d item records after saving one key twice, want 1", n)
	}

	// Update needs an existing item.
	upd := events.ItemRequest{UserID: "u1", Item: drink}
	upd.Item.Content = "Prefers espresso"
	updated, err := f.svc.UpdateItem(ctx, "acme", upd)
	if err != nil {
		t.Fatal(err)
	}
	if updated.Content != "Prefers espresso" || !updated.CreatedTS.Equal(t0) {
		t.Errorf("update gave %+v", updated)
	}
	missing := upd
	missing.Item.Key = "nope"
	_, err = f.svc.UpdateItem(ctx, "acme", missing)
	wantErr(t, err, []error{memory.ErrNotFound})

	// More items in several scopes; session items are per session.
	for _, it := range []events.MemoryItem{
		{Scope: events.ScopeUser, Kind: events.ItemFact, Key: "city", Content: "Lives in Lisbon"},
		{Scope: events.ScopeUser, Kind: events.ItemGoal, Key: "marathon", Content: "Run a marathon this year"},
		{Scope: events.ScopePersona, Kind: events.ItemConstraint, Key: "tone", Content: "Answer briefly"},
		{Scope: events.ScopeSession, SessionID: "s1", Kind: events.ItemNote, Key: "task", Content: "Cleaning the sales sheet"},
		{Scope: events.ScopeSession, SessionID: "s2", Kind: events.ItemNote, Key: "task", Content: "Writing a report"},
	} {
		if _, err := f.svc.SaveItem(ctx, "acme", "u1", it); err != nil {
			t.Fatal(err)
		}
	}
	list, err := f.svc.ListItems(ctx, "acme", events.ItemScopeRequest{UserID: "u1", Scope: events.ScopeUser})
	if err != nil {
		t.Fatal(err)
	}
	if keys := itemKeys(list.Items); !slices.Equal(keys, []string{"fact/city", "goal/marathon", "preference/drink"}) {
		t.Errorf("user scope lists %v", keys)
	}
	page, err := f.svc.ListItems(ctx, "acme", events.ItemScopeRequest{UserID: "u1", Scope: events.ScopeUser, Offset: 1, Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if keys := itemKeys(page.Items); !slices.Equal(keys, []string{"goal/marathon"}) {
		t.Errorf("page lists %v", keys)
	}
	s1, err := f.svc.ListItems(ctx, "acme", events.ItemScopeRequest{UserID: "u1", Scope: events.ScopeSession, SessionID: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(s1.Items) != 1 || s1.Items[0].Content != "Cleaning the sales sheet" || s1.Items[0].SessionID != "s1" {
		t.Errorf("session s1 lists %+v", s1.Items)
	}

	found, err := f.svc.SearchItems(ctx, "acme", events.ItemSearchRequest{UserID: "u1", Query: "marathon run", Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(found.Items) == 0 || found.Items[0].Key != "marathon" || len(found.Items) > 2 {
		t.Errorf("search found %v", itemKeys(found.Items))
	}
	inPersona, err := f.svc.SearchItems(ctx, "acme", events.ItemSearchRequest{UserID: "u1", Query: "marathon run", Scope: events.ScopePersona})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range inPersona.Items {
		if it.Scope != events.ScopePersona {
			t.Errorf("persona search returned %+v", it)
		}
	}
	// Items are not episodic or semantic memories.
	if res, err := f.svc.Search(ctx, "acme", events.SearchRequest{UserID: "u1", Query: "marathon"}); err != nil || len(res.Results) != 0 {
		t.Errorf("memory search returned items: %+v, %v", res.Results, err)
	}

	del, err := f.svc.DeleteItem(ctx, "acme", key)
	if err != nil || del.Deleted != 1 {
		t.Fatalf("delete item: %+v, %v", del, err)
	}
	_, err = f.svc.GetItem(ctx, "acme", key)
	wantErr(t, err, []error{memory.ErrNotFound})

	scope, err := f.svc.DeleteScope(ctx, "acme", events.ItemScopeRequest{UserID: "u1", Scope: events.ScopeSession, SessionID: "s1"})
	if err != nil || scope.Deleted != 1 {
		t.Fatalf("delete scope s1: %+v, %v", scope, err)
	}
	if n := f.count(t, "acme", "u1", vectorstore.Item); n != 4 {
		t.Errorf("%d items left, want 4 (city, marathon, tone, s2 task)", n)
	}
}

// TestExpiredItemIsNeverReturned is SPEC D4: once its TTL has run out by the
// service's clock, no call returns the item, and SweepExpired deletes it.
func TestExpiredItemIsNeverReturned(t *testing.T) {
	f := newFixture(t, memory.Config{})
	ctx := context.Background()
	it := events.MemoryItem{Scope: events.ScopeUser, Kind: events.ItemGoal, Key: "trip", Content: "Plan the Kyoto trip", TTLSec: 60}
	if _, err := f.svc.SaveItem(ctx, "acme", "u1", it); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.SaveItem(ctx, "acme", "u1", events.MemoryItem{Scope: events.ScopeUser, Kind: events.ItemGoal, Key: "kyoto-book", Content: "Read a Kyoto guide book"}); err != nil {
		t.Fatal(err)
	}
	key := events.ItemKeyRequest{UserID: "u1", Scope: it.Scope, Kind: it.Kind, Key: it.Key}
	scope := events.ItemScopeRequest{UserID: "u1", Scope: events.ScopeUser}
	search := events.ItemSearchRequest{UserID: "u1", Query: "Kyoto trip"}
	f.clock.Advance(59 * time.Second)
	if _, err := f.svc.GetItem(ctx, "acme", key); err != nil {
		t.Fatalf("a live item: %v", err)
	}
	if res, err := f.svc.SearchItems(ctx, "acme", search); err != nil || len(res.Items) != 2 {
		t.Fatalf("search before expiry: %v, %v", itemKeys(res.Items), err)
	}

	f.clock.Advance(time.Second) // age == ttl: expired
	_, err := f.svc.GetItem(ctx, "acme", key)
	wantErr(t, err, []error{memory.ErrNotFound})
	_, err = f.svc.UpdateItem(ctx, "acme", events.ItemRequest{UserID: "u1", Item: it})
	wantErr(t, err, []error{memory.ErrNotFound})
	list, err := f.svc.ListItems(ctx, "acme", scope)
	if err != nil {
		t.Fatal(err)
	}
	if keys := itemKeys(list.Items); !slices.Equal(keys, []string{"goal/kyoto-book"}) {
		t.Errorf("list returned %v", keys)
	}
	res, err := f.svc.SearchItems(ctx, "acme", search)
	if err != nil {
		t.Fatal(err)
	}
	if keys := itemKeys(res.Items); !slices.Equal(keys, []string{"goal/kyoto-book"}) {
		t.Errorf("search returned %v", keys)
	}
	ranked, err := f.svc.Recall(ctx, "acme", "u1", "Kyoto trip", []vectorstore.MemoryType{vectorstore.Item}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(ranked) != 1 || ranked[0].Record.Key != "kyoto-book" {
		t.Errorf("recall returned %+v", ranked)
	}

	n, err := f.svc.SweepExpired(ctx, "acme", "u1")
	if err != nil || n != 1 {
		t.Fatalf("sweep: %d, %v; want 1", n, err)
	}
	if n := f.count(t, "acme", "u1", vectorstore.Item); n != 1 {
		t.Errorf("%d items after the sweep, want 1", n)
	}
	if n, err := f.svc.SweepExpired(ctx, "acme", "u1"); err != nil || n != 0 {
		t.Errorf("second sweep: %d, %v", n, err)
	}

	// Saved again after expiry, it is a new item.
	again, err := f.svc.SaveItem(ctx, "acme", "u1", it)
	if err != nil {
		t.Fatal(err)
	}
	if !again.CreatedTS.Equal(f.clock.Now()) {
		t.Errorf("re-created item has created_ts %s, want now %s", again.CreatedTS, f.clock.Now())
	}
}

// TestPackItemsEqualsListItemsPerScope: the one-scan item lists of a context pack
// are what ListItems gives for each scope: live items only, the asked session's
// only, ordered by kind and key, cut to the limit.
func TestPackItemsEqualsListItemsPerScope(t *testing.T) {
	f := newFixture(t, memory.Config{})
	ctx := context.Background()
	for _, it := range []events.MemoryItem{
		{Scope: events.ScopeUser, Kind: events.ItemFact, Key: "city", Content: "Lives in Lisbon"},
		{Scope: events.ScopeUser, Kind: events.ItemGoal, Key: "marathon", Content: "Run a marathon"},
		{Scope: events.ScopeUser, Kind: events.ItemFact, Key: "age", Content: "Is 40"},
		{Scope: events.ScopeUser, Kind: events.ItemNote, Key: "brief", Content: "Short-lived", TTLSec: 60},
		{Scope: events.ScopePersona, Kind: events.ItemConstraint, Key: "tone", Content: "Answer briefly"},
		{Scope: events.ScopeSession, SessionID: "s1", Kind: events.ItemNote, Key: "task", Content: "Cleaning the sheet"},
		{Scope: events.ScopeSession, SessionID: "s2", Kind: events.ItemNote, Key: "task", Content: "Writing a report"},
		{Scope: events.ScopeGlobal, Kind: events.ItemFact, Key: "other", Content: "Not in a pack"},
	} {
		if _, err := f.svc.SaveItem(ctx, "acme", "u1", it); err != nil {
			t.Fatal(err)
		}
	}
	f.clock.Advance(2 * time.Minute) // the note with a TTL expires
	list := func(scope events.Scope, session string, limit int) []events.MemoryItem {
		reply, err := f.svc.ListItems(ctx, "acme", events.ItemScopeRequest{UserID: "u1", Scope: scope, SessionID: session, Limit: limit})
		if err != nil {
			t.Fatal(err)
		}
		return reply.Items
	}
	for _, limit := range []int{0, 2} {
		got, err := f.svc.PackItems(ctx, "acme", "u1", "s1", limit)
		if err != nil {
			t.Fatal(err)
		}
		if want := list(events.ScopePersona, "", limit); !reflect.DeepEqual(got.Persona, want) {
			t.Errorf("limit %d: persona %v, want %v", limit, itemKeys(got.Persona), itemKeys(want))
		}
		if want := list(events.ScopeUser, "", limit); !reflect.DeepEqual(got.UserProfile, want) {
			t.Errorf("limit %d: user profile %v, want %v", limit, itemKeys(got.UserProfile), itemKeys(want))
		}
		if want := list(events.ScopeSession, "s1", limit); !reflect.DeepEqual(got.Session, want) || len(want) != 1 {
			t.Errorf("limit %d: session %+v, want %+v", limit, got.Session, want)
		}
	}
	noSession, err := f.svc.PackItems(ctx, "acme", "u1", "", 0)
	if err != nil || noSession.Session != nil || len(noSession.UserProfile) != 3 {
		t.Errorf("without a session: %+v, %v; want no session items and 3 live user items", noSession, err)
	}
	_, err = f.svc.PackItems(ctx, "acme", "u1", "s1", events.MaxLimit+1)
	wantErr(t, err, []error{memory.ErrInvalid})
}
