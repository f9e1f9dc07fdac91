package vectorstoretest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentmem/agentmem/pkg/vectorstore"
	"pgregory.net/rapid"
)

var (
	tenants    = []string{"acme", "globex"}
	users      = []string{"u1", "u2"}
	vocabulary = []string{"sales", "column", "chart", "blue", "report", "friday", "pandas", "error", "peking", "university", "lunch", "budget"}
	memTypes   = []vectorstore.MemoryType{vectorstore.Episodic, vectorstore.Semantic, vectorstore.Item}
)

// genJSON generates JSON values of bounded depth: what metadata may hold.
func genJSON(depth int) *rapid.Generator[any] {
	leaves := []*rapid.Generator[any]{
		rapid.Map(rapid.String(), func(s string) any { return s }),
		rapid.Map(rapid.Float64Range(-1e15, 1e15), func(f float64) any { return f }),
		rapid.Map(rapid.IntRange(-1000, 1000), func(i int) any { return i }),
		rapid.Map(rapid.Bool(), func(b bool) any { return b }),
		rapid.Just[any](nil),
	}
	if depth == 0 {
		return rapid.OneOf(leaves...)
	}
	return rapid.OneOf(append(leaves,
		rapid.Map(rapid.SliceOfN(genJSON(depth-1), 0, 3), func(v []any) any { return v }),
		rapid.Map(rapid.MapOfN(rapid.StringMatching(`[a-z_]{1,6}`), genJSON(depth-1), 0, 3), func(m map[string]any) any { return m }),
	)...)
}

// genText is "note" plus vocabulary words: every text shares the term "note", so a
// sparse query for it reaches every record.
func genText(t *rapid.T, label string) string {
	words := rapid.SliceOfN(rapid.SampledFrom(vocabulary), 1, 5).Draw(t, label)
	return "note " + strings.Join(words, " ")
}

// genRecord draws a record of the partition with every field set at random. expiry
// picks past, future or never.
func genRecord(t *rapid.T, tenant, user string, expiry bool) vectorstore.Record {
	text := genText(t, "text")
	r := vectorstore.Record{
		ID: vectorstore.DeterministicID(rapid.StringMatching(`[a-z0-9]{12}`).Draw(t, "idseed")), Tenant: tenant, UserID: user,
		MemoryType: rapid.SampledFrom(memTypes).Draw(t, "type"),
		Scope:      rapid.SampledFrom([]string{"", "user", "session"}).Draw(t, "scope"),
		Kind:       rapid.SampledFrom([]string{"", "fact", "preference"}).Draw(t, "kind"),
		Key:        rapid.SampledFrom([]string{"", "k1", "k2"}).Draw(t, "key"),
		Text:       text, Vector: vectorOf(text),
		TS:         base.Add(time.Duration(rapid.Int64Range(-1e12, 1e12).Draw(t, "ts_us")) * time.Microsecond),
		ChatID:     rapid.SampledFrom([]string{"", "c1", "c2"}).Draw(t, "chat"),
		Who:        rapid.SampledFrom([]string{"", "alice", "bob"}).Draw(t, "who"),
		HitCount:   rapid.IntRange(0, 50).Draw(t, "hits"),
		Confidence: rapid.Float64Range(0, 1).Draw(t, "confidence"),
		Metadata: map[string]any{
			"source": rapid.SampledFrom([]string{"chat", "tool"}).Draw(t, "source"),
			"n":      rapid.IntRange(0, 2).Draw(t, "n"),
			"pinned": rapid.Bool().Draw(t, "pinned"),
			"extra":  genJSON(2).Draw(t, "extra"),
		},
	}
	if expiry {
		switch rapid.IntRange(0, 2).Draw(t, "expiry") {
		case 1:
			r.ExpiresAt = time.Now().Add(-time.Hour)
		case 2:
			r.ExpiresAt = time.Now().Add(time.Hour)
		}
	}
	return r
}

