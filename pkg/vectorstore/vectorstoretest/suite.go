// Package vectorstoretest is the conformance suite every vectorstore.Store backend
// runs (in the manner of Watermill's pubsub/tests): one definition of the semantics,
// checked the same way against the embedded store and Qdrant.
package vectorstoretest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/agentmem/agentmem/pkg/bm25"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// RunSuite runs the conformance suite. newStore must return a new, empty store for
// Dimensions-long vectors; the suite closes it (Close must tolerate a second call
// from the caller's own cleanup).
func RunSuite(t *testing.T, newStore func(t *testing.T) vectorstore.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s vectorstore.Store)
	}{
		{"RoundTrip", testRoundTrip},
		{"UpsertReplaces", testUpsertReplaces},
		{"GetMissingAndOrder", testGetMissingAndOrder},
		{"SearchModes", testSearchModes},
		{"ExpansionAndTermDocs", testExpansionAndTermDocs},
		{"Filters", testFilters},
		{"Limit", testLimit},
		{"ScrollPagination", testScrollPagination},
		{"UpdatePayload", testUpdatePayload},
		{"UpdatePayloads", testUpdatePayloads},
		{"Delete", testDelete},
		{"Expiry", testExpiry},
		{"InvalidInput", testInvalidInput},
		{"ConflictAcrossPartitions", testConflict},
		{"Users", testUsers},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			defer s.Close()
			tc.fn(t, s)
		})
	}
	t.Run("PropertyFieldCompleteness", func(t *testing.T) { propertyFieldCompleteness(t, newStore) })
	t.Run("PropertyFiltering", func(t *testing.T) { propertyFiltering(t, newStore) })
	t.Run("PropertyLimits", func(t *testing.T) { propertyLimits(t, newStore) })
	t.Run("PropertyTenantIsolation", func(t *testing.T) { propertyTenantIsolation(t, newStore) })
}

var ctx = context.Background()

// tb is what the helpers need from *testing.T and *rapid.T alike.
type tb interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	Fatal(args ...any)
}

// rec is an episodic record of tenant/user with text, its vector and an id derived
// from all three.
func rec(tenant, user, text string) vectorstore.Record {
	return vectorstore.Record{
		ID: vectorstore.DeterministicID(tenant, user, text), Tenant: tenant, UserID: user,
		MemoryType: vectorstore.Episodic, Text: text, Vector: vectorOf(text), TS: base,
	}
}

func upsert(t tb, s vectorstore.Store, recs ...vectorstore.Record) {
	t.Helper()
	if err := s.Upsert(ctx, recs...); err != nil {
		t.Fatalf("Upsert: %v", err)
	}
}

func count(t tb, s vectorstore.Store, f vectorstore.Filter) int {
	t.Helper()
	n, err := s.Count(ctx, f)
	if err != nil {
		t.Fatalf("Count(%+v): %v", f, err)
	}
	return n
}

func search(t tb, s vectorstore.Store, q vectorstore.Query) []vectorstore.Hit {
	t.Helper()
	hits, err := s.Search(ctx, q)
	if err != nil {
		t.Fatalf("Search(%s %q): %v", q.Mode, q.Text, err)
	}
	return hits
}

// scrollAll pages through f with page size page and returns every record.
func scrollAll(t tb, s vectorstore.Store, f vectorstore.Filter, page int) []vectorstore.Record {
	t.Helper()
	var all []vectorstore.Record
	offset := ""
	for i := 0; ; i++ {
		recs, next, err := s.Scroll(ctx, f, offset, page)
		if err != nil {
			t.Fatalf("Scroll: %v", err)
		}
		if len(recs) > page {
			t.Fatalf("Scroll returned %d records for limit %d", len(recs), page)
		}
		all = append(all, recs...)
		if next == "" {
			return all
		}
		if i > 10000 {
			t.Fatal("Scroll never ends")
		}
		offset = next
	}
}

func ids(recs []vectorstore.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.ID
	}
	return out
}

func hitIDs(hits []vectorstore.Hit) []string {
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.Record.ID
	}
	return out
}

func sorted(ids []string) []string {
	out := slices.Clone(ids)
	sort.Strings(out)
	return out
}

func partition(tenant, user string) vectorstore.Filter {
	return vectorstore.Filter{Tenant: tenant, UserID: user}
}

func fullRecord() vectorstore.Record {
	r := rec("acme", "u1", "Sales files have columns date, product, qty, unit_price, amount")
	r.ID = strings.ToUpper(r.ID) // any UUID form in, canonical form out
	r.MemoryType = vectorstore.Semantic
	r.Scope, r.Kind, r.Key = "user", "fact", "sales_columns"
	r.TS = base.Add(1500 * time.Microsecond)
	r.ChatID, r.Who = "chat-7", "alice"
	r.HitCount, r.Confidence = 3, 0.875
	r.ExpiresAt = time.Now().Add(24 * time.Hour).Truncate(time.Microsecond)
	r.Metadata = map[string]any{
		"fact": "columns", "first_seen": "2026-11-22T10:00:00Z", "count": 5000, "ratio": 0.25, "big": 1e300,
		"ok": true, "none": nil, "updates": []any{"a", 1.5, map[string]any{"x": []any{}}},
		"nested": map[string]any{"deep": map[string]any{"list": []any{1, 2, 3}}, "unicode": "日本語 ✓"},
	}
	return r
}

