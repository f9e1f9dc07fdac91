package memory_test

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"pgregory.net/rapid"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/embed"
	"github.com/agentmem/agentmem/pkg/memory"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// jsonValue generates what a JSON object's field can hold, as encoding/json
// decodes it.
func jsonValue() *rapid.Generator[any] {
	scalar := rapid.OneOf(
		rapid.Map(rapid.String(), func(s string) any { return s }),
		rapid.Map(rapid.Float64Range(-1e9, 1e9), func(f float64) any { return f }),
		rapid.Map(rapid.Int64Range(-1<<40, 1<<40), func(i int64) any { return float64(i) }),
		rapid.Map(rapid.Bool(), func(b bool) any { return b }),
		rapid.Just[any](nil),
	)
	return rapid.OneOf(scalar,
		rapid.Deferred(func() *rapid.Generator[any] {
			return rapid.Map(rapid.SliceOfN(scalar, 0, 4), func(l []any) any { return l })
		}),
		rapid.Deferred(func() *rapid.Generator[any] {
			return rapid.Map(rapid.MapOfN(rapid.StringMatching(`[a-z]{1,6}`), scalar, 0, 4), func(m map[string]any) any { return m })
		}),
	)
}

// callerMetadata generates caller metadata with keys the service does not own.
func callerMetadata() *rapid.Generator[map[string]any] {
	return rapid.MapOfN(rapid.StringMatching(`x_[a-z0-9_]{1,10}`), jsonValue(), 0, 6)
}

func TestPropertyAddGetRoundTripKeepsMetadata(t *testing.T) {
	f := newFixture(t, memory.Config{})
	ctx := context.Background()
	n := 0
	rapid.Check(t, func(rt *rapid.T) {
		n++
		user := fmt.Sprintf("u%d", n)
		typ := rapid.SampledFrom([]events.MemoryType{events.MemoryEpisodic, events.MemorySemantic}).Draw(rt, "type")
		req := events.AddRequest{
			UserID:     user,
			Text:       rapid.StringMatching(`[A-Za-z][a-z ]{0,40}`).Draw(rt, "text"),
			MemoryType: typ,
			ChatID:     rapid.StringMatching(`(c[0-9]{1,3})?`).Draw(rt, "chat"),
			Who:        rapid.SampledFrom([]string{"", "user", "Caroline"}).Draw(rt, "who"),
			Metadata:   callerMetadata().Draw(rt, "metadata"),
		}
		add, err := f.svc.Add(ctx, "acme", req)
		if err != nil {
			rt.Fatal(err)
		}
		if len(add.MemoryIDs) != 1 {
			rt.Fatalf("add returned %d ids, want 1", len(add.MemoryIDs))
		}
		m, err := f.svc.Get(ctx, "acme", events.GetRequest{UserID: user, ID: add.MemoryIDs[0]})
		if err != nil {
			rt.Fatal(err)
		}
		for k, v := range req.Metadata {
			if got, ok := m.Metadata[k]; !ok || !reflect.DeepEqual(got, v) {
				rt.Fatalf("metadata %q = %#v, want %#v unchanged", k, got, v)
			}
		}
		if m.ID != add.MemoryIDs[0] || m.MemoryType != typ || m.Text != req.Text || m.ChatID != req.ChatID ||
			m.HitCount != 0 || !m.TS.Equal(t0) {
			rt.Fatalf("got %+v for %+v", m, req)
		}
		iso := t0.Format(time.RFC3339Nano)
		var want map[string]any
		if typ == events.MemoryEpisodic {
			who := req.Who
			if who == "" {
				who = "user"
			}
			chats := []any{}
			if req.ChatID != "" {
				chats = []any{req.ChatID}
			}
			want = map[string]any{"thing": req.Text, "time": iso, "chatid": req.ChatID, "who": who,
				"updates": []any{}, "source_chat_ids": chats, "merged_from_ids": []any{}}
			if m.Who != who {
				rt.Fatalf("who %q, want %q", m.Who, who)
			}
			if c, _ := m.Metadata["context"].(string); c == "" {
				rt.Fatalf("episodic metadata has no context: %v", m.Metadata)
			}
		} else {
			want = map[string]any{"fact": req.Text, "source_chatid": req.ChatID, "first_seen": iso}
		}
		for k, v := range want {
			if !reflect.DeepEqual(m.Metadata[k], v) {
				rt.Fatalf("metadata %q = %#v, want %#v (SPEC C1)", k, m.Metadata[k], v)
			}
		}
	})
}

