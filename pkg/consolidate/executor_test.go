package consolidate

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	"pgregory.net/rapid"

	"github.com/agentmem/agentmem/pkg/embed"
	"github.com/agentmem/agentmem/pkg/llm"
	"github.com/agentmem/agentmem/pkg/llm/llmtest"
	"github.com/agentmem/agentmem/pkg/processor"
	"github.com/agentmem/agentmem/pkg/records"
	"github.com/agentmem/agentmem/pkg/vectorstore"
	"github.com/agentmem/agentmem/pkg/vectorstore/embedded"
)

const (
	tenant = "acme"
	user   = "u1"
)

// newStore opens a real embedded vector store in memory.
func newStore(t interface {
	Fatal(...any)
	Cleanup(func())
}) vectorstore.Store {
	s, err := embedded.New(embedded.Config{Path: embedded.MemoryPath, Dimensions: testDims}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func newExecutor(t interface {
	Fatal(...any)
	Cleanup(func())
}, store vectorstore.Store) *Executor {
	emb, err := embed.NewLocal(embed.LocalConfig{Dimensions: testDims})
	if err != nil {
		t.Fatal(err)
	}
	e, err := NewExecutor(ExecutorConfig{Now: func() time.Time { return t0.Add(30 * 24 * time.Hour) }}, store, emb, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// stored gives generated records the partition and C1 metadata a stored episode has.
func stored(recs []vectorstore.Record) []vectorstore.Record {
	out := make([]vectorstore.Record, len(recs))
	for i, r := range recs {
		r.Tenant, r.UserID = tenant, user
		r.Metadata = records.EpisodeMetadata(records.Episode{Thing: r.Text, Who: r.Who, Time: r.TS, Context: "test"}, r.ChatID)
		out[i] = r
	}
	return out
}

func allEpisodes(t interface{ Fatal(...any) }, s vectorstore.Store) map[string]vectorstore.Record {
	recs, _, err := s.Scroll(context.Background(), vectorstore.Filter{Tenant: tenant, UserID: user}, "", 1000)
	if err != nil {
		t.Fatal(err)
	}
	m := make(map[string]vectorstore.Record, len(recs))
	for _, r := range recs {
		m[r.ID] = r
	}
	return m
}

func countMerges(plan []Action) int {
	n := 0
	for _, a := range plan {
		if a.Kind == ActionMerge {
			n++
		}
	}
	return n
}

func TestConsolidateMergeCountLeavesNMinusMAndMergedRecordsKeepEarliestTimeAndSources(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		recs := stored(episodesGen(rt))
		store := newStore(t)
		if len(recs) > 0 {
			if err := store.Upsert(context.Background(), recs...); err != nil {
				rt.Fatal(err)
			}
		}
		plan := Plan(recs, DefaultThresholds())
		m := countMerges(plan)

		res, err := newExecutor(t, store).Consolidate(context.Background(), tenant, user)
		if err != nil {
			rt.Fatal(err)
		}
		if res.Merged != m || res.Separated != len(plan)-m || res.Cleaned != 0 {
			rt.Fatalf("result %+v, plan has %d merges of %d actions", res, m, len(plan))
		}
		after := allEpisodes(rt, store)
		if len(after) != len(recs)-m {
			rt.Fatalf("%d records after %d merges of %d, want %d", len(after), m, len(recs), len(recs)-m)
		}
		for _, act := range plan {
			if act.Kind != ActionMerge {
				continue
			}
			merged, ok := after[vectorstore.DeterministicID("merge", act.A.ID, act.B.ID)]
			if !ok {
				rt.Fatalf("merged record of %s and %s missing", act.A.ID, act.B.ID)
			}
			if _, ok := after[act.A.ID]; ok {
				rt.Fatalf("original %s still stored", act.A.ID)
			}
			earliest := act.A.TS
			if act.B.TS.Before(earliest) {
				earliest = act.B.TS
			}
			if !merged.TS.Equal(earliest) || merged.Metadata[records.MetaTime] != records.FormatTime(earliest) {
				rt.Fatalf("merged time %v (metadata %v), want the earliest %v", merged.TS, merged.Metadata[records.MetaTime], earliest)
			}
			sources, ids := records.StringList(merged.Metadata[records.MetaSourceChatIDs]), records.StringList(merged.Metadata[records.MetaMergedFromIDs])
			if !slices.Contains(sources, act.A.ChatID) || !slices.Contains(sources, act.B.ChatID) {
				rt.Fatalf("source_chat_ids %v lacks %q or %q", sources, act.A.ChatID, act.B.ChatID)
			}
			if !slices.Contains(ids, act.A.ID) || !slices.Contains(ids, act.B.ID) {
				rt.Fatalf("merged_from_ids %v lacks %s or %s", ids, act.A.ID, act.B.ID)
			}
			if merged.HitCount != act.A.HitCount+act.B.HitCount || merged.Who != act.A.Who {
				rt.Fatalf("merged hit count %d who %q", merged.HitCount, merged.Who)
			}
		}
		for _, act := range plan {
			if act.Kind != ActionSeparate {
				continue
			}
			a, b := after[act.A.ID], after[act.B.ID]
			if a.Text == b.Text || len(records.AnyList(a.Metadata[records.MetaUpdates])) != 1 || !separated(a, b) {
				rt.Fatalf("separated pair: texts %q / %q, updates %v", a.Text, b.Text, a.Metadata[records.MetaUpdates])
			}
		}
	})
}

func TestConsolidateAfterACrashBetweenInsertAndDeleteLosesNothingAndDuplicatesNothing(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		recs := stored(episodesGen(rt))
		store := newStore(t)
		if len(recs) > 0 {
			if err := store.Upsert(context.Background(), recs...); err != nil {
				rt.Fatal(err)
			}
		}
		// The crashed run inserted the merged records and stopped before deleting.
		e := newExecutor(t, store)
		plan := Plan(recs, DefaultThresholds())
		for _, act := range plan {
			if act.Kind != ActionMerge {
				continue
			}
			merged, _ := e.merger.Merge(context.Background(), act.A, act.B)
			vecs, err := e.embed(context.Background(), merged.Text)
			if err != nil {
				rt.Fatal(err)
			}
			if err := store.Upsert(context.Background(), MergedRecord(act.A, act.B, merged.Text, vecs[0])); err != nil {
				rt.Fatal(err)
			}
		}
		res, err := e.Consolidate(context.Background(), tenant, user)
		if err != nil {
			rt.Fatal(err)
		}
		if m := countMerges(plan); res.Cleaned != 2*m {
			rt.Fatalf("cleaned %d originals, want %d", res.Cleaned, 2*m)
		}
		after := allEpisodes(rt, store)
		mergedInto := map[string]string{}
		for id, r := range after {
			for _, from := range records.StringList(r.Metadata[records.MetaMergedFromIDs]) {
				mergedInto[from] = id
			}
		}
		for _, r := range recs {
			_, kept := after[r.ID]
			into, merged := mergedInto[r.ID]
			switch {
			case !kept && !merged:
				rt.Fatalf("record %s (%q) lost", r.ID, r.Text)
			case kept && merged:
				rt.Fatalf("record %s is stored and also merged into %s", r.ID, into)
			}
		}
	})
}