func testRoundTrip(t *testing.T, s vectorstore.Store) {
	want := fullRecord()
	bare := rec("acme", "u1", "a record with nothing but the required fields")
	upsert(t, s, want, bare)
	got, err := s.Get(ctx, "acme", "u1", want.ID, bare.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("Get returned %d records, want 2", len(got))
	}
	for i, w := range []vectorstore.Record{want, bare} {
		if d := sameRecord(got[i], w); d != "" {
			t.Errorf("record %d: %s", i, d)
		}
	}
	if got[0].TS.Location() != time.UTC {
		t.Errorf("ts in %s, want UTC", got[0].TS.Location())
	}
	hits := search(t, s, vectorstore.Query{Filter: partition("acme", "u1"), Vector: want.Vector, Text: want.Text, Mode: vectorstore.Hybrid, Limit: 1})
	if len(hits) != 1 {
		t.Fatalf("search returned %d hits", len(hits))
	}
	if d := sameRecord(hits[0].Record, want); d != "" {
		t.Errorf("search hit: %s", d)
	}
	scrolled := scrollAll(t, s, partition("acme", "u1"), 10)
	for _, r := range scrolled {
		if r.ID == got[0].ID {
			if d := sameRecord(r, want); d != "" {
				t.Errorf("scrolled record: %s", d)
			}
		}
	}
}

func testUpsertReplaces(t *testing.T, s vectorstore.Store) {
	first := fullRecord()
	upsert(t, s, first)
	second := rec("acme", "u1", "a completely different text about charts")
	second.ID = first.ID
	second.Metadata = map[string]any{"only": "this"}
	upsert(t, s, second)
	got, err := s.Get(ctx, "acme", "u1", first.ID)
	if err != nil || len(got) != 1 {
		t.Fatalf("Get: %v, %d records", err, len(got))
	}
	if d := sameRecord(got[0], second); d != "" {
		t.Fatalf("after replacing: %s", d)
	}
	if n := count(t, s, partition("acme", "u1")); n != 1 {
		t.Fatalf("Count %d after upserting one id twice, want 1", n)
	}
	// The old text must be gone from the sparse side, the new one searchable.
	if hits := search(t, s, vectorstore.Query{Filter: partition("acme", "u1"), Text: "sales columns", Mode: vectorstore.Sparse, Limit: 5}); len(hits) != 0 {
		t.Errorf("old text still found: %v", hitIDs(hits))
	}
	if hits := search(t, s, vectorstore.Query{Filter: partition("acme", "u1"), Text: "charts", Mode: vectorstore.Sparse, Limit: 5}); len(hits) != 1 {
		t.Errorf("new text not found: %d hits", len(hits))
	}
	// A batch with the same id twice: the last one wins.
	a, b := rec("acme", "u1", "batch first"), rec("acme", "u1", "batch second")
	b.ID = a.ID
	upsert(t, s, a, b)
	got, _ = s.Get(ctx, "acme", "u1", a.ID)
	if len(got) != 1 || got[0].Text != "batch second" {
		t.Fatalf("batch with a repeated id: %+v", got)
	}
}