func TestAddRetryUpsertsOneRecord(t *testing.T) {
	f := newFixture(t, memory.Config{})
	ctx := context.Background()
	req := events.AddRequest{UserID: "u1", Text: "My sales files have columns date, product, qty.", ChatID: "c1"}
	first, err := f.svc.Add(ctx, "acme", req)
	if err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(time.Minute)
	again, err := f.svc.Add(ctx, "acme", req)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(first.MemoryIDs, again.MemoryIDs) {
		t.Fatalf("retried add gave %v, first %v", again.MemoryIDs, first.MemoryIDs)
	}
	if n := f.count(t, "acme", "u1"); n != 1 {
		t.Fatalf("%d records after a retried add, want 1", n)
	}
	m, err := f.svc.Get(ctx, "acme", events.GetRequest{UserID: "u1", ID: first.MemoryIDs[0]})
	if err != nil {
		t.Fatal(err)
	}
	if !m.TS.Equal(t0) {
		t.Errorf("the retry rewrote the memory: ts %s, want %s", m.TS, t0)
	}
	h, err := f.svc.History(ctx, "acme", events.HistoryRequest{UserID: "u1", ID: first.MemoryIDs[0]})
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Changes) != 1 {
		t.Errorf("history %+v, want one add", h.Changes)
	}

	// One fact is one semantic record whatever chat it arrives from (SPEC C8).
	a, err := f.svc.Add(ctx, "acme", events.AddRequest{UserID: "u1", Text: "User likes green tea.", MemoryType: events.MemorySemantic, ChatID: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := f.svc.Add(ctx, "acme", events.AddRequest{UserID: "u1", Text: "user likes green tea", MemoryType: events.MemorySemantic, ChatID: "c2"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a.MemoryIDs, b.MemoryIDs) {
		t.Errorf("the same fact got ids %v and %v", a.MemoryIDs, b.MemoryIDs)
	}
	if n := f.count(t, "acme", "u1", vectorstore.Semantic); n != 1 {
		t.Errorf("%d semantic records, want 1", n)
	}
}

func TestUpdateReembedsAndRecordsHistory(t *testing.T) {
	f := newFixture(t, memory.Config{})
	ctx := context.Background()
	add, err := f.svc.Add(ctx, "acme", events.AddRequest{UserID: "u1", Text: "I live in Berlin.", ChatID: "c1",
		Metadata: map[string]any{"x_src": "import"}})
	if err != nil {
		t.Fatal(err)
	}
	id := add.MemoryIDs[0]
	f.clock.Advance(time.Hour)
	m, err := f.svc.Update(ctx, "acme", events.UpdateRequest{UserID: "u1", ID: id, Text: "I moved to Lisbon in March.",
		Metadata: map[string]any{"x_note": "corrected"}})
	if err != nil {
		t.Fatal(err)
	}
	if m.Text != "I moved to Lisbon in March." || m.Metadata["thing"] != m.Text {
		t.Errorf("update gave text %q, thing %v", m.Text, m.Metadata["thing"])
	}
	if m.Metadata["x_src"] != "import" || m.Metadata["x_note"] != "corrected" {
		t.Errorf("metadata not merged: %v", m.Metadata)
	}
	if !m.TS.Equal(t0) || m.ChatID != "c1" || m.Metadata["time"] != t0.Format(time.RFC3339Nano) {
		t.Errorf("update changed time or chat: %+v", m)
	}
	updates, _ := m.Metadata["updates"].([]any)
	if len(updates) != 1 {
		t.Fatalf("updates %v, want one entry", m.Metadata["updates"])
	}
	entry, _ := updates[0].(map[string]any)
	if entry["previous_text"] != "I live in Berlin." || entry["ts"] != t0.Add(time.Hour).Format(time.RFC3339Nano) {
		t.Errorf("update entry %v", entry)
	}

	recs, err := f.store.Get(ctx, "acme", "u1", id)
	if err != nil || len(recs) != 1 {
		t.Fatalf("store get: %v, %d records", err, len(recs))
	}
	vecs, err := f.emb.Embed(ctx, []string{m.Text})
	if err != nil {
		t.Fatal(err)
	}
	if c := embed.Cosine(recs[0].Vector, vecs[0]); c < 0.9999 {
		t.Errorf("stored vector has cosine %v with the new text's embedding: not re-embedded", c)
	}

	h, err := f.svc.History(ctx, "acme", events.HistoryRequest{UserID: "u1", ID: id})
	if err != nil {
		t.Fatal(err)
	}
	var ops []string
	for _, c := range h.Changes {
		ops = append(ops, c.Op)
	}
	if !slices.Equal(ops, []string{"add", "update"}) || h.Changes[1].Text != m.Text || h.Changes[1].Detail["previous_text"] != "I live in Berlin." {
		t.Errorf("history %+v, want add then update", h.Changes)
	}

	// A metadata-only update keeps the text and vector and still counts as an update.
	m2, err := f.svc.Update(ctx, "acme", events.UpdateRequest{UserID: "u1", ID: id, Metadata: map[string]any{"x_note": "again"}})
	if err != nil {
		t.Fatal(err)
	}
	if m2.Text != m.Text || m2.Metadata["x_note"] != "again" {
		t.Errorf("metadata update gave %+v", m2)
	}
	if u, _ := m2.Metadata["updates"].([]any); len(u) != 2 {
		t.Errorf("updates %v, want two entries", m2.Metadata["updates"])
	}
}

func TestDelete(t *testing.T) {
	f := newFixture(t, memory.Config{})
	ctx := context.Background()
	a, err := f.svc.Add(ctx, "acme", events.AddRequest{UserID: "u1", Text: "I have two cats."})
	if err != nil {
		t.Fatal(err)
	}
	b, err := f.svc.Add(ctx, "acme", events.AddRequest{UserID: "u1", Text: "I play the cello."})
	if err != nil {
		t.Fatal(err)
	}
	unknown := uuid.NewString()
	del, err := f.svc.Delete(ctx, "acme", events.DeleteRequest{UserID: "u1", IDs: []string{a.MemoryIDs[0], unknown}})
	if err != nil {
		t.Fatal(err)
	}
	if del.Deleted != 1 {
		t.Errorf("deleted %d, want 1", del.Deleted)
	}
	_, err = f.svc.Get(ctx, "acme", events.GetRequest{UserID: "u1", ID: a.MemoryIDs[0]})
	wantErr(t, err, []error{memory.ErrNotFound})
	if _, err := f.svc.Get(ctx, "acme", events.GetRequest{UserID: "u1", ID: b.MemoryIDs[0]}); err != nil {
		t.Errorf("the other memory: %v", err)
	}
	// A retried delete succeeds and deletes nothing; another user cannot delete u1's memory.
	if del, err := f.svc.Delete(ctx, "acme", events.DeleteRequest{UserID: "u1", IDs: []string{a.MemoryIDs[0]}}); err != nil || del.Deleted != 0 {
		t.Errorf("retried delete: %+v, %v", del, err)
	}
	if del, err := f.svc.Delete(ctx, "acme", events.DeleteRequest{UserID: "u2", IDs: b.MemoryIDs}); err != nil || del.Deleted != 0 {
		t.Errorf("delete by another user: %+v, %v", del, err)
	}
	h, err := f.svc.History(ctx, "acme", events.HistoryRequest{UserID: "u1", ID: a.MemoryIDs[0]})
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Changes) != 2 || h.Changes[1].Op != "delete" || h.Changes[1].Text != "I have two cats." {
		t.Errorf("history of a deleted memory %+v, want add, delete", h.Changes)
	}
}

// TestPropertySearchFiltersByUserAndLimitsPerType is SPEC C4 and C10 (filtering,
// limits): search returns only that user's episodic and semantic memories, at
// most k of each, best first.
func TestPropertySearchFiltersByUserAndLimitsPerType(t *testing.T) {
	f := newFixture(t, memory.Config{KEpisodic: 3, KSemantic: 2})
	ctx := context.Background()
	words := []string{"tea", "coffee", "berlin", "cats", "hiking", "sales", "columns", "sister", "cello", "morning"}
	sentence := rapid.Custom(func(rt *rapid.T) string {
		ws := rapid.SliceOfN(rapid.SampledFrom(words), 2, 5).Draw(rt, "words")
		return "I like " + fmt.Sprint(ws)
	})
	n := 0
	rapid.Check(t, func(rt *rapid.T) {
		n++
		tenant := fmt.Sprintf("t%d", n)
		users := rapid.IntRange(1, 3).Draw(rt, "users")
		own := map[string]map[string]events.MemoryType{} // user → id → type
		for u := range users {
			user := fmt.Sprintf("u%d", u)
			own[user] = map[string]events.MemoryType{}
			for _, typ := range []events.MemoryType{events.MemoryEpisodic, events.MemorySemantic} {
				for range rapid.IntRange(0, 6).Draw(rt, "records") {
					add, err := f.svc.Add(ctx, tenant, events.AddRequest{UserID: user, Text: sentence.Draw(rt, "text"), MemoryType: typ})
					if err != nil {
						rt.Fatal(err)
					}
					own[user][add.MemoryIDs[0]] = typ
				}
			}
		}
		// Items are the user's too, but not what search returns by default.
		if _, err := f.svc.SaveItem(ctx, tenant, "u0", events.MemoryItem{Scope: events.ScopeUser, Kind: events.ItemPreference,
			Key: "drink", Content: "I like tea"}); err != nil {
			rt.Fatal(err)
		}
		user := fmt.Sprintf("u%d", rapid.IntRange(0, users-1).Draw(rt, "searcher"))
		query := rapid.SampledFrom(words).Draw(rt, "query")
		reply, err := f.svc.Search(ctx, tenant, events.SearchRequest{UserID: user, Query: query})
		if err != nil {
			rt.Fatal(err)
		}
		perType := map[events.MemoryType]int{}
		for _, typ := range own[user] {
			perType[typ]++
		}
		got := map[events.MemoryType]int{}
		for i, r := range reply.Results {
			typ, ok := own[user][r.ID]
			if !ok || typ != r.MemoryType {
				rt.Fatalf("result %s (%s) is not one of %s's memories", r.ID, r.MemoryType, user)
			}
			got[r.MemoryType]++
			if i > 0 && r.Score > reply.Results[i-1].Score {
				rt.Fatalf("results not best first: %v after %v", r.Score, reply.Results[i-1].Score)
			}
		}
		// Dense search ranks every candidate, so each type fills its k when it can.
		if got[events.MemoryEpisodic] != min(3, perType[events.MemoryEpisodic]) || got[events.MemorySemantic] != min(2, perType[events.MemorySemantic]) {
			rt.Fatalf("got %v per type, stored %v, want min(k, stored) with k episodic 3, semantic 2", got, perType)
		}
	})
}

func TestSearchTypesAndLimit(t *testing.T) {
	f := newFixture(t, memory.Config{})
	ctx := context.Background()
	for i := range 8 {
		for _, typ := range []events.MemoryType{events.MemoryEpisodic, events.MemorySemantic} {
			if _, err := f.svc.Add(ctx, "acme", events.AddRequest{UserID: "u1", Text: fmt.Sprintf("I drink tea number %d", i), MemoryType: typ}); err != nil {
				t.Fatal(err)
			}
		}
	}
	cases := []struct {
		name  string
		req   events.SearchRequest
		want  int
		types []events.MemoryType
	}{
		{"default both types, 5 each", events.SearchRequest{Query: "tea"}, 10, []events.MemoryType{events.MemoryEpisodic, events.MemorySemantic}},
		{"semantic only", events.SearchRequest{Query: "tea", MemoryTypes: []events.MemoryType{events.MemorySemantic}}, 5, []events.MemoryType{events.MemorySemantic}},
		{"limit caps the whole result", events.SearchRequest{Query: "tea", Limit: 3}, 3, nil},
		{"markdown is the retriever's", events.SearchRequest{Query: "tea", MemoryTypes: []events.MemoryType{events.MemoryMarkdown}}, 0, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.req.UserID = "u1"
			reply, err := f.svc.Search(ctx, "acme", c.req)
			if err != nil {
				t.Fatal(err)
			}
			if len(reply.Results) != c.want {
				t.Fatalf("%d results, want %d", len(reply.Results), c.want)
			}
			for _, typ := range c.types {
				if !slices.ContainsFunc(reply.Results, func(r events.SearchResult) bool { return r.MemoryType == typ }) {
					t.Errorf("no %s result", typ)
				}
			}
		})
	}
}

