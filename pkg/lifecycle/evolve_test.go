package lifecycle_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/docstore"
	"github.com/agentmem/agentmem/pkg/docstore/docstoretest"
	"github.com/agentmem/agentmem/pkg/lifecycle"
	"github.com/agentmem/agentmem/pkg/llm/llmtest"
	"github.com/agentmem/agentmem/pkg/policy"
	"github.com/agentmem/agentmem/pkg/session"
)

func overrides(t *testing.T, docs *docstore.Store) string {
	t.Helper()
	data, _, err := docs.PolicyOverrides(context.Background(), ns)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(strings.Fields(string(data)), "")
}

func snapshots(t *testing.T, docs *docstore.Store) []string {
	t.Helper()
	names, err := docs.PolicySnapshots(context.Background(), ns)
	if err != nil {
		t.Fatal(err)
	}
	return names
}

func changes(kv ...string) lifecycle.Proposal {
	p := lifecycle.Proposal{Changes: map[string]json.RawMessage{}, Reason: "test"}
	for i := 0; i < len(kv); i += 2 {
		p.Changes[kv[i]] = json.RawMessage(kv[i+1])
	}
	return p
}

// One bad value rejects the whole proposal and changes nothing; a good one
// snapshots the overrides it replaces and writes the new ones; rollback
// restores them (SPEC B5).
func TestApplyProposal(t *testing.T) {
	ctx := context.Background()
	clk := docstoretest.NewClock()
	docs := fsStore(t, clk)
	reg := prometheus.NewRegistry()
	m, err := lifecycle.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	base := policy.Defaults()
	if _, err := lifecycle.SetPolicy(ctx, docs, ns, base, changes("retrieve_limit", "12").Changes); err != nil {
		t.Fatal(err)
	}
	before, snaps := overrides(t, docs), snapshots(t, docs)

	for _, bad := range []lifecycle.Proposal{
		changes("recent_days", "7", "retrieve_limit", "0"),
		changes("recent_days", "7", "session_summary_token_percent", "250"),
		changes("recent_days", "7.5"),
		changes("recent_days", "7", "no_such_key", "1"),
		changes("recent_days", "7", "session_summary_keep_count", "40"),
		changes("evolution_enabled", "false"),
	} {
		clk.Advance(time.Second)
		outcome, _, err := lifecycle.ApplyProposal(ctx, docs, ns, base, bad, m)
		if outcome != lifecycle.ProposalRejected || !errors.Is(err, lifecycle.ErrRejected) {
			t.Fatalf("%s: outcome %q, err %v", bad.Changes, outcome, err)
		}
		if got := overrides(t, docs); got != before || len(snapshots(t, docs)) != len(snaps) {
			t.Fatalf("a rejected proposal wrote: %s, %v", got, snapshots(t, docs))
		}
	}

	clk.Advance(time.Second)
	outcome, snapshot, err := lifecycle.ApplyProposal(ctx, docs, ns, base, changes("recent_days", "7"), m)
	if err != nil || outcome != lifecycle.ProposalApplied || snapshot == "" {
		t.Fatalf("outcome %q, snapshot %q, err %v", outcome, snapshot, err)
	}
	if got := overrides(t, docs); got != `{"recent_days":7,"retrieve_limit":12}` {
		t.Fatalf("overrides %s", got)
	}
	if data, err := docs.ReadFile(ctx, ns, snapshot); err != nil || strings.Join(strings.Fields(string(data)), "") != before {
		t.Fatalf("snapshot %s holds %q (%v), want %s", snapshot, data, err, before)
	}
	clk.Advance(time.Second)
	if outcome, _, err := lifecycle.ApplyProposal(ctx, docs, ns, base, changes("recent_days", "7"), m); err != nil || outcome != lifecycle.ProposalEmpty {
		t.Fatalf("a proposal changing nothing: %q, %v", outcome, err)
	}
	clk.Advance(time.Second)
	if err := docs.RestorePolicySnapshot(ctx, ns, snapshot); err != nil {
		t.Fatal(err)
	}
	if got := overrides(t, docs); got != before {
		t.Fatalf("rollback left %s, want %s", got, before)
	}
	for outcome, want := range map[string]float64{"rejected": 6, "applied": 1, "empty": 1} {
		if got := counted(t, reg, "agentmem_policy_proposals_total", outcome); got != want {
			t.Errorf("%s counted %v, want %v", outcome, got, want)
		}
	}
}