func testGetMissingAndOrder(t *testing.T, s vectorstore.Store) {
	a, b, c := rec("acme", "u1", "alpha"), rec("acme", "u1", "bravo"), rec("acme", "u1", "charlie")
	upsert(t, s, a, b, c)
	missing := vectorstore.DeterministicID("nobody")
	got, err := s.Get(ctx, "acme", "u1", c.ID, missing, a.ID, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{c.ID, a.ID}; !slices.Equal(ids(got), want) {
		t.Fatalf("Get = %v, want %v (asked order, missing absent, repeats once)", ids(got), want)
	}
	if got, err := s.Get(ctx, "acme", "u1"); err != nil || len(got) != 0 {
		t.Fatalf("Get with no ids: %v, %v", got, err)
	}
}

// searchCorpus is five records with distinct topics in one partition.
var searchCorpus = []string{
	"my sales files have columns date, product, qty and amount",
	"I prefer bar charts in dark blue with large fonts",
	"fixed KeyError in pandas by renaming the customer column",
	"I study at Peking University in Beijing",
	"weekly report is due every Friday afternoon",
}

func testSearchModes(t *testing.T, s vectorstore.Store) {
	var recs []vectorstore.Record
	for _, text := range searchCorpus {
		recs = append(recs, rec("acme", "u1", text))
	}
	upsert(t, s, recs...)
	upsert(t, s, rec("acme", "u2", "I study at Peking University too")) // another user's near-duplicate
	queries := []struct {
		text string
		want int
	}{
		{"which columns do my sales files have?", 0},
		{"what chart colours does the user like", 1},
		{"pandas KeyError on a renamed column", 2},
		{"I'm a student at Peking University", 3},
	}
	for _, q := range queries {
		for _, mode := range []vectorstore.Mode{vectorstore.Dense, vectorstore.Sparse, vectorstore.Hybrid} {
			hits := search(t, s, vectorstore.Query{Filter: partition("acme", "u1"), Vector: vectorOf(q.text), Text: q.text, Mode: mode, Limit: 3})
			if len(hits) == 0 || hits[0].Record.ID != recs[q.want].ID {
				t.Errorf("%s %q: top hit %v, want %q", mode, q.text, hitIDs(hits), searchCorpus[q.want])
				continue
			}
			for i, h := range hits {
				if h.Record.UserID != "u1" {
					t.Errorf("%s: hit from user %s", mode, h.Record.UserID)
				}
				if i > 0 && h.Score > hits[i-1].Score {
					t.Errorf("%s: scores not descending: %v then %v", mode, hits[i-1].Score, h.Score)
				}
				switch mode {
				case vectorstore.Dense:
					if h.Score < -1-1e-6 || h.Score > 1+1e-6 {
						t.Errorf("dense score %v outside [-1, 1]", h.Score)
					}
				case vectorstore.Sparse:
					if h.Score <= 0 {
						t.Errorf("sparse score %v, want > 0", h.Score)
					}
				case vectorstore.Hybrid:
					if h.Score <= 0 || h.Score > 2.0/61+1e-9 {
						t.Errorf("hybrid score %v outside (0, 2/61]", h.Score)
					}
				}
			}
		}
	}
	// Dense scores are cosine similarities: the record's own vector scores 1.
	hits := search(t, s, vectorstore.Query{Filter: partition("acme", "u1"), Vector: recs[4].Vector, Mode: vectorstore.Dense, Limit: 1})
	if len(hits) != 1 || hits[0].Score < 0.999 {
		t.Errorf("own vector: %+v, want score 1", hits)
	}
	// A sparse query without terms matches nothing; hybrid falls back to dense.
	if hits := search(t, s, vectorstore.Query{Filter: partition("acme", "u1"), Text: "the and of", Mode: vectorstore.Sparse, Limit: 3}); len(hits) != 0 {
		t.Errorf("stopword-only sparse query returned %d hits", len(hits))
	}
	hits = search(t, s, vectorstore.Query{Filter: partition("acme", "u1"), Vector: recs[2].Vector, Text: "", Mode: vectorstore.Hybrid, Limit: 2})
	if len(hits) != 2 || hits[0].Record.ID != recs[2].ID {
		t.Errorf("hybrid without text: %v", hitIDs(hits))
	}
	// FTS syntax in user text is just text.
	for _, text := range []string{`"unbalanced`, `sales AND NOT`, `col:umn* NEAR(a b)`, `^date OR -`} {
		if _, err := s.Search(ctx, vectorstore.Query{Filter: partition("acme", "u1"), Vector: recs[0].Vector, Text: text, Mode: vectorstore.Hybrid, Limit: 3}); err != nil {
			t.Errorf("query text %q: %v", text, err)
		}
	}
}

// An expansion term finds what the query's own words do not, counted at its
// weight (a hit by it alone scores below the same hit by the word itself), only
// in the query's partition; TermDocs counts a term's records per partition, or
// is nil where the backend keeps no counts.
func testExpansionAndTermDocs(t *testing.T, s vectorstore.Store) {
	guitar := rec("acme", "u1", "I play the guitar every evening")
	upsert(t, s, guitar, rec("acme", "u1", "I like bar charts with two decimals"), rec("acme", "u2", "my guitar is red"))
	term := bm25.Tokenize("guitar")[0]
	f := partition("acme", "u1")
	plain := search(t, s, vectorstore.Query{Filter: f, Text: "guitar", Mode: vectorstore.Sparse, Limit: 5})
	expanded := search(t, s, vectorstore.Query{Filter: f, Text: "instruments", Expansion: []vectorstore.WeightedTerm{{Term: term, Weight: 0.5}}, Mode: vectorstore.Sparse, Limit: 5})
	if len(plain) != 1 || len(expanded) != 1 || expanded[0].Record.ID != guitar.ID {
		t.Fatalf("guitar: plain %v, by expansion %v; want u1's guitar record alone in both", hitIDs(plain), hitIDs(expanded))
	}
	if !(expanded[0].Score > 0 && expanded[0].Score < plain[0].Score) {
		t.Errorf("score by an expansion term at weight 0.5 is %v, by the word itself %v; want it positive and lower", expanded[0].Score, plain[0].Score)
	}
	if _, err := s.Search(ctx, vectorstore.Query{Filter: f, Text: "x", Expansion: []vectorstore.WeightedTerm{{Term: term, Weight: 2}}, Mode: vectorstore.Sparse, Limit: 5}); !errors.Is(err, vectorstore.ErrInvalidQuery) {
		t.Errorf("expansion weight 2: %v, want ErrInvalidQuery", err)
	}
	counts, err := s.TermDocs(ctx, "acme", "u1", []string{term, bm25.Tokenize("charts")[0], "zzzunknown"})
	if err != nil {
		t.Fatal(err)
	}
	if counts != nil && !slices.Equal(counts, []int{1, 1, 0}) {
		t.Errorf("TermDocs of u1 = %v, want [1 1 0] (or nil)", counts)
	}
}

// filterFixture is a partition with records varied along every filterable field,
// plus records of other partitions that no filter may select.
func filterFixture() []vectorstore.Record {
	var recs []vectorstore.Record
	types := []vectorstore.MemoryType{vectorstore.Episodic, vectorstore.Semantic, vectorstore.Item}
	for i := range 12 {
		r := rec("acme", "u1", fmt.Sprintf("note %d about sales columns and charts", i))
		r.MemoryType = types[i%3]
		r.TS = base.Add(time.Duration(i) * time.Hour)
		r.ChatID = fmt.Sprintf("chat-%d", i%2)
		r.Who = []string{"alice", "bob", "carol"}[i%3]
		r.Scope, r.Kind, r.Key = []string{"user", "session"}[i%2], []string{"fact", "preference"}[i/6], fmt.Sprintf("k%d", i%4)
		r.Metadata = map[string]any{"source": []string{"chat", "tool"}[i%2], "n": i % 3, "pinned": i%4 == 0, "nested": map[string]any{"n": 1}}
		if i == 11 {
			r.Metadata["n"] = "2" // a string that looks like a number matches no integer
		}
		recs = append(recs, r)
	}
	for _, p := range [][2]string{{"acme", "u2"}, {"other", "u1"}} {
		r := rec(p[0], p[1], "note about sales columns and charts")
		r.Metadata = map[string]any{"source": "chat", "n": 0, "pinned": true}
		recs = append(recs, r)
	}
	return recs
}

// filterCases are filters on partition acme/u1 covering every field.
func filterCases() map[string]vectorstore.Filter {
	p := partition("acme", "u1")
	with := func(fn func(f *vectorstore.Filter)) vectorstore.Filter { f := p; fn(&f); return f }
	return map[string]vectorstore.Filter{
		"partition": p,
		"memory types": with(func(f *vectorstore.Filter) {
			f.MemoryTypes = []vectorstore.MemoryType{vectorstore.Semantic, vectorstore.Item}
		}),
		"since":         with(func(f *vectorstore.Filter) { f.Since = base.Add(5 * time.Hour) }),
		"until":         with(func(f *vectorstore.Filter) { f.Until = base.Add(5 * time.Hour) }),
		"time range":    with(func(f *vectorstore.Filter) { f.Since, f.Until = base.Add(2*time.Hour), base.Add(7*time.Hour) }),
		"chat id":       with(func(f *vectorstore.Filter) { f.ChatID = "chat-1" }),
		"who":           with(func(f *vectorstore.Filter) { f.Who = "bob" }),
		"scope":         with(func(f *vectorstore.Filter) { f.Scope = "session" }),
		"kind":          with(func(f *vectorstore.Filter) { f.Kind = "preference" }),
		"key":           with(func(f *vectorstore.Filter) { f.Key = "k2" }),
		"payload str":   with(func(f *vectorstore.Filter) { f.Payload = map[string]any{"source": "tool"} }),
		"payload int":   with(func(f *vectorstore.Filter) { f.Payload = map[string]any{"n": 2} }),
		"payload float": with(func(f *vectorstore.Filter) { f.Payload = map[string]any{"n": 1.0} }),
		"payload bool":  with(func(f *vectorstore.Filter) { f.Payload = map[string]any{"pinned": true} }),
		"payload none":  with(func(f *vectorstore.Filter) { f.Payload = map[string]any{"absent": "x"} }),
		"payload two":   with(func(f *vectorstore.Filter) { f.Payload = map[string]any{"source": "chat", "pinned": true} }),
		"ids": with(func(f *vectorstore.Filter) {
			f.IDs = []string{vectorstore.DeterministicID("acme", "u1", "note 3 about sales columns and charts")}
		}),
		"combined": with(func(f *vectorstore.Filter) {
			f.MemoryTypes, f.ChatID, f.Since = []vectorstore.MemoryType{vectorstore.Episodic}, "chat-0", base.Add(time.Hour)
		}),
	}
}

// checkFilter compares Count, Scroll and every search mode under f with the model.
func checkFilter(t tb, s vectorstore.Store, name string, f vectorstore.Filter, all []vectorstore.Record) {
	t.Helper()
	var want []string
	now := time.Now()
	for _, r := range all {
		if matches(f, r, now) {
			want = append(want, r.ID)
		}
	}
	want = sorted(want)
	if n := count(t, s, f); n != len(want) {
		t.Errorf("%s: Count = %d, want %d", name, n, len(want))
	}
	if got := ids(scrollAll(t, s, f, 5)); !slices.Equal(got, want) {
		t.Errorf("%s: Scroll = %v, want %v", name, got, want)
	}
	limit := len(all) + 1
	for _, mode := range []vectorstore.Mode{vectorstore.Dense, vectorstore.Sparse, vectorstore.Hybrid} {
		hits := search(t, s, vectorstore.Query{Filter: f, Vector: vectorOf("sales columns"), Text: "note sales columns charts", Mode: mode, Limit: limit})
		if got := sorted(hitIDs(hits)); !slices.Equal(got, want) {
			t.Errorf("%s: %s search = %v, want %v", name, mode, got, want)
		}
	}
}

func testFilters(t *testing.T, s vectorstore.Store) {
	all := filterFixture()
	upsert(t, s, all...)
	for name, f := range filterCases() {
		checkFilter(t, s, name, f, all)
	}
}

func testLimit(t *testing.T, s vectorstore.Store) {
	all := filterFixture()
	upsert(t, s, all...)
	for _, limit := range []int{1, 2, 5, 11, 12, 100} {
		for _, mode := range []vectorstore.Mode{vectorstore.Dense, vectorstore.Sparse, vectorstore.Hybrid} {
			hits := search(t, s, vectorstore.Query{Filter: partition("acme", "u1"), Vector: vectorOf("sales"), Text: "sales", Mode: mode, Limit: limit})
			if want := min(limit, 12); len(hits) != want {
				t.Errorf("%s limit %d: %d hits, want %d", mode, limit, len(hits), want)
			}
		}
	}
}

func testScrollPagination(t *testing.T, s vectorstore.Store) {
	var all []vectorstore.Record
	for i := range 23 {
		all = append(all, rec("acme", "u1", fmt.Sprintf("record number %d", i)))
	}
	upsert(t, s, append(all, rec("acme", "u2", "another user's record"))...)
	want := sorted(ids(all))
	for _, page := range []int{1, 4, 7, 23, 50} {
		got := ids(scrollAll(t, s, partition("acme", "u1"), page))
		if !slices.Equal(got, want) {
			t.Errorf("page size %d: scrolled %v, want every record once in id order %v", page, got, want)
		}
	}
	if _, _, err := s.Scroll(ctx, partition("acme", "u1"), "", 0); err == nil {
		t.Error("Scroll with limit 0 succeeded")
	}
	if _, _, err := s.Scroll(ctx, partition("acme", "u1"), "not-a-uuid", 5); !errors.Is(err, vectorstore.ErrInvalidFilter) {
		t.Errorf("Scroll with a malformed offset: %v, want ErrInvalidFilter", err)
	}
}

func testUpdatePayload(t *testing.T, s vectorstore.Store) {
	r := fullRecord()
	upsert(t, s, r)
	id := r.ID
	get := func() vectorstore.Record {
		t.Helper()
		got, err := s.Get(ctx, "acme", "u1", id)
		if err != nil || len(got) != 1 {
			t.Fatalf("Get: %v, %d records", err, len(got))
		}
		return got[0]
	}
	update := func(p vectorstore.Patch) {
		t.Helper()
		if err := s.UpdatePayload(ctx, "acme", "u1", id, p); err != nil {
			t.Fatalf("UpdatePayload: %v", err)
		}
	}
	update(vectorstore.Patch{HitCountDelta: 1})
	update(vectorstore.Patch{HitCountDelta: 1})
	want := r
	want.HitCount = 5
	if d := sameRecord(get(), want); d != "" {
		t.Fatalf("after two hits: %s", d)
	}
	update(vectorstore.Patch{Metadata: map[string]any{"fact": "new fact", "updates": []any{"one", "two"}, "added": map[string]any{"k": 1}}})
	want.Metadata = jsonNormal(r.Metadata).(map[string]any)
	want.Metadata["fact"], want.Metadata["updates"], want.Metadata["added"] = "new fact", []any{"one", "two"}, map[string]any{"k": 1.0}
	if d := sameRecord(get(), want); d != "" {
		t.Fatalf("after metadata merge: %s", d)
	}
	text := "Now about weekly Friday reports"
	conf, never := 0.5, time.Time{}
	update(vectorstore.Patch{Text: &text, Vector: vectorOf(text), Confidence: &conf, ExpiresAt: &never, HitCountDelta: -100})
	want.Text, want.Vector, want.Confidence, want.ExpiresAt, want.HitCount = text, vectorOf(text), conf, never, 0
	if d := sameRecord(get(), want); d != "" {
		t.Fatalf("after text/vector/confidence/expiry/hit-count floor: %s", d)
	}
	hits := search(t, s, vectorstore.Query{Filter: partition("acme", "u1"), Text: "weekly friday report", Vector: vectorOf("weekly friday report"), Mode: vectorstore.Hybrid, Limit: 1})
	if len(hits) != 1 || hits[0].Record.ID != get().ID {
		t.Fatalf("the new text is not searchable: %v", hitIDs(hits))
	}
	if hits := search(t, s, vectorstore.Query{Filter: partition("acme", "u1"), Text: "sales columns", Mode: vectorstore.Sparse, Limit: 1}); len(hits) != 0 {
		t.Fatal("the old text is still searchable")
	}
	for name, call := range map[string]func() error{
		"missing id": func() error {
			return s.UpdatePayload(ctx, "acme", "u1", vectorstore.DeterministicID("x"), vectorstore.Patch{HitCountDelta: 1})
		},
		"other user":     func() error { return s.UpdatePayload(ctx, "acme", "u2", id, vectorstore.Patch{HitCountDelta: 1}) },
		"other tenant":   func() error { return s.UpdatePayload(ctx, "other", "u1", id, vectorstore.Patch{HitCountDelta: 1}) },
		"expired record": func() error { return expireAndUpdate(s, id) },
		"after deleting": func() error {
			if _, err := s.Delete(ctx, "acme", "u1", id); err != nil {
				return err
			}
			return s.UpdatePayload(ctx, "acme", "u1", id, vectorstore.Patch{})
		},
	} {
		if err := call(); !errors.Is(err, vectorstore.ErrNotFound) {
			t.Errorf("%s: %v, want ErrNotFound", name, err)
		}
	}
	other := rec("acme", "u1", "dimension check")
	upsert(t, s, other)
	if err := s.UpdatePayload(ctx, "acme", "u1", other.ID, vectorstore.Patch{Vector: make([]float32, Dimensions+1)}); !errors.Is(err, vectorstore.ErrDimension) {
		t.Errorf("patch with a wrong-length vector: %v, want ErrDimension", err)
	}
}

func testUpdatePayloads(t *testing.T, s vectorstore.Store) {
	hit, rewritten, untouched := rec("acme", "u1", "hit twice"), rec("acme", "u1", "rewritten text"), rec("acme", "u1", "left alone")
	expired := rec("acme", "u1", "expired before the batch")
	expired.ExpiresAt = time.Now().Add(-time.Hour)
	theirs := rec("acme", "u2", "another user's record")
	upsert(t, s, hit, rewritten, untouched, expired, theirs)
	get := func(tenant, user, id string) vectorstore.Record {
		t.Helper()
		got, err := s.Get(ctx, tenant, user, id)
		if err != nil || len(got) != 1 {
			t.Fatalf("Get %s: %v, %d records", id, err, len(got))
		}
		return got[0]
	}
	if missing, err := s.UpdatePayloads(ctx, "acme", "u1", nil); err != nil || missing != nil {
		t.Fatalf("empty batch: missing %v, %v", missing, err)
	}

	absent := vectorstore.DeterministicID("never stored")
	text, conf := "a new text for the batch", 0.25
	missing, err := s.UpdatePayloads(ctx, "acme", "u1", map[string]vectorstore.Patch{
		strings.ToUpper(hit.ID): {HitCountDelta: 2, Metadata: map[string]any{"hit_events": []any{"e1", "e2"}}},
		rewritten.ID:            {Text: &text, Vector: vectorOf(text), Confidence: &conf},
		expired.ID:              {HitCountDelta: 1},
		theirs.ID:               {HitCountDelta: 1},
		absent:                  {HitCountDelta: 1},
	})
	if err != nil {
		t.Fatalf("UpdatePayloads: %v", err)
	}
	if want := sorted([]string{expired.ID, theirs.ID, absent}); !slices.Equal(missing, want) {
		t.Errorf("missing %v, want the expired, the other user's and the absent id, sorted: %v", missing, want)
	}
	wantHit := hit
	wantHit.HitCount, wantHit.Metadata = 2, map[string]any{"hit_events": []any{"e1", "e2"}}
	wantRewritten := rewritten
	wantRewritten.Text, wantRewritten.Vector, wantRewritten.Confidence = text, vectorOf(text), conf
	for _, c := range []struct {
		name string
		got  vectorstore.Record
		want vectorstore.Record
	}{
		{"hit", get("acme", "u1", hit.ID), wantHit},
		{"rewritten", get("acme", "u1", rewritten.ID), wantRewritten},
		{"untouched", get("acme", "u1", untouched.ID), untouched},
		{"other user's", get("acme", "u2", theirs.ID), theirs},
	} {
		if d := sameRecord(c.got, c.want); d != "" {
			t.Errorf("%s record: %s", c.name, d)
		}
	}
	f := partition("acme", "u1")
	f.ExpiredOnly = true
	if got := scrollAll(t, s, f, 10); len(got) != 1 || sameRecord(got[0], expired) != "" {
		t.Errorf("the expired record changed or vanished: %v", got)
	}
	hits := search(t, s, vectorstore.Query{Filter: partition("acme", "u1"), Text: "batch", Mode: vectorstore.Sparse, Limit: 5})
	if !slices.Equal(hitIDs(hits), []string{rewritten.ID}) {
		t.Errorf("a sparse search for the new text found %v, want %s", hitIDs(hits), rewritten.ID)
	}

	// One bad patch fails the whole batch before anything is written.
	for name, bad := range map[string]struct {
		patch vectorstore.Patch
		want  error
	}{
		"a wrong-length vector":        {vectorstore.Patch{Vector: make([]float32, Dimensions+1)}, vectorstore.ErrDimension},
		"a confidence of NaN":          {vectorstore.Patch{Confidence: new(math.NaN())}, vectorstore.ErrInvalidRecord},
		"an infinite vector component": {vectorstore.Patch{Vector: append(make([]float32, Dimensions-1), float32(math.Inf(1)))}, vectorstore.ErrInvalidRecord},
	} {
		_, err := s.UpdatePayloads(ctx, "acme", "u1", map[string]vectorstore.Patch{hit.ID: {HitCountDelta: 5}, untouched.ID: bad.patch})
		if !errors.Is(err, bad.want) {
			t.Errorf("batch with %s: %v, want %v", name, err, bad.want)
		}
		for _, w := range []vectorstore.Record{wantHit, untouched} {
			if d := sameRecord(get("acme", "u1", w.ID), w); d != "" {
				t.Errorf("batch with %s changed %s: %s", name, w.ID, d)
			}
		}
	}
}

// expireAndUpdate expires id, then updates it: the update must not find it.
func expireAndUpdate(s vectorstore.Store, id string) error {
	past := time.Now().Add(-time.Hour)
	if err := s.UpdatePayload(ctx, "acme", "u1", id, vectorstore.Patch{ExpiresAt: &past}); err != nil {
		return fmt.Errorf("expiring: %w", err)
	}
	return s.UpdatePayload(ctx, "acme", "u1", id, vectorstore.Patch{HitCountDelta: 1})
}

func testDelete(t *testing.T, s vectorstore.Store) {
	all := filterFixture()
	upsert(t, s, all...)
	u1 := all[:12]
	n, err := s.Delete(ctx, "acme", "u1", u1[0].ID, u1[1].ID, vectorstore.DeterministicID("missing"), u1[0].ID)
	if err != nil || n != 2 {
		t.Fatalf("Delete = %d, %v; want 2", n, err)
	}
	if got, _ := s.Get(ctx, "acme", "u1", u1[0].ID, u1[1].ID); len(got) != 0 {
		t.Fatalf("deleted records still there: %v", ids(got))
	}
	// Another partition's id is not deleted through this one.
	if n, err := s.Delete(ctx, "acme", "u1", all[12].ID); err != nil || n != 0 {
		t.Fatalf("Delete of acme/u2's record via acme/u1 = %d, %v", n, err)
	}
	f := partition("acme", "u1")
	f.Who = "carol"
	want := count(t, s, f)
	if n, err := s.DeleteByFilter(ctx, f); err != nil || n != want || n == 0 {
		t.Fatalf("DeleteByFilter = %d, %v; Count said %d", n, err, want)
	}
	if c := count(t, s, f); c != 0 {
		t.Fatalf("%d records remain after DeleteByFilter", c)
	}
	// Reset of a user (SPEC C2): everything of that user goes, nobody else's.
	left := count(t, s, partition("acme", "u1"))
	if n, err := s.DeleteByFilter(ctx, partition("acme", "u1")); err != nil || n != left {
		t.Fatalf("reset = %d, %v; want %d", n, err, left)
	}
	if c := count(t, s, partition("acme", "u1")); c != 0 {
		t.Fatalf("%d records remain after reset", c)
	}
	if c := count(t, s, partition("acme", "u2")) + count(t, s, partition("other", "u1")); c != 2 {
		t.Fatalf("other partitions hold %d records after the reset, want 2", c)
	}
	if hits := search(t, s, vectorstore.Query{Filter: partition("acme", "u1"), Vector: vectorOf("sales"), Text: "sales", Mode: vectorstore.Hybrid, Limit: 10}); len(hits) != 0 {
		t.Fatalf("search after reset returned %d hits", len(hits))
	}
}

func testExpiry(t *testing.T, s vectorstore.Store) {
	live, expired, future := rec("acme", "u1", "live sales memory"), rec("acme", "u1", "expired sales memory"), rec("acme", "u1", "future sales memory")
	expired.ExpiresAt = time.Now().Add(-time.Minute)
	future.ExpiresAt = time.Now().Add(time.Hour)
	upsert(t, s, live, expired, future)
	p := partition("acme", "u1")
	visible := sorted([]string{live.ID, future.ID})

	if got, _ := s.Get(ctx, "acme", "u1", live.ID, expired.ID, future.ID); !slices.Equal(sorted(ids(got)), visible) {
		t.Errorf("Get returned %v, want the unexpired %v", ids(got), visible)
	}
	if n := count(t, s, p); n != 2 {
		t.Errorf("Count = %d, want 2", n)
	}
	if got := ids(scrollAll(t, s, p, 10)); !slices.Equal(got, visible) {
		t.Errorf("Scroll = %v, want %v", got, visible)
	}
	for _, mode := range []vectorstore.Mode{vectorstore.Dense, vectorstore.Sparse, vectorstore.Hybrid} {
		hits := search(t, s, vectorstore.Query{Filter: p, Vector: expired.Vector, Text: "expired sales memory", Mode: mode, Limit: 10})
		if got := sorted(hitIDs(hits)); !slices.Equal(got, visible) {
			t.Errorf("%s search = %v, want %v", mode, got, visible)
		}
	}
	withExpired := p
	withExpired.IncludeExpired = true
	if n := count(t, s, withExpired); n != 3 {
		t.Errorf("Count with IncludeExpired = %d, want 3", n)
	}
	hits := search(t, s, vectorstore.Query{Filter: withExpired, Vector: expired.Vector, Text: "expired", Mode: vectorstore.Hybrid, Limit: 1})
	if len(hits) != 1 || hits[0].Record.ID != expired.ID {
		t.Errorf("search with IncludeExpired: %v, want the expired record first", hitIDs(hits))
	}
	onlyExpired := p
	onlyExpired.ExpiredOnly = true
	if got := ids(scrollAll(t, s, onlyExpired, 10)); !slices.Equal(got, []string{expired.ID}) {
		t.Errorf("ExpiredOnly scroll = %v, want [%s]", got, expired.ID)
	}
	// A TTL sweep removes exactly the expired record.
	if n, err := s.DeleteByFilter(ctx, onlyExpired); err != nil || n != 1 {
		t.Fatalf("sweep = %d, %v; want 1", n, err)
	}
	if n := count(t, s, withExpired); n != 2 {
		t.Errorf("after the sweep %d records remain, want 2", n)
	}
}

func testInvalidInput(t *testing.T, s vectorstore.Store) {
	good := rec("acme", "u1", "valid")
	upsert(t, s, good)
	q := vectorstore.Query{Vector: good.Vector, Text: "valid", Mode: vectorstore.Hybrid, Limit: 5}
	for _, scope := range [][2]string{{"", "u1"}, {"acme", ""}, {"", ""}, {"ac.me", "u1"}, {"acme", "u>"}} {
		tenant, user := scope[0], scope[1]
		f := partition(tenant, user)
		q.Filter = f
		r := good
		r.Tenant, r.UserID = tenant, user
		_, _, scrollErr := s.Scroll(ctx, f, "", 5)
		calls := map[string]error{
			"Upsert":         s.Upsert(ctx, r),
			"Get":            second(s.Get(ctx, tenant, user, good.ID)),
			"Search":         second(s.Search(ctx, q)),
			"Scroll":         scrollErr,
			"UpdatePayload":  s.UpdatePayload(ctx, tenant, user, good.ID, vectorstore.Patch{HitCountDelta: 1}),
			"UpdatePayloads": second(s.UpdatePayloads(ctx, tenant, user, map[string]vectorstore.Patch{good.ID: {HitCountDelta: 1}})),
			"Delete":         second(s.Delete(ctx, tenant, user, good.ID)),
			"DeleteByFilter": second(s.DeleteByFilter(ctx, f)),
			"Count":          second(s.Count(ctx, f)),
		}
		for name, err := range calls {
			if !errors.Is(err, vectorstore.ErrInvalidFilter) {
				t.Errorf("%s with tenant %q user %q: %v, want ErrInvalidFilter", name, tenant, user, err)
			}
		}
	}
	p := partition("acme", "u1")
	bad := func(name string, err, want error) {
		t.Helper()
		if !errors.Is(err, want) {
			t.Errorf("%s: %v, want %v", name, err, want)
		}
	}
	badID := good
	badID.ID = "not-a-uuid"
	bad("upsert of a malformed id", s.Upsert(ctx, badID), vectorstore.ErrInvalidFilter)
	bad("get of a malformed id", second(s.Get(ctx, "acme", "u1", "x")), vectorstore.ErrInvalidFilter)
	bad("delete of a malformed id", second(s.Delete(ctx, "acme", "u1", "x")), vectorstore.ErrInvalidFilter)
	bad("batch update of a malformed id", second(s.UpdatePayloads(ctx, "acme", "u1", map[string]vectorstore.Patch{good.ID: {HitCountDelta: 1}, "x": {}})), vectorstore.ErrInvalidFilter)
	bad("batch update naming one record twice", second(s.UpdatePayloads(ctx, "acme", "u1",
		map[string]vectorstore.Patch{good.ID: {HitCountDelta: 1}, strings.ToUpper(good.ID): {HitCountDelta: 1}})), vectorstore.ErrInvalidFilter)
	shortVec := good
	shortVec.Vector = good.Vector[:Dimensions-1]
	bad("upsert of a short vector", s.Upsert(ctx, shortVec), vectorstore.ErrDimension)
	noType := good
	noType.MemoryType = "procedural"
	bad("upsert of an unknown memory type", s.Upsert(ctx, noType), vectorstore.ErrInvalidRecord)
	bad("search with a short vector", second(s.Search(ctx, vectorstore.Query{Filter: p, Vector: []float32{1}, Mode: vectorstore.Dense, Limit: 1})), vectorstore.ErrDimension)
	bad("search without a vector", second(s.Search(ctx, vectorstore.Query{Filter: p, Text: "x", Mode: vectorstore.Hybrid, Limit: 1})), vectorstore.ErrInvalidQuery)
	bad("search without a mode", second(s.Search(ctx, vectorstore.Query{Filter: p, Vector: good.Vector, Limit: 1})), vectorstore.ErrInvalidQuery)
	bad("search with limit 0", second(s.Search(ctx, vectorstore.Query{Filter: p, Vector: good.Vector, Mode: vectorstore.Dense})), vectorstore.ErrInvalidQuery)
	withFloat := p
	withFloat.Payload = map[string]any{"ratio": 0.25}
	bad("payload float", second(s.Count(ctx, withFloat)), vectorstore.ErrInvalidFilter)
	withKey := p
	withKey.Payload = map[string]any{`a"b`: "x"}
	bad("payload key with a quote", second(s.Count(ctx, withKey)), vectorstore.ErrInvalidFilter)
	withType := p
	withType.MemoryTypes = []vectorstore.MemoryType{"procedural"}
	bad("unknown memory type in a filter", second(s.Count(ctx, withType)), vectorstore.ErrInvalidFilter)
	// Nothing above changed the stored record.
	got, err := s.Get(ctx, "acme", "u1", good.ID)
	if err != nil || len(got) != 1 || sameRecord(got[0], good) != "" {
		t.Fatalf("the valid record changed: %+v, %v", got, err)
	}
	if n := count(t, s, p); n != 1 {
		t.Fatalf("Count %d, want 1", n)
	}
}

func second[T any](_ T, err error) error { return err }

func testConflict(t *testing.T, s vectorstore.Store) {
	mine := rec("acme", "u1", "my private memory")
	upsert(t, s, mine)
	for _, scope := range [][2]string{{"acme", "u2"}, {"evil", "u1"}} {
		theirs := rec(scope[0], scope[1], "overwrite attempt")
		theirs.ID = mine.ID
		if err := s.Upsert(ctx, theirs); !errors.Is(err, vectorstore.ErrConflict) {
			t.Errorf("upsert of acme/u1's id by %s/%s: %v, want ErrConflict", scope[0], scope[1], err)
		}
		if n := count(t, s, partition(scope[0], scope[1])); n != 0 {
			t.Errorf("%s/%s holds %d records after the refused upsert", scope[0], scope[1], n)
		}
	}
	// A batch with a conflicting record, stored or given twice in the batch, fails
	// before its other records are written, and never touches the owner's record.
	fresh := rec("acme", "u1", "a new record batched with a conflict")
	theirs := rec("acme", "u2", "overwrite attempt in a batch")
	theirs.ID = mine.ID
	twice, twiceTheirs := rec("acme", "u1", "one id for two partitions"), rec("acme", "u2", "one id for two partitions")
	twiceTheirs.ID = twice.ID
	for name, batch := range map[string][]vectorstore.Record{
		"a stored id":                   {fresh, theirs},
		"one new id for two partitions": {fresh, twice, twiceTheirs},
	} {
		if err := s.Upsert(ctx, batch...); !errors.Is(err, vectorstore.ErrConflict) {
			t.Errorf("batch with %s: %v, want ErrConflict", name, err)
		}
		if got, err := s.Get(ctx, "acme", "u1", fresh.ID, twice.ID); err != nil || len(got) != 0 {
			t.Errorf("batch with %s stored %d of its records (%v), want none", name, len(got), err)
		}
	}
	got, err := s.Get(ctx, "acme", "u1", mine.ID)
	if err != nil || len(got) != 1 {
		t.Fatalf("Get: %v, %d", err, len(got))
	}
	if d := sameRecord(got[0], mine); d != "" {
		t.Fatalf("the owner's record changed: %s", d)
	}
}

// testUsers: the users of a tenant are those with records, expired ones
// included, sorted; another tenant's users are not among them.
func testUsers(t *testing.T, s vectorstore.Store) {
	if users, err := s.Users(ctx, "acme"); err != nil || len(users) != 0 {
		t.Fatalf("Users of an empty store = %v, %v", users, err)
	}
	expired := rec("acme", "u0", "gone")
	expired.ExpiresAt = base.Add(-time.Hour)
	upsert(t, s, rec("acme", "u2", "b"), rec("acme", "u1", "a"), rec("acme", "u1", "c"), rec("other", "u9", "d"), expired)
	users, err := s.Users(ctx, "acme")
	if err != nil || !slices.Equal(users, []string{"u0", "u1", "u2"}) {
		t.Fatalf("Users(acme) = %v, %v", users, err)
	}
	if _, err := s.DeleteByFilter(ctx, vectorstore.Filter{Tenant: "acme", UserID: "u2"}); err != nil {
		t.Fatal(err)
	}
	if users, err := s.Users(ctx, "acme"); err != nil || !slices.Equal(users, []string{"u0", "u1"}) {
		t.Fatalf("Users(acme) after deleting u2 = %v, %v", users, err)
	}
	if _, err := s.Users(ctx, "no.dots"); !errors.Is(err, vectorstore.ErrInvalidFilter) {
		t.Fatalf("Users of an invalid tenant: %v", err)
	}
}