func TestReconsolidationPreservesTimeChatAndWhoAndGrowsUpdates(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		store := newStore(t)
		e := newExecutor(t, store)
		recs := stored(episodesGen(rt))
		if len(recs) == 0 {
			return
		}
		if err := store.Upsert(context.Background(), recs...); err != nil {
			rt.Fatal(err)
		}
		picked := rapid.SliceOfNDistinct(rapid.IntRange(0, len(recs)-1), 1, len(recs), rapid.ID[int]).Draw(rt, "picked")
		ids := make([]string, len(picked))
		for i, p := range picked {
			ids[i] = recs[p].ID
		}
		before := allEpisodes(rt, store)
		rounds := rapid.IntRange(1, 3).Draw(rt, "rounds")
		for range rounds {
			ctxText := rapid.StringMatching(`[a-z ()]{0,120}`).Draw(rt, "context")
			if err := e.Reconsolidate(context.Background(), tenant, user, ids, ctxText, nil); err != nil {
				rt.Fatal(err)
			}
		}
		after := allEpisodes(rt, store)
		for _, id := range ids {
			b, a := before[id], after[id]
			if !a.TS.Equal(b.TS) || a.ChatID != b.ChatID || a.Who != b.Who {
				rt.Fatalf("time/chat/who changed: %v %q %q → %v %q %q", b.TS, b.ChatID, b.Who, a.TS, a.ChatID, a.Who)
			}
			for _, k := range []string{records.MetaTime, records.MetaChatID, records.MetaWho} {
				if a.Metadata[k] != b.Metadata[k] {
					rt.Fatalf("metadata %s changed: %v → %v", k, b.Metadata[k], a.Metadata[k])
				}
			}
			ub, ua := records.AnyList(b.Metadata[records.MetaUpdates]), records.AnyList(a.Metadata[records.MetaUpdates])
			if len(ua) != len(ub)+rounds {
				rt.Fatalf("updates grew from %d to %d after %d reconsolidations", len(ub), len(ua), rounds)
			}
			first, _ := ua[len(ub)].(map[string]any)
			if first[records.UpdatePreviousText] != b.Text || first[records.UpdateTS] == nil {
				rt.Fatalf("first update entry %v does not keep the previous text %q", first, b.Text)
			}
			if a.Metadata[records.MetaThing] != b.Metadata[records.MetaThing] {
				rt.Fatalf("thing %v rewritten, was %v", a.Metadata[records.MetaThing], b.Metadata[records.MetaThing])
			}
		}
	})
}