// The offline reflection: references to earlier conversations widen
// recent_days, a long session lowers the summary threshold; deterministic.
func TestRuleReflector(t *testing.T) {
	pol := policy.Defaults()
	r := sessionMessages("hello", "As I said last week, the invoice is late.", "ok", "We talked about it yesterday.")
	p, err := lifecycle.RuleReflector{}.Reflect(context.Background(), lifecycle.Reflection{Policy: pol, Messages: 20, Recent: r})
	if err != nil || string(p.Changes["recent_days"]) != "6" || len(p.Changes) != 1 || p.Reason == "" {
		t.Fatalf("proposal %+v, %v", p, err)
	}
	p, _ = lifecycle.RuleReflector{}.Reflect(context.Background(), lifecycle.Reflection{Policy: pol, Messages: 60, Recent: sessionMessages("hello")})
	if string(p.Changes["session_summary_message_threshold"]) != "15" || len(p.Changes) != 1 {
		t.Fatalf("long session proposal %+v", p)
	}
	p, _ = lifecycle.RuleReflector{}.Reflect(context.Background(), lifecycle.Reflection{Policy: pol, Messages: 20, Recent: sessionMessages("hello", "fine")})
	if len(p.Changes) != 0 {
		t.Fatalf("a plain session proposed %+v", p)
	}
}