// genFilter draws a filter on tenant/user constraining a random subset of fields.
func genFilter(t *rapid.T, tenant, user string, recs []vectorstore.Record) vectorstore.Filter {
	f := vectorstore.Filter{Tenant: tenant, UserID: user}
	if rapid.Bool().Draw(t, "by type") {
		f.MemoryTypes = rapid.SliceOfNDistinct(rapid.SampledFrom(memTypes), 1, 3, func(m vectorstore.MemoryType) vectorstore.MemoryType { return m }).Draw(t, "types")
	}
	if rapid.Bool().Draw(t, "by since") {
		f.Since = base.Add(time.Duration(rapid.Int64Range(-1e12, 1e12).Draw(t, "since_us")) * time.Microsecond)
	}
	if rapid.Bool().Draw(t, "by until") {
		f.Until = f.Since.Add(time.Duration(rapid.Int64Range(1, 2e12).Draw(t, "span_us")) * time.Microsecond)
		if f.Since.IsZero() {
			f.Until = base
		}
	}
	pick := func(label string, vals ...string) string {
		if rapid.Bool().Draw(t, "by "+label) {
			return rapid.SampledFrom(vals).Draw(t, label)
		}
		return ""
	}
	f.ChatID, f.Who = pick("chat", "c1", "c2"), pick("who", "alice", "bob")
	f.Scope, f.Kind, f.Key = pick("scope", "user", "session"), pick("kind", "fact", "preference"), pick("key", "k1", "k2")
	if rapid.Bool().Draw(t, "by payload") {
		f.Payload = map[string]any{}
		if rapid.Bool().Draw(t, "by source") {
			f.Payload["source"] = rapid.SampledFrom([]string{"chat", "tool"}).Draw(t, "source")
		}
		if rapid.Bool().Draw(t, "by n") {
			f.Payload["n"] = rapid.IntRange(0, 2).Draw(t, "n")
		}
		if rapid.Bool().Draw(t, "by pinned") {
			f.Payload["pinned"] = rapid.Bool().Draw(t, "pinned")
		}
	}
	if len(recs) > 0 && rapid.Bool().Draw(t, "by ids") {
		f.IDs = ids(rapid.SliceOfN(rapid.SampledFrom(recs), 1, 3).Draw(t, "ids"))
	}
	f.IncludeExpired = rapid.Bool().Draw(t, "include expired")
	return f
}

// storeFor opens a store for one rapid case; it is closed when the case ends.
func storeFor(t *testing.T, rt *rapid.T, newStore func(t *testing.T) vectorstore.Store) vectorstore.Store {
	s := newStore(t)
	rt.Cleanup(func() { s.Close() })
	return s
}

// Property (C10 field completeness): every field of every stored record comes back
// from Get and Scroll as it was stored, arbitrary metadata JSON included.
func propertyFieldCompleteness(t *testing.T, newStore func(t *testing.T) vectorstore.Store) {
	rapid.Check(t, func(rt *rapid.T) {
		s := storeFor(t, rt, newStore)
		var recs []vectorstore.Record
		for i := range rapid.IntRange(1, 4).Draw(rt, "n") {
			r := genRecord(rt, rapid.SampledFrom(tenants).Draw(rt, "tenant"), rapid.SampledFrom(users).Draw(rt, "user"), false)
			r.ID = vectorstore.DeterministicID("field", fmt.Sprint(i))
			r.Metadata["extra"] = genJSON(3).Draw(rt, "metadata")
			if rapid.Bool().Draw(rt, "nil metadata") {
				r.Metadata = nil
			}
			recs = append(recs, r)
		}
		upsert(rt, s, recs...)
		for _, want := range recs {
			got, err := s.Get(ctx, want.Tenant, want.UserID, want.ID)
			if err != nil || len(got) != 1 {
				rt.Fatalf("Get %s: %v, %d records", want.ID, err, len(got))
			}
			if d := sameRecord(got[0], want); d != "" {
				rt.Fatalf("Get: %s", d)
			}
			f := partition(want.Tenant, want.UserID)
			f.IDs = []string{want.ID}
			scrolled := scrollAll(rt, s, f, 1)
			if len(scrolled) != 1 {
				rt.Fatalf("Scroll by id returned %d records", len(scrolled))
			}
			if d := sameRecord(scrolled[0], want); d != "" {
				rt.Fatalf("Scroll: %s", d)
			}
		}
	})
}

