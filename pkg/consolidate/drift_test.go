package consolidate_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/consolidate"
	"github.com/agentmem/agentmem/pkg/processor"
	"github.com/agentmem/agentmem/pkg/records"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// countingReconsolidator stands in for a model's reconsolidator (the offline
// one keeps the text): it appends "(recalled: <new context>)" to the text it is
// given, counts its calls and can be told to drop a word of the text.
type countingReconsolidator struct {
	calls int
	drop  string
	seen  []string // the texts it was asked to rewrite
}

func (c *countingReconsolidator) Reconsolidate(_ context.Context, m vectorstore.Record, newContext string) (processor.Rewrite, error) {
	c.calls++
	c.seen = append(c.seen, m.Text)
	text := m.Text + " (recalled: " + newContext + ")"
	if c.drop != "" {
		text = strings.ReplaceAll(text, c.drop, "several")
	}
	return processor.Rewrite{Text: text}, nil
}

// Issue 22: twenty context packs of one session using one memory reconsolidate it
// once; its statement (thing) never changes, and packs of a new session rewrite it
// again from the base text, not from the previous rewrite.
func TestReconsolidationOncePerSessionKeepsTheStatement(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	ep := e.episode(t, user, "c1", base, student)
	rc := &countingReconsolidator{}
	reg := prometheus.NewRegistry()
	r := e.runner(t, "", func(_ *consolidate.RunnerConfig, d *consolidate.RunnerDeps) {
		d.Reconsolidator, d.Metrics = rc, reg
	})
	for i := range 20 {
		if err := r.ApplyHits(ctx, tenant, user, hitEventIn("s1", user, fmt.Sprintf("where do I study, take %d?", i), ep.ID)); err != nil {
			t.Fatal(err)
		}
	}
	got := e.get(t, user, ep.ID)
	if got.HitCount != 20 {
		t.Errorf("hit_count %d, want 20", got.HitCount)
	}
	if rc.calls != 1 || len(records.AnyList(got.Metadata[records.MetaUpdates])) != 1 {
		t.Errorf("%d reconsolidations, %d updates after 20 packs of one session; want 1 and 1", rc.calls, len(records.AnyList(got.Metadata[records.MetaUpdates])))
	}
	if got.Metadata[records.MetaThing] != ep.Metadata[records.MetaThing] {
		t.Errorf("thing %q rewritten, was %q", got.Metadata[records.MetaThing], ep.Metadata[records.MetaThing])
	}
	if skipped, rewritten, kept := counterOf(t, reg, "skipped"), counterOf(t, reg, "rewritten"), counterOf(t, reg, "context"); skipped != 19 || rewritten != 1 || kept != 0 {
		t.Errorf("reconsolidations skipped %v, rewritten %v, context only %v; want 19, 1, 0", skipped, rewritten, kept)
	}

	// Without a session: once per window since the last reconsolidation, which
	// the pack of s1 just was.
	for range 3 {
		if err := r.ApplyHits(ctx, tenant, user, hitEventIn("", user, "and without a session?", ep.ID)); err != nil {
			t.Fatal(err)
		}
	}
	if rc.calls != 1 {
		t.Errorf("%d reconsolidations after 3 packs without a session within the window, want still 1", rc.calls)
	}
	if err := r.ApplyHits(ctx, tenant, user, hitEventIn("s2", user, "a new session", ep.ID)); err != nil {
		t.Fatal(err)
	}
	if rc.calls != 2 {
		t.Errorf("%d reconsolidations after a pack of a new session, want 2", rc.calls)
	}
	for i, seen := range rc.seen {
		if seen != ep.Text {
			t.Errorf("reconsolidation %d rewrote %q, want the base text %q", i, seen, ep.Text)
		}
	}
	got = e.get(t, user, ep.ID)
	if got.Metadata[records.MetaThing] != ep.Metadata[records.MetaThing] || strings.Count(got.Text, "recalled") != 1 {
		t.Errorf("after 2 reconsolidations: text %q thing %q", got.Text, got.Metadata[records.MetaThing])
	}
}

