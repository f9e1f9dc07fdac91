package consolidate_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"pgregory.net/rapid"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/consolidate"
	"github.com/agentmem/agentmem/pkg/llm"
	"github.com/agentmem/agentmem/pkg/llm/llmtest"
	"github.com/agentmem/agentmem/pkg/processor"
	"github.com/agentmem/agentmem/pkg/records"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// SPEC C4, C5: a memory_hit applied twice counts once; the memory is rewritten
// with the query as its new context, time, chat and speaker unchanged, and its
// updates grow by one; unknown ids are skipped.
func TestApplyHitsCountsEachEventOnce(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	ep := e.episode(t, user, "c1", base, student)
	r := e.runner(t, "", nil)
	if _, err := r.Consolidate(ctx, tenant, user); err != nil { // writes the fact
		t.Fatal(err)
	}
	facts := e.records(t, user, vectorstore.Semantic)
	if len(facts) != 1 {
		t.Fatalf("%d facts", len(facts))
	}
	const query = "which university do I attend?"
	gone := vectorstore.DeterministicID("deleted memory")
	hit := hitEvent(user, query, ep.ID, facts[0].ID, gone, "not-a-memory-id")
	for range 2 {
		if err := r.ApplyHits(ctx, tenant, user, hit); err != nil {
			t.Fatal(err)
		}
	}
	got := e.get(t, user, ep.ID)
	if got.HitCount != 1 {
		t.Errorf("hit_count %d after one event delivered twice, want 1", got.HitCount)
	}
	if !got.TS.Equal(ep.TS) || got.ChatID != ep.ChatID || got.Who != ep.Who {
		t.Errorf("time/chat/who changed: %s %s %s, was %s %s %s", got.TS, got.ChatID, got.Who, ep.TS, ep.ChatID, ep.Who)
	}
	for _, k := range []string{records.MetaTime, records.MetaChatID, records.MetaWho} {
		if got.Metadata[k] != ep.Metadata[k] {
			t.Errorf("metadata %s changed: %v, was %v", k, got.Metadata[k], ep.Metadata[k])
		}
	}
	updates, _ := got.Metadata[records.MetaUpdates].([]any)
	if len(updates) != 1 {
		t.Fatalf("updates %v, want one entry", updates)
	}
	u, _ := updates[0].(map[string]any)
	if u[records.UpdateContext] != query || u[records.UpdatePreviousText] != ep.Text || u[records.UpdatePreviousContext] != ep.Metadata[records.MetaContext] {
		t.Errorf("update entry %v, want context %q, previous text %q and previous context %q", u, query, ep.Text, ep.Metadata[records.MetaContext])
	}
	// Issue 28: the new context is the record's context; the offline
	// reconsolidator never writes it (nor anything else) into the text.
	if got.Metadata[records.MetaContext] != query {
		t.Errorf("context %v, want the new context %q", got.Metadata[records.MetaContext], query)
	}
	if got.Text != ep.Text || !slices.Equal(got.Vector, ep.Vector) {
		t.Errorf("text %q (vector re-embedded: %v), want it as it was: %q", got.Text, !slices.Equal(got.Vector, ep.Vector), ep.Text)
	}
	if got.Metadata[records.MetaThing] != ep.Metadata[records.MetaThing] {
		t.Errorf("thing %v rewritten, was %v", got.Metadata[records.MetaThing], ep.Metadata[records.MetaThing])
	}
	if hs := strs(got.Metadata[records.MetaHitEvents]); !slices.Equal(hs, []string{hit.ID}) {
		t.Errorf("hit_events %v, want [%s]", hs, hit.ID)
	}
	if ops := e.ops(t, user, ep.ID); !slices.Equal(ops, []string{consolidate.OpHit, consolidate.OpReconsolidate}) {
		t.Errorf("history %v", ops)
	}
	f := e.get(t, user, facts[0].ID)
	if f.HitCount != 1 || f.Text != facts[0].Text {
		t.Errorf("fact after a hit: count %d text %q; want 1 and unchanged", f.HitCount, f.Text)
	}

	second := hitEvent(user, "where do I study?", ep.ID)
	if err := r.ApplyHits(ctx, tenant, user, second); err != nil {
		t.Fatal(err)
	}
	got = e.get(t, user, ep.ID)
	updates, _ = got.Metadata[records.MetaUpdates].([]any)
	if got.HitCount != 2 || len(updates) != 2 {
		t.Errorf("after a second event: hit_count %d, %d updates; want 2 and 2", got.HitCount, len(updates))
	}
}

// deletingStore is the real store that deletes the listed records of a Get
// right after reading them: a delete racing the hit application (deletes do not
// take the lease).
type deletingStore struct {
	vectorstore.Store
	victims []string
}

