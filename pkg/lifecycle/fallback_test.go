package lifecycle_test

import (
	"context"
	"fmt"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/agentmem/agentmem/pkg/docstore/docstoretest"
	"github.com/agentmem/agentmem/pkg/lifecycle"
	"github.com/agentmem/agentmem/pkg/llm/llmtest"
	"github.com/agentmem/agentmem/pkg/policy"
	"github.com/agentmem/agentmem/pkg/session"
)

// SPEC C9: summarize, compress and reflect answer with their offline twin on a
// reply that is not JSON or not of the schema (a summary without "summary"),
// mark it rules_fallback, log it once and count it once; none fails (which the
// extractor would dead-letter).
func TestLifecycleStepsFallBackOnUnusableReplies(t *testing.T) {
	ctx := context.Background()
	for _, sw := range llmtest.UnusableReplies {
		t.Run(sw.Name, func(t *testing.T) {
			client, fallbacks := sw.Start(t)
			core, logs := observer.New(zapcore.WarnLevel)
			logged := func(step string) int {
				return logs.FilterField(zap.String("step", step)).FilterField(zap.String("processed_by", lifecycle.ByRulesFallback)).Len()
			}

			// summarize
			s := sessionRig(t, 30, chat)
			ss, err := lifecycle.NewSessionSummaries(lifecycle.SessionSummaryConfig{}, s, lifecycle.LLMSessionSummarizer{Client: client}, nil, zap.New(core))
			if err != nil {
				t.Fatal(err)
			}
			if out, err := ss.Summarize(ctx, "acme", "u1", "s1", "due-1"); err != nil || out != lifecycle.SummaryWritten {
				t.Fatalf("Summarize = %q, %v; want the offline summary written", out, err)
			}
			st, err := s.Get(ctx, "acme", "u1", "s1")
			if err != nil {
				t.Fatal(err)
			}
			sum, _, err := s.GetSummary(ctx, "acme", "u1", "s1")
			if err != nil {
				t.Fatal(err)
			}
			if want := lifecycle.SummarizeExtractive("", st.Recent[:26], 0); sum.Text != want || sum.By != session.SummaryByRulesFallback || sum.Messages != 26 {
				t.Errorf("summary by %q of %d messages:\n%s\nwant the offline summary of 26 by rules_fallback:\n%s", sum.By, sum.Messages, sum.Text, want)
			}

			// compress
			clk := docstoretest.NewClock()
			docs := fsStore(t, clk)
			duplicated(t, docs, clk)
			p := policy.Defaults()
			p.LongTermCompressCharThreshold = 100
			c, err := lifecycle.NewCompactor(lifecycle.CompactorConfig{Policy: p, Now: clk.Now}, docs, lifecycle.LLMCompressor{Client: client}, nil, zap.New(core))
			if err != nil {
				t.Fatal(err)
			}
			if rep, err := c.CompressNow(ctx, ns, false); err != nil || !rep.Compressed || rep.ProcessedBy != lifecycle.ByRulesFallback {
				t.Errorf("CompressNow = %+v, %v; want compressed by rules_fallback", rep, err)
			}

			// reflect
			rs := sessionRig(t, 20, func(i int) string { return fmt.Sprintf("Like last time, use report_%d.csv.", i) })
			rdocs := fsStore(t, docstoretest.NewClock())
			base := policy.Defaults()
			base.EvolutionEnabled = true
			e, err := lifecycle.NewEvolver(lifecycle.EvolverConfig{Base: base}, rdocs, rs, lifecycle.LLMReflector{Client: client}, nil, zap.New(core))
			if err != nil {
				t.Fatal(err)
			}
			if out, err := e.Reflect(ctx, "acme", "u1", "s1"); err != nil || out != lifecycle.ProposalApplied {
				t.Errorf("Reflect = %q, %v; want the rules' proposal applied", out, err)
			}
			if got := overrides(t, rdocs); got != `{"recent_days":6}` {
				t.Errorf("overrides %s, want the rules' proposal", got)
			}

			for _, step := range []string{lifecycle.StepSummarize, lifecycle.StepCompress, lifecycle.StepReflect} {
				if n := fallbacks()[step]; n != 1 {
					t.Errorf("%s: agentmem_llm_calls_total{outcome=\"fallback\"} = %v, want 1", step, n)
				}
				if n := logged(step); n != 1 {
					t.Errorf("%s: %d fallback warnings, want 1", step, n)
				}
			}
		})
	}
}
