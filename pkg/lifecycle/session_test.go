package lifecycle_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"
	"pgregory.net/rapid"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/bus/bustest"
	"github.com/agentmem/agentmem/pkg/docstore/docstoretest"
	"github.com/agentmem/agentmem/pkg/lifecycle"
	"github.com/agentmem/agentmem/pkg/llm/llmtest"
	"github.com/agentmem/agentmem/pkg/policy"
	"github.com/agentmem/agentmem/pkg/session"
)

// sessionRig is a session store on a real embedded NATS server with one session
// of n messages, a second apart.
func sessionRig(t *testing.T, n int, text func(i int) string) *session.Store {
	t.Helper()
	_, _, js := bustest.Provisioned(t)
	s, err := session.New(context.Background(), session.Config{}, js, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	for i := range n {
		env := events.New(events.TypeObservation, "acme", "u1", "bot", "s1")
		env.TS = t0.Add(time.Duration(i) * time.Second)
		role := events.RoleUser
		if i%2 == 1 {
			role = events.RoleAssistant
		}
		env.Observation = &events.Observation{Role: role, Text: text(i)}
		if _, _, err := s.Apply(context.Background(), env); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func chat(i int) string {
	if i%5 == 0 {
		return fmt.Sprintf("Message %d: we decided to ship report_%d.csv on 2026-12-0%d.", i, i, i%9+1)
	}
	return fmt.Sprintf("message %d, nothing much to say here", i)
}

func summaries(t *testing.T, s *session.Store, cfg lifecycle.SessionSummaryConfig, model lifecycle.SessionSummarizer, reg prometheus.Registerer) *lifecycle.SessionSummaries {
	t.Helper()
	m, err := lifecycle.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	ss, err := lifecycle.NewSessionSummaries(cfg, s, model, m, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	return ss
}

func counted(t *testing.T, reg *prometheus.Registry, name, outcome string) float64 {
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
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" && l.GetValue() == outcome {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// A 30-message session is summarised but for its last keep_count messages; a
// second run (a redelivered summary_due) writes nothing. SPEC B2.
func TestSessionSummaryKeepsLastMessagesAndIsIdempotent(t *testing.T) {
	for _, tc := range []struct {
		name  string
		model func(t *testing.T) lifecycle.SessionSummarizer
		by    string
	}{
		{"rules", func(*testing.T) lifecycle.SessionSummarizer { return nil }, session.SummaryByRules},
		{"llm", func(t *testing.T) lifecycle.SessionSummarizer {
			return lifecycle.LLMSessionSummarizer{Client: modelClient(t, llmtest.NewModel(t))}
		}, session.SummaryByLLM},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s := sessionRig(t, 30, chat)
			reg := prometheus.NewRegistry()
			ss := summaries(t, s, lifecycle.SessionSummaryConfig{}, tc.model(t), reg)
			out, err := ss.Summarize(ctx, "acme", "u1", "s1", "")
			if err != nil || out != lifecycle.SummaryWritten {
				t.Fatalf("Summarize = %q, %v", out, err)
			}
			st, err := s.Get(ctx, "acme", "u1", "s1")
			if err != nil {
				t.Fatal(err)
			}
			sum, rev, err := s.GetSummary(ctx, "acme", "u1", "s1")
			if err != nil {
				t.Fatal(err)
			}
			kept := sum.After(st.Recent)
			if len(kept) != 4 || kept[0].Text != chat(26) || sum.Messages != 26 || sum.FirstEventID != st.Recent[0].EventID || sum.LastEventID != st.Recent[25].EventID || sum.By != tc.by {
				t.Fatalf("summary %+v keeps %d messages", sum, len(kept))
			}
			if !strings.Contains(sum.Text, "report_25.csv") {
				t.Fatalf("summary lost the last summarised decision:\n%s", sum.Text)
			}
			if out, err := ss.Summarize(ctx, "acme", "u1", "s1", ""); err != nil || out != lifecycle.SummaryUnchanged {
				t.Fatalf("second Summarize = %q, %v", out, err)
			}
			if _, rev2, _ := s.GetSummary(ctx, "acme", "u1", "s1"); rev2 != rev {
				t.Fatalf("a redelivery rewrote the summary: revision %d → %d", rev, rev2)
			}
			if got := counted(t, reg, "agentmem_session_summaries_total", "summarized"); got != 1 {
				t.Fatalf("summarized counted %v times", got)
			}
		})
	}
}

// The summary is incremental: the next run gives the model the summary so far
// and only the messages since.
func TestSessionSummaryIsIncremental(t *testing.T) {
	ctx := context.Background()
	_, _, js := bustest.Provisioned(t)
	s, err := session.New(ctx, session.Config{}, js, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	ss := summaries(t, s, lifecycle.SessionSummaryConfig{}, rec, nil)
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	add := func(from, to int) {
		for i := from; i < to; i++ {
			env := events.New(events.TypeObservation, "acme", "u1", "bot", "s1")
			env.TS = t0.Add(time.Duration(i) * time.Second)
			env.Observation = &events.Observation{Role: events.RoleUser, Text: chat(i)}
			if _, _, err := s.Apply(ctx, env); err != nil {
				t.Fatal(err)
			}
		}
	}
	add(0, 21)
	if _, err := ss.Summarize(ctx, "acme", "u1", "s1", ""); err != nil {
		t.Fatal(err)
	}
	add(21, 40)
	if _, err := ss.Summarize(ctx, "acme", "u1", "s1", ""); err != nil {
		t.Fatal(err)
	}
	if len(rec.calls) != 2 || rec.calls[0].n != 17 || rec.calls[1].n != 19 || rec.calls[1].previous != "summary of 17" || rec.calls[1].first != chat(17) {
		t.Fatalf("calls %+v", rec.calls)
	}
}

type recorder struct {
	calls []struct {
		previous, first string
		n               int
	}
	total int
}

func (r *recorder) By() string { return session.SummaryByLLM }

func (r *recorder) SummarizeSession(_ context.Context, previous string, msgs []session.Message) (string, error) {
	r.calls = append(r.calls, struct {
		previous, first string
		n               int
	}{previous, msgs[0].Text, len(msgs)})
	r.total += len(msgs)
	return fmt.Sprintf("summary of %d", r.total), nil
}

// With the model down, a session over the context window loses its oldest half
// (the emergency path, counted); one within it is left for a retry.
func TestSessionSummaryEmergencyWhenTheModelIsDown(t *testing.T) {
	ctx := context.Background()
	m := llmtest.NewModel(t)
	m.SetDown(true)
	model := lifecycle.LLMSessionSummarizer{Client: modelClient(t, m)}

	s := sessionRig(t, 30, chat)
	reg := prometheus.NewRegistry()
	ss := summaries(t, s, lifecycle.SessionSummaryConfig{ContextWindowTokens: 100000}, model, reg)
	if _, err := ss.Summarize(ctx, "acme", "u1", "s1", ""); err == nil {
		t.Fatal("a failed summary within the window reported success")
	}
	if _, _, err := s.GetSummary(ctx, "acme", "u1", "s1"); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("a failed summary wrote something: %v", err)
	}

	ss = summaries(t, s, lifecycle.SessionSummaryConfig{ContextWindowTokens: 100}, model, reg)
	out, err := ss.Summarize(ctx, "acme", "u1", "s1", "due-1")
	if err != nil || out != lifecycle.SummaryEmergency {
		t.Fatalf("Summarize = %q, %v", out, err)
	}
	st, _ := s.Get(ctx, "acme", "u1", "s1")
	sum, _, err := s.GetSummary(ctx, "acme", "u1", "s1")
	if err != nil || sum.By != session.SummaryByEmergency || sum.Messages != 15 || sum.Dropped != 15 || len(sum.After(st.Recent)) != 15 {
		t.Fatalf("emergency summary %+v, %v", sum, err)
	}
	// Its redelivery drops nothing more: the summary was written for it.
	if out, err := ss.Summarize(ctx, "acme", "u1", "s1", "due-1"); err != nil || out != lifecycle.SummaryUnchanged {
		t.Fatalf("redelivered summary_due: %q, %v", out, err)
	}
	if again, _, _ := s.GetSummary(ctx, "acme", "u1", "s1"); again != sum {
		t.Fatalf("a redelivery rewrote the summary: %+v, then %+v", sum, again)
	}
	if counted(t, reg, "agentmem_session_summaries_total", "emergency") != 1 || counted(t, reg, "agentmem_session_summaries_total", "failed") != 1 {
		t.Fatal("emergency and failure not counted once each")
	}
}

// The offline summary is deterministic, bounded, keeps the previous summary's
// lines while they fit, and keeps every sentence with a key token.
func TestSummarizeExtractiveProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		words := rapid.SliceOfN(rapid.SampledFrom([]string{"the", "user", "said", "ok", "report.csv", "2026-11-02", "42", "Alice", "error", "decided", "fine."}), 1, 30)
		var msgs []session.Message
		for i := range rapid.IntRange(0, 6).Draw(t, "messages") {
			msgs = append(msgs, session.Message{Role: events.RoleUser, Text: strings.Join(words.Draw(t, fmt.Sprint("m", i)), " ")})
		}
		prev := rapid.SampledFrom([]string{"", "user: Bob owns invoice 7."}).Draw(t, "previous")
		maxChars := rapid.IntRange(20, 400).Draw(t, "max")
		a := lifecycle.SummarizeExtractive(prev, msgs, maxChars)
		if b := lifecycle.SummarizeExtractive(prev, msgs, maxChars); a != b {
			t.Fatalf("not deterministic: %q vs %q", a, b)
		}
		if n := len([]rune(a)); n > maxChars {
			t.Fatalf("%d runes over the bound %d", n, maxChars)
		}
		if full := lifecycle.SummarizeExtractive(prev, msgs, 1<<20); prev != "" && !strings.HasPrefix(full, prev) {
			t.Fatalf("previous summary dropped: %q", full)
		}
	})
	got := lifecycle.SummarizeExtractive("", []session.Message{{Role: events.RoleUser, Text: "hello there. The build failed with exit code 2. nice weather"}}, 0)
	if got != "user: The build failed with exit code 2." {
		t.Fatalf("got %q", got)
	}
	// A capitalised first word alone is not a name.
	got = lifecycle.SummarizeExtractive("", []session.Message{{Role: events.RoleUser, Text: "Wow, that sounds great! Caroline moved to Paris."}}, 0)
	if got != "user: Caroline moved to Paris." {
		t.Fatalf("got %q", got)
	}
}