func (s *deletingStore) Get(ctx context.Context, tenant, userID string, ids ...string) ([]vectorstore.Record, error) {
	recs, err := s.Store.Get(ctx, tenant, userID, ids...)
	if err != nil {
		return nil, err
	}
	if _, err := s.Store.Delete(ctx, tenant, userID, s.victims...); err != nil {
		return nil, err
	}
	return recs, nil
}

// A memory deleted between the read and the batched update is skipped without
// a history entry; the batch's other memories are counted and recorded.
func TestApplyHitsSkipsMemoryDeletedMeanwhile(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	kept := e.episode(t, user, "c1", base, student)
	doomed := e.episode(t, user, "c2", base.Add(time.Minute), "I had lunch with Bob at the noodle place")
	store := &deletingStore{Store: e.store, victims: []string{doomed.ID}}
	r := e.runner(t, "", func(_ *consolidate.RunnerConfig, d *consolidate.RunnerDeps) { d.Vectors = store })
	if err := r.ApplyHits(ctx, tenant, user, hitEvent(user, "where do I study?", kept.ID, doomed.ID)); err != nil {
		t.Fatal(err)
	}
	if got := e.get(t, user, kept.ID); got.HitCount != 1 {
		t.Errorf("kept memory's hit_count %d, want 1", got.HitCount)
	}
	if ops := e.ops(t, user, kept.ID); !slices.Equal(ops, []string{consolidate.OpHit, consolidate.OpReconsolidate}) {
		t.Errorf("kept memory's history %v", ops)
	}
	if got, err := e.store.Get(ctx, tenant, user, doomed.ID); err != nil || len(got) != 0 {
		t.Fatalf("the deleted memory came back: %v, %v", got, err)
	}
	if ops := e.ops(t, user, doomed.ID); len(ops) != 0 {
		t.Errorf("deleted memory's history %v, want none", ops)
	}
}

func TestApplyHitsRejectsForeignEvents(t *testing.T) {
	e := newEnv(t)
	r := e.runner(t, "", nil)
	ctx := testCtx(t)
	other := hitEvent("u2", "q", vectorstore.DeterministicID("x"))
	if err := r.ApplyHits(ctx, tenant, user, other); !errors.Is(err, consolidate.ErrInvalidInput) {
		t.Errorf("hit of another user: %v, want ErrInvalidInput", err)
	}
	written := events.New(events.TypeMemoryWritten, tenant, user, "", "")
	if err := r.ApplyHits(ctx, tenant, user, written); !errors.Is(err, consolidate.ErrInvalidInput) {
		t.Errorf("memory_written as a hit: %v, want ErrInvalidInput", err)
	}
}

// Property (C4): whatever the order and repetition of hit events, a memory's
// hit_count is the number of distinct events, its updates grow once per distinct
// event, and hit_events lists them in first-applied order (within its window).
func TestPropertyEachHitEventCountsOnce(t *testing.T) {
	e := newEnv(t)
	r := e.runner(t, "", nil)
	ctx := testCtx(t)
	n := 0
	rapid.Check(t, func(rt *rapid.T) {
		n++
		ep := e.episode(t, user, fmt.Sprintf("chat%d", n), base.Add(time.Duration(n)*time.Minute), student)
		pool := rapid.IntRange(1, 6).Draw(rt, "distinct events")
		hits := make([]events.Envelope, pool)
		for i := range hits {
			hits[i] = hitEvent(user, fmt.Sprintf("query %d", i), ep.ID)
		}
		order := rapid.SliceOfN(rapid.IntRange(0, pool-1), 1, 12).Draw(rt, "deliveries")
		var first []string
		for _, i := range order {
			if err := r.ApplyHits(ctx, tenant, user, hits[i]); err != nil {
				rt.Fatal(err)
			}
			if !slices.Contains(first, hits[i].ID) {
				first = append(first, hits[i].ID)
			}
		}
		got := e.get(t, user, ep.ID)
		updates, _ := got.Metadata[records.MetaUpdates].([]any)
		if got.HitCount != len(first) || len(updates) != len(first) {
			rt.Fatalf("deliveries %v: hit_count %d, %d updates; want %d", order, got.HitCount, len(updates), len(first))
		}
		if hs := strs(got.Metadata[records.MetaHitEvents]); !slices.Equal(hs, first) {
			rt.Fatalf("hit_events %v, want %v", hs, first)
		}
		if !got.TS.Equal(ep.TS) || got.ChatID != ep.ChatID || got.Who != ep.Who {
			rt.Fatalf("time/chat/who changed")
		}
	})
}