// TestPropertyResetDeletesOnlyThatUser is SPEC C2 reset and C10 "reset": the
// count returned is what the user had, nothing of theirs remains, and every
// other user keeps everything.
func TestPropertyResetDeletesOnlyThatUser(t *testing.T) {
	f := newFixture(t, memory.Config{})
	ctx := context.Background()
	n := 0
	rapid.Check(t, func(rt *rapid.T) {
		n++
		tenants := []string{fmt.Sprintf("t%d", n), fmt.Sprintf("t%db", n)}
		users := []string{"u0", "u1", "u2"}
		lastID := map[[2]string]string{}
		for _, tenant := range tenants {
			for _, user := range users {
				for i := range rapid.IntRange(0, 4).Draw(rt, "memories") {
					typ := rapid.SampledFrom([]events.MemoryType{events.MemoryEpisodic, events.MemorySemantic}).Draw(rt, "type")
					add, err := f.svc.Add(ctx, tenant, events.AddRequest{UserID: user, Text: fmt.Sprintf("I own %d bikes", i), MemoryType: typ})
					if err != nil {
						rt.Fatal(err)
					}
					lastID[[2]string{tenant, user}] = add.MemoryIDs[0]
				}
				for i := range rapid.IntRange(0, 2).Draw(rt, "items") {
					if _, err := f.svc.SaveItem(ctx, tenant, user, events.MemoryItem{Scope: events.ScopeUser, Kind: events.ItemFact,
						Key: fmt.Sprintf("k%d", i), Content: "bikes", TTLSec: rapid.Int64Range(0, 5).Draw(rt, "ttl")}); err != nil {
						rt.Fatal(err)
					}
				}
			}
		}
		// Some items may have expired; reset removes them too.
		f.clock.Advance(time.Duration(rapid.IntRange(0, 10).Draw(rt, "advance")) * time.Second)
		before := map[[2]string]int{}
		for _, tenant := range tenants {
			for _, user := range users {
				before[[2]string{tenant, user}] = f.count(rt, tenant, user)
			}
		}
		victim := [2]string{tenants[0], rapid.SampledFrom(users).Draw(rt, "victim")}
		reply, err := f.svc.Reset(ctx, victim[0], events.ResetRequest{UserID: victim[1]})
		if err != nil {
			rt.Fatal(err)
		}
		if reply.Deleted != before[victim] {
			rt.Fatalf("reset returned %d, the user had %d", reply.Deleted, before[victim])
		}
		for k, want := range before {
			if k == victim {
				want = 0
			}
			if got := f.count(rt, k[0], k[1]); got != want {
				rt.Fatalf("%v holds %d records after resetting %v, want %d", k, got, victim, want)
			}
		}
		for k, id := range lastID {
			h, err := f.svc.History(ctx, k[0], events.HistoryRequest{UserID: k[1], ID: id})
			switch {
			case k == victim:
				if err == nil {
					rt.Fatalf("history of a reset user's memory survived: %+v", h)
				}
			case err != nil || len(h.Changes) == 0:
				rt.Fatalf("history of %v, which was not reset: %+v, %v", k, h, err)
			}
		}
	})
}