// With Policies, the session's policy sets the keep count; a session keeps the
// policy it started with.
func TestSessionSummaryKeepCountFromTheSessionPolicy(t *testing.T) {
	ctx := context.Background()
	s := sessionRig(t, 30, chat)
	docs := fsStore(t, docstoretest.NewClock())
	pols, err := lifecycle.NewPolicies(policy.Defaults(), docs, 16, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lifecycle.SetPolicy(ctx, docs, ns, policy.Defaults(), changes("session_summary_keep_count", "2").Changes); err != nil {
		t.Fatal(err)
	}
	ss := summaries(t, s, lifecycle.SessionSummaryConfig{Policies: pols}, nil, nil)
	if _, err := ss.Summarize(ctx, "acme", "u1", "s1", ""); err != nil {
		t.Fatal(err)
	}
	st, _ := s.Get(ctx, "acme", "u1", "s1")
	sum, _, err := s.GetSummary(ctx, "acme", "u1", "s1")
	if err != nil || len(sum.After(st.Recent)) != 2 {
		t.Fatalf("summary %+v (%v) keeps %d", sum, err, len(sum.After(st.Recent)))
	}
	if _, err := lifecycle.SetPolicy(ctx, docs, ns, policy.Defaults(), changes("session_summary_keep_count", "6").Changes); err != nil {
		t.Fatal(err)
	}
	if got := pols.For(ctx, ns, "s1").SessionSummaryKeepCount; got != 2 {
		t.Fatalf("the running session's keep count changed to %d", got)
	}
	if got := pols.For(ctx, ns, "s2").SessionSummaryKeepCount; got != 6 {
		t.Fatalf("a new session's keep count is %d", got)
	}
}