func TestReconsolidateReportsMissingIDsAndSkipsFacts(t *testing.T) {
	store := newStore(t)
	e := newExecutor(t, store)
	ep := stored([]vectorstore.Record{{ID: testID(1), MemoryType: vectorstore.Episodic, Who: "user", ChatID: "c1", TS: t0, Vector: axis(0), Text: "I live in Berlin."}})[0]
	fact := records.FactRecord(tenant, user, records.Fact{Fact: "User lives in Berlin.", SourceChatID: "c1", FirstSeen: t0})
	fact.Vector = axis(1)
	if err := store.Upsert(context.Background(), ep, fact); err != nil {
		t.Fatal(err)
	}
	err := e.Reconsolidate(context.Background(), tenant, user, []string{ep.ID, fact.ID, testID(99)}, "trip planning", nil)
	if !errors.Is(err, vectorstore.ErrNotFound) {
		t.Fatalf("error %v, want ErrNotFound for the missing id", err)
	}
	got := allEpisodes(t, store)
	if got[ep.ID].Text != ep.Text || got[ep.ID].Metadata[records.MetaContext] != "trip planning" {
		t.Fatalf("episode text %q, context %v; want the text kept and the context %q", got[ep.ID].Text, got[ep.ID].Metadata[records.MetaContext], "trip planning")
	}
	if got[fact.ID].Text != fact.Text {
		t.Fatalf("fact rewritten to %q", got[fact.ID].Text)
	}
	if err := e.Reconsolidate(context.Background(), "bad tenant", user, nil, "", nil); !errors.Is(err, ErrInvalidInput) {
		t.Fatalf("bad tenant: error %v, want ErrInvalidInput", err)
	}
	if _, err := e.Consolidate(context.Background(), tenant, "bad.user"); !errors.Is(err, ErrInvalidInput) {
		t.Fatalf("bad user: error %v, want ErrInvalidInput", err)
	}
}

func TestNewExecutorValidates(t *testing.T) {
	store := newStore(t)
	emb, _ := embed.NewLocal(embed.LocalConfig{Dimensions: testDims})
	if _, err := NewExecutor(ExecutorConfig{}, nil, emb, nil, nil, nil); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("nil store: %v", err)
	}
	if _, err := NewExecutor(ExecutorConfig{Thresholds: Thresholds{Merge: 0.5, Separate: 0.7}}, store, emb, nil, nil, nil); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("separate above merge: %v", err)
	}
}

