package processor

import (
	"context"
	"reflect"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/agentmem/agentmem/pkg/llm/llmtest"
	"github.com/agentmem/agentmem/pkg/records"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// Each processor step answers with its rule-based twin's result, marked
// rules_fallback where the result has room for it, logs it once and counts it
// once as outcome "fallback", on a reply that is not JSON or not of the schema.
func TestEveryProcessorStepFallsBackOnUnusableReplies(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)
	a := episode(testID(1), "user", "c1", "I live in Berlin with my wife.", t0)
	b := episode(testID(2), "user", "c2", "I live in Berlin with my wife and our cat.", t0.Add(time.Hour))
	remember := records.Observation{Role: "user", Text: "Remember: my locker code is 4411.", TS: t0, ChatID: "c1"}
	chatter := records.Observation{Role: "user", Text: "I moved to Berlin last year", TS: t0, ChatID: "c2"}
	marked := func(ep records.Episode) records.Episode {
		ep.ProcessedBy = records.ProcessedByRulesFallback
		return ep
	}
	markedRewrite := func(r Rewrite) Rewrite {
		r.ProcessedBy = records.ProcessedByRulesFallback
		return r
	}
	for _, sw := range llmtest.UnusableReplies {
		t.Run(sw.Name, func(t *testing.T) {
			client, fallbacks := sw.Start(t)
			core, logs := observer.New(zapcore.WarnLevel)
			cfg := LLMConfig{Client: client}
			decider, _ := NewLLMDecider(cfg, zap.New(core))
			semantic, _ := NewLLMSemanticWriter(cfg, zap.New(core))
			merger, _ := NewLLMMerger(cfg, zap.New(core))
			separator, _ := NewLLMSeparator(cfg, zap.New(core))
			recon, _ := NewLLMReconsolidator(cfg, zap.New(core))
			rules := NewRuleDecider()
			for _, c := range []struct {
				step      string
				got, want func() (any, error)
			}{
				{"decide", func() (any, error) { return decider.Decide(ctx, remember) }, func() (any, error) {
					ep, err := rules.Decide(ctx, remember)
					return marked(ep), err
				}},
				{"decide_batch", func() (any, error) { return decider.DecideBatch(ctx, []records.Observation{remember, chatter}) }, func() (any, error) {
					e1, _ := rules.Decide(ctx, remember)
					e2, err := rules.Decide(ctx, chatter)
					return []records.Episode{marked(e1), marked(e2)}, err
				}},
				{"semantic", func() (any, error) { return semantic.Facts(ctx, []vectorstore.Record{a}, nil) }, func() (any, error) {
					return []records.Fact{{Fact: "User lives in Berlin with their wife.", SourceChatID: "c1", FirstSeen: t0, ProcessedBy: records.ProcessedByRulesFallback}}, nil
				}},
				{"merge", func() (any, error) { return merger.Merge(ctx, a, b) }, func() (any, error) {
					r, err := NewRuleMerger().Merge(ctx, a, b)
					return markedRewrite(r), err
				}},
				{"separate", func() (any, error) {
					x, y, err := separator.Separate(ctx, a, b)
					return [2]Rewrite{x, y}, err
				}, func() (any, error) {
					x, y, err := NewRuleSeparator().Separate(ctx, a, b)
					return [2]Rewrite{markedRewrite(x), markedRewrite(y)}, err
				}},
				{"reconsolidate", func() (any, error) { return recon.Reconsolidate(ctx, a, "planning a trip") }, func() (any, error) {
					r, err := NewRuleReconsolidator().Reconsolidate(ctx, a, "planning a trip")
					return markedRewrite(r), err
				}},
			} {
				logs.TakeAll()
				got, err := c.got()
				if err != nil {
					t.Fatalf("%s: %v; want the rule-based result, no error", c.step, err)
				}
				want, err := c.want()
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%s: got %+v\nwant the rule-based %+v", c.step, got, want)
				}
				if n := fallbacks()[c.step]; n != 1 {
					t.Errorf("%s: agentmem_llm_calls_total{outcome=\"fallback\"} = %v, want 1", c.step, n)
				}
				if entries := logs.FilterMessage("LLM reply unusable, using the rule-based default").All(); len(entries) != 1 || entries[0].ContextMap()["processor"] != c.step {
					t.Errorf("%s: want one fallback warning, got %d", c.step, len(entries))
				}
			}
		})
	}
}