// The dedupe window keeps the last HitEventWindow ids.
func TestHitEventsWindowIsBounded(t *testing.T) {
	e := newEnv(t)
	r := e.runner(t, "", nil)
	ctx := testCtx(t)
	ep := e.episode(t, user, "c1", base, student)
	var ids []string
	for i := range consolidate.HitEventWindow + 3 {
		h := hitEvent(user, fmt.Sprintf("q%d", i), ep.ID)
		ids = append(ids, h.ID)
		if err := r.ApplyHits(ctx, tenant, user, h); err != nil {
			t.Fatal(err)
		}
	}
	got := e.get(t, user, ep.ID)
	if hs := strs(got.Metadata[records.MetaHitEvents]); !slices.Equal(hs, ids[3:]) {
		t.Errorf("hit_events holds %d ids, want the last %d", len(hs), consolidate.HitEventWindow)
	}
	if got.HitCount != len(ids) {
		t.Errorf("hit_count %d, want %d", got.HitCount, len(ids))
	}
}

// Property (C4, C5): deliveries applied in random batches, with redeliveries,
// count each distinct event exactly once, like one by one; each batch that brings
// a new event reconsolidates the memory once, with the query of the batch's newest
// new event (made last, whatever the delivery order), adding one updates entry;
// time, chat and who never change.
func TestPropertyBatchedHitsCountOnceAndReconsolidateOncePerBatch(t *testing.T) {
	e := newEnv(t)
	r := e.runner(t, "", nil)
	ctx := testCtx(t)
	n := 0
	rapid.Check(t, func(rt *rapid.T) {
		n++
		chat := fmt.Sprintf("chat%d", n)
		ep := e.episode(t, user, chat, base, student)
		pool := rapid.IntRange(1, 5).Draw(rt, "distinct events")
		hits := make([]events.Envelope, pool)
		for i := range pool {
			hits[i] = hitEvent(user, fmt.Sprintf("query %d", rapid.IntRange(0, 2).Draw(rt, "query")), ep.ID)
		}
		order := rapid.SliceOfN(rapid.IntRange(0, pool-1), 1, 12).Draw(rt, "deliveries")
		applied := map[int]bool{}
		var wantTrail []string
		text := ep.Text
		for rest := order; len(rest) > 0; {
			k := rapid.IntRange(1, len(rest)).Draw(rt, "batch size")
			var batch []events.Envelope
			newest := -1
			for _, i := range rest[:k] {
				batch = append(batch, hits[i])
				if !applied[i] {
					applied[i] = true
					if newest < 0 || madeAfter(hits[i], hits[newest]) {
						newest = i
					}
				}
			}
			if err := r.ApplyHits(ctx, tenant, user, batch...); err != nil {
				rt.Fatal(err)
			}
			if newest >= 0 {
				q := hits[newest].MemoryHit.Query
				wantTrail = append(wantTrail, q+"|"+text)
				rec := ep
				rec.Text = text
				next, err := processor.NewRuleReconsolidator().Reconsolidate(ctx, rec, q)
				if err != nil {
					rt.Fatal(err)
				}
				text = next.Text
			}
			rest = rest[k:]
		}
		got := e.get(t, user, ep.ID)
		if got.HitCount != len(applied) {
			rt.Fatalf("hit_count %d, want %d distinct events", got.HitCount, len(applied))
		}
		if trail := updateTrail(got); !slices.Equal(trail, wantTrail) {
			rt.Fatalf("updates %v, want %v", trail, wantTrail)
		}
		if got.Text != text || got.Metadata[records.MetaThing] != ep.Metadata[records.MetaThing] {
			rt.Fatalf("text %q (thing %q), want %q (thing %q)", got.Text, got.Metadata[records.MetaThing], text, ep.Metadata[records.MetaThing])
		}
		if !got.TS.Equal(ep.TS) || got.ChatID != ep.ChatID || got.Who != ep.Who {
			rt.Fatalf("time/chat/who changed: %v %q %q, were %v %q %q", got.TS, got.ChatID, got.Who, ep.TS, ep.ChatID, ep.Who)
		}
		if hs := len(strs(got.Metadata[records.MetaHitEvents])); hs != len(applied) {
			rt.Fatalf("hit_events holds %d ids, want %d", hs, len(applied))
		}
	})
}

// madeAfter reports whether hit a was made after b: by event time, then id.
func madeAfter(a, b events.Envelope) bool {
	return cmp.Or(a.TS.Compare(b.TS), strings.Compare(a.ID, b.ID)) > 0
}