func TestEpisodeRecordRoundTripsC1FieldsAndRedeliveryUpsertsTheSameID(t *testing.T) {
	store := newStore(t)
	eventID := func(at time.Time) string { return ulid.MustNew(ulid.Timestamp(at), ulid.DefaultEntropy()).String() }
	obs := records.Observation{Role: "user", Text: "Remember, I'm a student at Peking University", TS: t0, ChatID: "c1", EventID: eventID(t0)}
	ep, _ := processor.NewRuleDecider().Decide(context.Background(), obs)
	rec := records.EpisodeRecord(tenant, user, obs, ep)
	rec.Vector = axis(0)
	if again := records.EpisodeRecord(tenant, user, obs, ep); again.ID != rec.ID {
		t.Fatalf("redelivery gives id %s, first delivery %s", again.ID, rec.ID)
	}
	// The event id alone is the identity: the same event re-sent with another ts
	// (and so another episode time) upserts the same record.
	resent, resentEp := obs, ep
	resent.TS, resentEp.Time = obs.TS.Add(time.Hour), obs.TS.Add(time.Hour)
	if again := records.EpisodeRecord(tenant, user, resent, resentEp); again.ID != rec.ID {
		t.Fatalf("the same event with another ts gives id %s, first %s", again.ID, rec.ID)
	}
	// Ids follow the event ids' (ULID) time, so that the store's id index grows at
	// its end as events arrive.
	for _, at := range []time.Time{t0.Add(time.Millisecond), t0.Add(-time.Hour)} {
		o := obs
		o.EventID = eventID(at)
		id := records.EpisodeRecord(tenant, user, o, ep).ID
		if (id > rec.ID) != at.After(t0) {
			t.Errorf("episode of an event id of %s has id %s; of %s, %s: not in time order", at, id, t0, rec.ID)
		}
	}
	// An event id that is no ULID still gives one deterministic id.
	plain := obs
	plain.EventID = "ev-1"
	if a, b := records.EpisodeRecord(tenant, user, plain, ep).ID, records.EpisodeRecord(tenant, user, plain, resentEp).ID; a != b {
		t.Errorf("a non-ULID event id gives ids %s and %s", a, b)
	}
	for range 2 {
		if err := store.Upsert(context.Background(), rec); err != nil {
			t.Fatal(err)
		}
	}
	got := allEpisodes(t, store)
	if len(got) != 1 {
		t.Fatalf("%d records after a redelivered upsert, want 1", len(got))
	}
	r := got[rec.ID]
	want := map[string]any{
		records.MetaContext: "explicit remember request by user in chat c1", records.MetaThing: "I'm a student at Peking University.",
		records.MetaTime: "2026-11-02T10:00:00Z", records.MetaChatID: "c1", records.MetaWho: "user",
	}
	for k, v := range want {
		if r.Metadata[k] != v {
			t.Errorf("metadata %s = %v, want %v", k, r.Metadata[k], v)
		}
	}
	if l := records.StringList(r.Metadata[records.MetaSourceChatIDs]); !slices.Equal(l, []string{"c1"}) {
		t.Errorf("source_chat_ids %v", l)
	}
	for _, k := range []string{records.MetaUpdates, records.MetaMergedFromIDs} {
		if l, ok := r.Metadata[k].([]any); !ok || len(l) != 0 {
			t.Errorf("%s = %#v, want an empty list", k, r.Metadata[k])
		}
	}
	if r.MemoryType != vectorstore.Episodic || r.Who != "user" || r.ChatID != "c1" || !r.TS.Equal(t0) || r.HitCount != 0 {
		t.Errorf("record fields %+v", r)
	}
}