// The Evolver reflects once per 20 messages of a session, only with evolution
// enabled, and a redelivery never reflects twice.
func TestEvolverReflectsOncePerTwentyMessages(t *testing.T) {
	ctx := context.Background()
	s := sessionRig(t, 20, func(i int) string {
		if i%2 == 0 && i < 8 {
			return fmt.Sprintf("Like last time, use report_%d.csv.", i)
		}
		return "fine"
	})
	clk := docstoretest.NewClock()
	docs := fsStore(t, clk)
	off, err := lifecycle.NewEvolver(lifecycle.EvolverConfig{Base: policy.Defaults()}, docs, s, nil, nil, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if out, err := off.Reflect(ctx, "acme", "u1", "s1"); err != nil || out != lifecycle.EvolutionOff {
		t.Fatalf("evolution off: %q, %v", out, err)
	}
	base := policy.Defaults()
	base.EvolutionEnabled = true
	e, err := lifecycle.NewEvolver(lifecycle.EvolverConfig{Base: base}, docs, s, nil, nil, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if out, err := e.Reflect(ctx, "acme", "u1", "s1"); err != nil || out != lifecycle.ProposalApplied {
		t.Fatalf("first reflection: %q, %v", out, err)
	}
	if got := overrides(t, docs); got != `{"recent_days":6}` || len(snapshots(t, docs)) != 1 {
		t.Fatalf("overrides %s, snapshots %v", got, snapshots(t, docs))
	}
	if out, err := e.Reflect(ctx, "acme", "u1", "s1"); err != nil || out != lifecycle.EvolutionNotDue {
		t.Fatalf("a redelivery reflected again: %q, %v", out, err)
	}
}

// modelEvolver is an Evolver with evolution enabled, reflecting with model on
// a session of n messages (sessionRig with text), and its docstore.
func modelEvolver(t *testing.T, model *llmtest.Model, n int, text func(int) string) (*docstore.Store, *lifecycle.Evolver) {
	t.Helper()
	s := sessionRig(t, n, text)
	docs := fsStore(t, docstoretest.NewClock())
	base := policy.Defaults()
	base.EvolutionEnabled = true
	e, err := lifecycle.NewEvolver(lifecycle.EvolverConfig{Base: base}, docs, s, lifecycle.LLMReflector{Client: modelClient(t, model)}, nil, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	return docs, e
}

// With a model, the reflection is the model's proposal, validated the same way.
func TestLLMReflectorProposalIsValidated(t *testing.T) {
	ctx := context.Background()
	model := llmtest.NewModel(t)
	docs, e := modelEvolver(t, model, 40, chat)
	model.SetAnswer(llmtest.StepReflect, func(user string) string {
		if !strings.Contains(user, `"recent_days":3`) || !strings.Contains(user, "40 messages") {
			return `{"changes": {}, "reason": "prompt without the policy"}`
		}
		return `{"changes": {"recent_days": 9, "retrieve_limit": -1}, "reason": "wider"}`
	})
	if out, err := e.Reflect(ctx, "acme", "u1", "s1"); err != nil || out != lifecycle.ProposalRejected {
		t.Fatalf("bad proposal: %q, %v", out, err)
	}
	if got := overrides(t, docs); got != "" {
		t.Fatalf("a rejected proposal wrote %s", got)
	}
	if model.Calls(llmtest.StepReflect) != 1 {
		t.Fatalf("reflect calls %d", model.Calls(llmtest.StepReflect))
	}
}

// A reflection whose model call fails gives its claim back: the redelivery
// reflects, once, and not again after that. SPEC B5.
func TestFailedReflectionIsRetried(t *testing.T) {
	ctx := context.Background()
	model := llmtest.NewModel(t)
	docs, e := modelEvolver(t, model, 20, chat)
	model.SetAnswer(llmtest.StepReflect, func(string) string { return `{"changes": {"recent_days": 9}, "reason": "wider"}` })
	unavailable := func(on bool) {
		status := 0 // answers again
		if on {
			status = http.StatusServiceUnavailable
		}
		model.SetStatus(status)
	}
	for _, fail := range []func(bool){model.SetDown, unavailable} {
		fail(true)
		if out, err := e.Reflect(ctx, "acme", "u1", "s1"); err == nil {
			t.Fatalf("a failed model call: %q, no error", out)
		}
		fail(false)
	}
	if got := overrides(t, docs); got != "" {
		t.Fatalf("failed reflections wrote %s", got)
	}
	if out, err := e.Reflect(ctx, "acme", "u1", "s1"); err != nil || out != lifecycle.ProposalApplied {
		t.Fatalf("the retry: %q, %v", out, err)
	}
	if got := overrides(t, docs); got != `{"recent_days":9}` {
		t.Fatalf("overrides %s", got)
	}
	if out, err := e.Reflect(ctx, "acme", "u1", "s1"); err != nil || out != lifecycle.EvolutionNotDue {
		t.Fatalf("a redelivery after success reflected again: %q, %v", out, err)
	}
	if n := model.Calls(llmtest.StepReflect); n != 3 {
		t.Fatalf("%d reflect calls, want 2 failed and 1 good", n)
	}
}

// A reply the reflection cannot use gives way to the rules' proposal, like
// every model step's: asking again would likely be as bad.
func TestUnusableReflectionFallsBackToTheRules(t *testing.T) {
	model := llmtest.NewModel(t)
	model.SetInvalidJSON(true)
	docs, e := modelEvolver(t, model, 20, func(i int) string { return fmt.Sprintf("Like last time, use report_%d.csv.", i) })
	if out, err := e.Reflect(context.Background(), "acme", "u1", "s1"); err != nil || out != lifecycle.ProposalApplied {
		t.Fatalf("Reflect = %q, %v", out, err)
	}
	if got := overrides(t, docs); got != `{"recent_days":6}` || model.Calls(llmtest.StepReflect) != 1 {
		t.Fatalf("overrides %s after %d model calls: want the rules' proposal", got, model.Calls(llmtest.StepReflect))
	}
}

// sessionMessages are user messages with texts, a second apart.
func sessionMessages(texts ...string) []session.Message {
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	out := make([]session.Message, len(texts))
	for i, text := range texts {
		out[i] = session.Message{EventID: fmt.Sprintf("e%02d", i), Role: events.RoleUser, Text: text, TS: t0.Add(time.Duration(i) * time.Second)}
	}
	return out
}