func TestResetRemovesHistory(t *testing.T) {
	f := newFixture(t, memory.Config{})
	ctx := context.Background()
	add, err := f.svc.Add(ctx, "acme", events.AddRequest{UserID: "u1", Text: "I have a red bike."})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Reset(ctx, "acme", events.ResetRequest{UserID: "u1"}); err != nil {
		t.Fatal(err)
	}
	_, err = f.svc.History(ctx, "acme", events.HistoryRequest{UserID: "u1", ID: add.MemoryIDs[0]})
	wantErr(t, err, []error{memory.ErrNotFound})
	// The log works again after the purge.
	if _, err := f.svc.Add(ctx, "acme", events.AddRequest{UserID: "u1", Text: "I have a red bike."}); err != nil {
		t.Fatal(err)
	}
	h, err := f.svc.History(ctx, "acme", events.HistoryRequest{UserID: "u1", ID: add.MemoryIDs[0]})
	if err != nil || len(h.Changes) != 1 {
		t.Fatalf("history after re-adding: %+v, %v", h, err)
	}
}

func TestInvalidInputNamesTheField(t *testing.T) {
	f := newFixture(t, memory.Config{})
	ctx := context.Background()
	reqErr := []error{memory.ErrInvalid, events.ErrInvalidRequest}
	onlyInvalid := []error{memory.ErrInvalid}
	cases := []struct {
		name      string
		call      func() error
		sentinels []error
		word      string
	}{
		{"tenant", func() error {
			_, err := f.svc.Add(ctx, "ac.me", events.AddRequest{UserID: "u1", Text: "x"})
			return err
		}, onlyInvalid, "tenant"},
		{"empty text", func() error {
			_, err := f.svc.Add(ctx, "acme", events.AddRequest{UserID: "u1"})
			return err
		}, reqErr, "text"},
		{"add of an item", func() error {
			_, err := f.svc.Add(ctx, "acme", events.AddRequest{UserID: "u1", Text: "x", MemoryType: events.MemoryItemType})
			return err
		}, reqErr, "memory_type"},
		{"reserved metadata", func() error {
			_, err := f.svc.Add(ctx, "acme", events.AddRequest{UserID: "u1", Text: "x", Metadata: map[string]any{"time": "yesterday"}})
			return err
		}, onlyInvalid, "metadata.time"},
		{"id not a uuid", func() error {
			_, err := f.svc.Get(ctx, "acme", events.GetRequest{UserID: "u1", ID: "abc"})
			return err
		}, onlyInvalid, "id"},
		{"delete id not a uuid", func() error {
			_, err := f.svc.Delete(ctx, "acme", events.DeleteRequest{UserID: "u1", IDs: []string{uuid.NewString(), "abc"}})
			return err
		}, onlyInvalid, "ids[1]"},
		{"update changes nothing", func() error {
			_, err := f.svc.Update(ctx, "acme", events.UpdateRequest{UserID: "u1", ID: uuid.NewString()})
			return err
		}, reqErr, "text"},
		{"search limit", func() error {
			_, err := f.svc.Search(ctx, "acme", events.SearchRequest{UserID: "u1", Query: "x", Limit: -1})
			return err
		}, reqErr, "limit"},
		{"recall query", func() error {
			_, err := f.svc.Recall(ctx, "acme", "u1", "", nil, nil)
			return err
		}, onlyInvalid, "query"},
		{"item confidence", func() error {
			_, err := f.svc.SaveItem(ctx, "acme", "u1", events.MemoryItem{Scope: events.ScopeUser, Kind: events.ItemFact, Key: "k", Content: "x", Confidence: 2})
			return err
		}, reqErr, "item.confidence"},
		{"item session", func() error {
			_, err := f.svc.GetItem(ctx, "acme", events.ItemKeyRequest{UserID: "u1", Scope: events.ScopeSession, Kind: events.ItemFact, Key: "k"})
			return err
		}, reqErr, "session_id"},
		{"history change op", func() error {
			return f.svc.Log().Append(ctx, "acme", "u1", uuid.NewString(), events.Change{TS: t0})
		}, onlyInvalid, "op"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { wantErr(t, c.call(), c.sentinels, c.word) })
	}
}