// Property (C10 filtering): Count, Scroll and every search mode select exactly the
// records of the asked user that the filter admits, never another user's.
func propertyFiltering(t *testing.T, newStore func(t *testing.T) vectorstore.Store) {
	rapid.Check(t, func(rt *rapid.T) {
		s := storeFor(t, rt, newStore)
		var all []vectorstore.Record
		for range rapid.IntRange(0, 12).Draw(rt, "n") {
			all = append(all, genRecord(rt, rapid.SampledFrom(tenants).Draw(rt, "tenant"), rapid.SampledFrom(users).Draw(rt, "user"), true))
		}
		all = dedupeIDs(all)
		if len(all) > 0 {
			upsert(rt, s, all...)
		}
		f := genFilter(rt, "acme", "u1", all)
		checkFilter(rt, s, "random filter", f, all)
	})
}

// Property (C10 limits): no search returns more than Limit hits, and a dense search
// returns exactly min(Limit, matching records); no Scroll page exceeds its limit.
func propertyLimits(t *testing.T, newStore func(t *testing.T) vectorstore.Store) {
	rapid.Check(t, func(rt *rapid.T) {
		s := storeFor(t, rt, newStore)
		var all []vectorstore.Record
		for range rapid.IntRange(0, 25).Draw(rt, "n") {
			all = append(all, genRecord(rt, "acme", rapid.SampledFrom(users).Draw(rt, "user"), true))
		}
		all = dedupeIDs(all)
		if len(all) > 0 {
			upsert(rt, s, all...)
		}
		f := partition("acme", "u1")
		limit := rapid.IntRange(1, 30).Draw(rt, "limit")
		mode := rapid.SampledFrom([]vectorstore.Mode{vectorstore.Dense, vectorstore.Sparse, vectorstore.Hybrid}).Draw(rt, "mode")
		text := genText(rt, "query")
		hits := search(rt, s, vectorstore.Query{Filter: f, Vector: vectorOf(text), Text: text, Mode: mode, Limit: limit})
		visible := count(rt, s, f)
		if len(hits) > limit {
			rt.Fatalf("%s search returned %d hits for limit %d", mode, len(hits), limit)
		}
		if mode == vectorstore.Dense && len(hits) != min(limit, visible) {
			rt.Fatalf("dense search returned %d hits, want min(%d, %d)", len(hits), limit, visible)
		}
		recs, _, err := s.Scroll(ctx, f, "", limit)
		if err != nil || len(recs) > limit {
			rt.Fatalf("Scroll: %d records for limit %d, %v", len(recs), limit, err)
		}
	})
}

func dedupeIDs(recs []vectorstore.Record) []vectorstore.Record {
	seen := map[string]bool{}
	return slices.DeleteFunc(recs, func(r vectorstore.Record) bool {
		dup := seen[r.ID]
		seen[r.ID] = true
		return dup
	})
}

// isolationModel is what the store must hold: records by id.
type isolationModel map[string]vectorstore.Record

func (m isolationModel) owned(id, tenant, user string) (vectorstore.Record, bool) {
	r, ok := m[id]
	return r, ok && r.Tenant == tenant && r.UserID == user
}

func visibleNow(r vectorstore.Record) bool {
	return r.ExpiresAt.IsZero() || r.ExpiresAt.After(time.Now())
}