// Hits handled as one batch end as the same hits handled one by one: which query
// rewrites a memory does not depend on where a delivery batch ended (a replay
// batches otherwise than the live run did).
func TestReconsolidationOfABatchIsThatOfItsHitsOneByOne(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	hits := func(id string) []events.Envelope {
		return []events.Envelope{
			hitEventIn("", user, "where do I study?", id),
			hitEventIn("", user, "what do I study?", id),
			hitEventIn("s1", user, "my classes", id),
			hitEventIn("s1", user, "my classes again", id),
			hitEventIn("", user, "and without a session?", id),
		}
	}
	r := e.runner(t, "", nil)
	oneByOne := e.episode(t, user, "c1", base, student)
	for _, h := range hits(oneByOne.ID) {
		if err := r.ApplyHits(ctx, tenant, user, h); err != nil {
			t.Fatal(err)
		}
	}
	batched := e.episode(t, user, "c2", base.Add(72*time.Hour), student)
	if err := r.ApplyHits(ctx, tenant, user, hits(batched.ID)...); err != nil {
		t.Fatal(err)
	}
	a, b := e.get(t, user, oneByOne.ID), e.get(t, user, batched.ID)
	if a.Metadata[records.MetaContext] != "my classes" {
		t.Fatalf("one by one the memory was recalled for %q, want the first pack of s1", a.Metadata[records.MetaContext])
	}
	for _, k := range []string{records.MetaContext, records.MetaReconsolidatedSessions} {
		if fmt.Sprint(a.Metadata[k]) != fmt.Sprint(b.Metadata[k]) {
			t.Errorf("%s one by one %v, batched %v", k, a.Metadata[k], b.Metadata[k])
		}
	}
}

// Issue 22: a rewrite that loses a number of the statement is rejected; the
// memory keeps its text, the use is counted and the rejection is too.
func TestReconsolidationRejectsARewriteThatDropsANumber(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	const said = "I paid 1200 euros for the flight to Lisbon on March 3"
	ep := e.episode(t, user, "c1", base, said)
	rc := &countingReconsolidator{drop: "1200"}
	reg := prometheus.NewRegistry()
	r := e.runner(t, "", func(_ *consolidate.RunnerConfig, d *consolidate.RunnerDeps) {
		d.Reconsolidator, d.Metrics = rc, reg
	})
	if err := r.ApplyHits(ctx, tenant, user, hitEventIn("s1", user, "how much was the flight?", ep.ID)); err != nil {
		t.Fatal(err)
	}
	got := e.get(t, user, ep.ID)
	if got.Text != ep.Text || got.HitCount != 1 || len(records.AnyList(got.Metadata[records.MetaUpdates])) != 0 {
		t.Errorf("after a rejected rewrite: text %q, hit_count %d, updates %v; want the original text, 1, none",
			got.Text, got.HitCount, got.Metadata[records.MetaUpdates])
	}
	if n := (counterOf(t, reg, "rejected")); n != 1 {
		t.Errorf("rejected reconsolidations %v, want 1", n)
	}
	// The session counts as done: the model is not asked again for it.
	if err := r.ApplyHits(ctx, tenant, user, hitEventIn("s1", user, "again", ep.ID)); err != nil {
		t.Fatal(err)
	}
	if rc.calls != 1 {
		t.Errorf("%d calls, want 1", rc.calls)
	}
}

func counterOf(t *testing.T, reg *prometheus.Registry, outcome string) float64 {
	t.Helper()
	return counterValue(t, reg, "agentmem_reconsolidations_total", "outcome", outcome)
}

// counterValue is the value of reg's counter name in the series whose label is
// value (label "": the series without labels).
func counterValue(t *testing.T, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if label == "" && len(m.GetLabel()) == 0 {
				return m.GetCounter().GetValue()
			}
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no %s{%s=%q}", name, label, value)
	return 0
}