func TestUnknownIDIsNotFound(t *testing.T) {
	f := newFixture(t, memory.Config{})
	ctx := context.Background()
	id := uuid.NewString()
	_, err := f.svc.Get(ctx, "acme", events.GetRequest{UserID: "u1", ID: id})
	wantErr(t, err, []error{memory.ErrNotFound}, id)
	_, err = f.svc.Update(ctx, "acme", events.UpdateRequest{UserID: "u1", ID: id, Text: "x"})
	wantErr(t, err, []error{memory.ErrNotFound})
	_, err = f.svc.History(ctx, "acme", events.HistoryRequest{UserID: "u1", ID: id})
	wantErr(t, err, []error{memory.ErrNotFound})

	// Another user's memory is unknown too.
	add, err := f.svc.Add(ctx, "acme", events.AddRequest{UserID: "u1", Text: "I like jazz."})
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.svc.Get(ctx, "acme", events.GetRequest{UserID: "u2", ID: add.MemoryIDs[0]})
	wantErr(t, err, []error{memory.ErrNotFound})
	_, err = f.svc.Get(ctx, "other", events.GetRequest{UserID: "u1", ID: add.MemoryIDs[0]})
	wantErr(t, err, []error{memory.ErrNotFound})
}

func TestConfigValidateNamesTheField(t *testing.T) {
	cases := []struct {
		cfg  memory.Config
		word string
	}{
		{memory.Config{HistoryStream: "a.b"}, "HistoryStream"},
		{memory.Config{MaxHistory: -1}, "MaxHistory"},
		{memory.Config{KSemantic: events.MaxLimit + 1}, "KSemantic"},
		{memory.Config{Rank: memory.RankConfig{RecencyHalfLife: -time.Hour}}, "RecencyHalfLife"},
		{memory.Config{Rank: memory.RankConfig{HitWeight: -1}}, "HitWeight"},
		{memory.Config{Rank: memory.RankConfig{Fusion: "max"}}, "Fusion"},
		{memory.Config{Rank: memory.RankConfig{DenseWeight: -0.5}}, "DenseWeight"},
		{memory.Config{Rank: memory.RankConfig{DenseFloor: 1}}, "DenseFloor"},
	}
	f := newFixture(t, memory.Config{})
	for _, c := range cases {
		_, err := memory.New(context.Background(), c.cfg, memory.Deps{Vectors: f.store, Embedder: f.emb, JS: nil}, nil)
		wantErr(t, err, []error{memory.ErrInvalidConfig}, c.word)
	}
	_, err := memory.New(context.Background(), memory.Config{}, memory.Deps{}, nil)
	wantErr(t, err, []error{memory.ErrInvalidConfig}, "Deps.Vectors", "Deps.Embedder", "Deps.JS")
}