// Property (tenant isolation): random operations across two tenants and two users,
// over a small pool of ids so that ids collide across partitions. No call ever
// returns, counts, updates or deletes another partition's record, and after every
// step each partition holds exactly what the model says.
func propertyTenantIsolation(t *testing.T, newStore func(t *testing.T) vectorstore.Store) {
	idPool := make([]string, 6)
	for i := range idPool {
		idPool[i] = vectorstore.DeterministicID("pool", fmt.Sprint(i))
	}
	rapid.Check(t, func(rt *rapid.T) {
		s := storeFor(t, rt, newStore)
		model := isolationModel{}
		part := func(t *rapid.T) (string, string) {
			return rapid.SampledFrom(tenants).Draw(t, "tenant"), rapid.SampledFrom(users).Draw(t, "user")
		}
		checkHits := func(t *rapid.T, tenant, user string, recs []vectorstore.Record) {
			for _, r := range recs {
				want, ok := model.owned(r.ID, tenant, user)
				if !ok || r.Tenant != tenant || r.UserID != user {
					t.Fatalf("call for %s/%s returned record %s of %s/%s", tenant, user, r.ID, r.Tenant, r.UserID)
				}
				if d := sameRecord(r, want); d != "" {
					t.Fatalf("record %s: %s", r.ID, d)
				}
			}
		}
		rt.Repeat(map[string]func(*rapid.T){
			"upsert": func(t *rapid.T) {
				tenant, user := part(t)
				r := genRecord(t, tenant, user, true)
				r.ID = rapid.SampledFrom(idPool).Draw(t, "id")
				err := s.Upsert(ctx, r)
				if old, exists := model[r.ID]; exists && (old.Tenant != tenant || old.UserID != user) {
					if !errors.Is(err, vectorstore.ErrConflict) {
						t.Fatalf("upsert of %s/%s's id by %s/%s: %v, want ErrConflict", old.Tenant, old.UserID, tenant, user, err)
					}
					return
				}
				if err != nil {
					t.Fatalf("Upsert: %v", err)
				}
				model[r.ID] = r
			},
			"get": func(t *rapid.T) {
				tenant, user := part(t)
				asked := rapid.SliceOfN(rapid.SampledFrom(idPool), 1, 6).Draw(t, "ids")
				got, err := s.Get(ctx, tenant, user, asked...)
				if err != nil {
					t.Fatalf("Get: %v", err)
				}
				checkHits(t, tenant, user, got)
				var want []string
				for _, id := range asked {
					if r, ok := model.owned(id, tenant, user); ok && visibleNow(r) && !slices.Contains(want, id) {
						want = append(want, id)
					}
				}
				if !slices.Equal(ids(got), want) {
					t.Fatalf("Get(%s/%s, %v) = %v, want %v", tenant, user, asked, ids(got), want)
				}
			},
			"search": func(t *rapid.T) {
				tenant, user := part(t)
				mode := rapid.SampledFrom([]vectorstore.Mode{vectorstore.Dense, vectorstore.Sparse, vectorstore.Hybrid}).Draw(t, "mode")
				text := genText(t, "query")
				hits := search(t, s, vectorstore.Query{Filter: partition(tenant, user), Vector: vectorOf(text), Text: text, Mode: mode, Limit: len(idPool)})
				recs := make([]vectorstore.Record, len(hits))
				for i, h := range hits {
					recs[i] = h.Record
				}
				checkHits(t, tenant, user, recs)
			},
			"scroll and count": func(t *rapid.T) {
				tenant, user := part(t)
				f := partition(tenant, user)
				f.IncludeExpired = rapid.Bool().Draw(t, "include expired")
				var want []string
				for id, r := range model {
					if r.Tenant == tenant && r.UserID == user && (f.IncludeExpired || visibleNow(r)) {
						want = append(want, id)
					}
				}
				got := scrollAll(t, s, f, rapid.IntRange(1, 4).Draw(t, "page"))
				checkHits(t, tenant, user, got)
				if !slices.Equal(ids(got), sorted(want)) {
					t.Fatalf("Scroll(%s/%s) = %v, want %v", tenant, user, ids(got), sorted(want))
				}
				if n := count(t, s, f); n != len(want) {
					t.Fatalf("Count(%s/%s) = %d, want %d", tenant, user, n, len(want))
				}
			},
			"update": func(t *rapid.T) {
				tenant, user := part(t)
				id := rapid.SampledFrom(idPool).Draw(t, "id")
				err := s.UpdatePayload(ctx, tenant, user, id, vectorstore.Patch{HitCountDelta: 1, Metadata: map[string]any{"touched": true}})
				r, ok := model.owned(id, tenant, user)
				if !ok || !visibleNow(r) {
					if !errors.Is(err, vectorstore.ErrNotFound) {
						t.Fatalf("update of %s by %s/%s: %v, want ErrNotFound", id, tenant, user, err)
					}
					return
				}
				if err != nil {
					t.Fatalf("UpdatePayload: %v", err)
				}
				r.HitCount++
				meta := jsonNormal(r.Metadata).(map[string]any)
				meta["touched"] = true
				r.Metadata = meta
				model[id] = r
			},
			"update batch": func(t *rapid.T) {
				tenant, user := part(t)
				asked := rapid.SliceOfNDistinct(rapid.SampledFrom(idPool), 1, 4, rapid.ID[string]).Draw(t, "ids")
				patches := make(map[string]vectorstore.Patch, len(asked))
				for _, id := range asked {
					patches[id] = vectorstore.Patch{HitCountDelta: rapid.IntRange(-2, 3).Draw(t, "delta"), Metadata: map[string]any{"batch": len(asked)}}
				}
				if rapid.IntRange(0, 4).Draw(t, "bad vector") == 0 {
					// One invalid patch fails the whole batch: nothing may change.
					p := patches[asked[0]]
					p.Vector = make([]float32, Dimensions-1)
					patches[asked[0]] = p
					if _, err := s.UpdatePayloads(ctx, tenant, user, patches); !errors.Is(err, vectorstore.ErrDimension) {
						t.Fatalf("batch with a short vector: %v, want ErrDimension", err)
					}
					return
				}
				missing, err := s.UpdatePayloads(ctx, tenant, user, patches)
				if err != nil {
					t.Fatalf("UpdatePayloads: %v", err)
				}
				var wantMissing []string
				for _, id := range asked {
					r, ok := model.owned(id, tenant, user)
					if !ok || !visibleNow(r) {
						wantMissing = append(wantMissing, id)
						continue
					}
					r.HitCount = max(0, r.HitCount+patches[id].HitCountDelta)
					meta, _ := jsonNormal(r.Metadata).(map[string]any)
					if meta == nil {
						meta = map[string]any{}
					}
					meta["batch"] = float64(len(asked))
					r.Metadata = meta
					model[id] = r
				}
				if !slices.Equal(missing, sorted(wantMissing)) {
					t.Fatalf("UpdatePayloads(%s/%s, %v): missing %v, want %v", tenant, user, asked, missing, sorted(wantMissing))
				}
			},
			"delete": func(t *rapid.T) {
				tenant, user := part(t)
				asked := rapid.SliceOfN(rapid.SampledFrom(idPool), 1, 4).Draw(t, "ids")
				n, err := s.Delete(ctx, tenant, user, asked...)
				if err != nil {
					t.Fatalf("Delete: %v", err)
				}
				want := 0
				for _, id := range asked {
					if _, ok := model.owned(id, tenant, user); ok {
						delete(model, id)
						want++
					}
				}
				if n != want {
					t.Fatalf("Delete(%s/%s, %v) = %d, want %d", tenant, user, asked, n, want)
				}
			},
			"delete by filter": func(t *rapid.T) {
				tenant, user := part(t)
				f := partition(tenant, user)
				f.MemoryTypes = []vectorstore.MemoryType{rapid.SampledFrom(memTypes).Draw(t, "type")}
				n, err := s.DeleteByFilter(ctx, f)
				if err != nil {
					t.Fatalf("DeleteByFilter: %v", err)
				}
				want := 0
				now := time.Now()
				for id, r := range model {
					if matches(f, r, now) {
						delete(model, id)
						want++
					}
				}
				if n != want {
					t.Fatalf("DeleteByFilter(%+v) = %d, want %d", f, n, want)
				}
			},
			"": func(t *rapid.T) {
				// Invariant: every partition holds exactly its model records, unchanged.
				for _, tenant := range tenants {
					for _, user := range users {
						f := partition(tenant, user)
						f.IncludeExpired = true
						got := scrollAll(t, s, f, 100)
						checkHits(t, tenant, user, got)
						want := 0
						for _, r := range model {
							if r.Tenant == tenant && r.UserID == user {
								want++
							}
						}
						if len(got) != want {
							t.Fatalf("%s/%s holds %d records, want %d", tenant, user, len(got), want)
						}
					}
				}
			},
		})
	})
}