// Issue 28 item 6: a merge, separation or reconsolidation the rules made in the
// model's place, its reply unparsable or off its schema, is written with
// metadata processed_by: rules_fallback (and counted); a model's is not marked.
func TestRewritesTheRulesMadeInTheModelsPlaceAreMarked(t *testing.T) {
	type rewriteCase struct {
		name  string
		start func(testing.TB) (*llm.Client, func() map[string]float64)
		mark  any // metadata processed_by of every rewritten record
	}
	cases := []rewriteCase{{llmtest.UsableReply.Name, llmtest.UsableReply.Start, nil}}
	for _, u := range llmtest.UnusableReplies {
		cases = append(cases, rewriteCase{u.Name, u.Start, records.ProcessedByRulesFallback})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			client, fallbacks := c.start(t)
			cfg := processor.LLMConfig{Client: client}
			merger, err := processor.NewLLMMerger(cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			sep, _ := processor.NewLLMSeparator(cfg, nil)
			recon, _ := processor.NewLLMReconsolidator(cfg, nil)
			emb, _ := embed.NewLocal(embed.LocalConfig{Dimensions: testDims})
			store := newStore(t)
			e, err := NewExecutor(ExecutorConfig{Now: func() time.Time { return t0.Add(60 * 24 * time.Hour) }}, store, emb, merger, sep, nil)
			if err != nil {
				t.Fatal(err)
			}
			recs := stored([]vectorstore.Record{
				// a and b: one vector, one chat, minutes apart: merged.
				{ID: testID(1), MemoryType: vectorstore.Episodic, Who: "user", ChatID: "c1", TS: t0, Vector: axis(0), Text: "I moved to Berlin."},
				{ID: testID(2), MemoryType: vectorstore.Episodic, Who: "user", ChatID: "c1", TS: t0.Add(5 * time.Minute), Vector: axis(0), Text: "I moved to Berlin in May."},
				// c and d: one vector, other chats a month apart: separated.
				{ID: testID(3), MemoryType: vectorstore.Episodic, Who: "user", ChatID: "c2", TS: t0, Vector: axis(1), Text: "I went hiking."},
				{ID: testID(4), MemoryType: vectorstore.Episodic, Who: "user", ChatID: "c3", TS: t0.Add(30 * 24 * time.Hour), Vector: axis(1), Text: "I went hiking with Ana."},
				// r: alone, reconsolidated.
				{ID: testID(5), MemoryType: vectorstore.Episodic, Who: "user", ChatID: "c4", TS: t0, Vector: axis(2), Text: "I live in Hamburg."},
				// u: alone and never rewritten.
				{ID: testID(6), MemoryType: vectorstore.Episodic, Who: "user", ChatID: "c5", TS: t0, Vector: axis(3), Text: "I play chess."},
			})
			if err := store.Upsert(context.Background(), recs...); err != nil {
				t.Fatal(err)
			}
			res, err := e.Consolidate(context.Background(), tenant, user)
			if err != nil || res.Merged != 1 || res.Separated != 1 {
				t.Fatalf("consolidate = %+v, %v; want one merge and one separation", res, err)
			}
			if err := e.Reconsolidate(context.Background(), tenant, user, []string{testID(5)}, "planning a trip", recon); err != nil {
				t.Fatal(err)
			}
			after := allEpisodes(t, store)
			for _, id := range []string{vectorstore.DeterministicID("merge", min(testID(1), testID(2)), max(testID(1), testID(2))), testID(3), testID(4), testID(5)} {
				rec, ok := after[id]
				if !ok {
					t.Fatalf("record %s missing; stored %v", id, slices.Collect(maps.Keys(after)))
				}
				if got := rec.Metadata[records.MetaProcessedBy]; got != c.mark {
					t.Errorf("record %s (%q): processed_by %v, want %v", id, rec.Text, got, c.mark)
				}
			}
			if got := after[testID(6)].Metadata[records.MetaProcessedBy]; got != nil {
				t.Errorf("untouched record marked processed_by %v", got)
			}
			want := map[string]float64{}
			if c.mark != nil {
				want = map[string]float64{llmtest.StepMerge: 1, llmtest.StepSeparate: 1, llmtest.StepReconsolidate: 1}
			}
			if got := fallbacks(); !maps.Equal(got, want) {
				t.Errorf("fallbacks counted %v, want %v", got, want)
			}
		})
	}
}