// updateTrail is a record's updates as "context|previous text" (their ts differ).
func updateTrail(r vectorstore.Record) []string {
	var out []string
	for _, u := range records.AnyList(r.Metadata[records.MetaUpdates]) {
		m, _ := u.(map[string]any)
		out = append(out, fmt.Sprint(m[records.UpdateContext], "|", m[records.UpdatePreviousText]))
	}
	return out
}

// A batch holding an event of another namespace is rejected before anything is
// written.
func TestApplyHitsRejectsAMixedBatch(t *testing.T) {
	e := newEnv(t)
	r := e.runner(t, "", nil)
	ctx := testCtx(t)
	ep := e.episode(t, user, "c1", base, student)
	mixed := []events.Envelope{hitEvent(user, "q", ep.ID), hitEvent("u2", "q", ep.ID)}
	if err := r.ApplyHits(ctx, tenant, user, mixed...); !errors.Is(err, consolidate.ErrInvalidInput) {
		t.Fatalf("mixed batch: %v, want ErrInvalidInput", err)
	}
	if got := e.get(t, user, ep.ID); got.HitCount != 0 || got.Text != ep.Text {
		t.Errorf("after a rejected batch: hit_count %d, text %q; want it untouched", got.HitCount, got.Text)
	}
}

// Issue 32: a hot namespace's batch of hits asks the model for at most
// MaxReconsolidations rewrites; the memories past it count their hits, keep their
// text and marks (shed, counted) and are reconsolidated by later batches, so
// every memory is reconsolidated once and the work drains. 40 memories each used
// by the 30 context requests of every batch (no session: once per window).
func TestHotHitsAskTheModelABoundedNumberOfTimes(t *testing.T) {
	const memories, perBatch, bound = 40, 30, 16
	e := newEnv(t)
	ctx := testCtx(t)
	model := llmtest.NewModel(t)
	client, err := llm.New(llm.Config{BaseURL: model.URL(), Model: "m"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	recon, err := processor.NewLLMReconsolidator(processor.LLMConfig{Client: client}, nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	r := e.runner(t, "", func(c *consolidate.RunnerConfig, d *consolidate.RunnerDeps) {
		d.Reconsolidator, d.Metrics = recon, reg
	})
	ids := make([]string, memories)
	for i := range ids {
		ids[i] = e.episode(t, user, "c1", base.Add(time.Duration(i)*time.Minute), fmt.Sprintf("I keep box %d in the attic.", i)).ID
	}
	done := map[string]bool{} // reconsolidated memories
	for batch, wantNew := range []int{bound, bound, memories - 2*bound} {
		hits := make([]events.Envelope, perBatch)
		for i := range hits {
			hits[i] = hitEventIn("", user, fmt.Sprintf("where is box %d?", i), ids...)
		}
		before := model.Calls(llmtest.StepReconsolidate)
		if err := r.ApplyHits(ctx, tenant, user, hits...); err != nil {
			t.Fatal(err)
		}
		if calls := model.Calls(llmtest.StepReconsolidate) - before; calls != wantNew {
			t.Fatalf("batch %d asked the model %d times, want %d", batch, calls, wantNew)
		}
		fresh := 0
		for _, id := range ids {
			got := e.get(t, user, id)
			if got.HitCount != (batch+1)*perBatch {
				t.Errorf("batch %d: %s hit_count %d, want %d", batch, id, got.HitCount, (batch+1)*perBatch)
			}
			updates, _ := got.Metadata[records.MetaUpdates].([]any)
			_, marked := got.Metadata[records.MetaReconsolidatedAt]
			switch {
			case done[id] && len(updates) != 1:
				t.Errorf("batch %d: %s reconsolidated again (%d updates)", batch, id, len(updates))
			case !done[id] && len(updates) == 1 && marked:
				done[id] = true
				fresh++
			case !done[id] && (len(updates) != 0 || marked):
				t.Errorf("batch %d: shed memory %s has %d updates, marked %v", batch, id, len(updates), marked)
			}
		}
		if fresh != wantNew {
			t.Errorf("batch %d reconsolidated %d memories, want %d", batch, fresh, wantNew)
		}
	}
	if len(done) != memories {
		t.Errorf("%d of %d memories reconsolidated after three batches", len(done), memories)
	}
	// The fake model keeps the text: each reconsolidation took the context alone.
	if shed, kept, rewritten := counterOf(t, reg, "shed"), counterOf(t, reg, "context"), counterOf(t, reg, "rewritten"); shed != memories-bound+memories-2*bound || kept != memories || rewritten != 0 {
		t.Errorf("shed %v, context only %v, rewritten %v; want %d, %d, 0", shed, kept, rewritten, memories-bound+memories-2*bound, memories)
	}
}
