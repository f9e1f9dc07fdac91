package obs

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// LLMMetrics counts the calls a process makes to its chat model and the tokens
// they cost, per agentmem step:
//
//	agentmem_llm_calls_total{step,outcome}
//	agentmem_llm_tokens_total{step,kind}   kind: prompt | completion
//
// A call is one HTTP attempt: a call retried after a 503 counts twice, once with
// outcome "unavailable". It implements llm.Observer (by method set: pkg/obs does
// not import pkg/llm).
type LLMMetrics struct {
	calls  *prometheus.CounterVec
	tokens *prometheus.CounterVec
}

// NewLLMMetrics registers (or reuses) the model metrics in reg.
func NewLLMMetrics(reg prometheus.Registerer) (*LLMMetrics, error) {
	if reg == nil {
		return nil, fmt.Errorf("%w: nil prometheus registerer", ErrInvalidConfig)
	}
	calls, err := Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "agentmem",
		Name:      "llm_calls_total",
		Help:      "Chat-model requests, by agentmem step (decide, extract, semantic, ...) and outcome (ok, bad_reply, unavailable, rejected, canceled; fallback: the step's offline twin stood in for the model).",
	}, []string{"step", "outcome"}))
	if err != nil {
		return nil, err
	}
	tokens, err := Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "agentmem",
		Name:      "llm_tokens_total",
		Help:      "Tokens the chat model reported using, by agentmem step and kind (prompt, completion).",
	}, []string{"step", "kind"}))
	if err != nil {
		return nil, err
	}
	return &LLMMetrics{calls: calls, tokens: tokens}, nil
}

// ObserveLLMCall records one attempt.
func (m *LLMMetrics) ObserveLLMCall(step, outcome string, promptTokens, completionTokens int) {
	m.calls.WithLabelValues(step, outcome).Inc()
	if promptTokens > 0 {
		m.tokens.WithLabelValues(step, "prompt").Add(float64(promptTokens))
	}
	if completionTokens > 0 {
		m.tokens.WithLabelValues(step, "completion").Add(float64(completionTokens))
	}
}

// LLMCallCounts gathers agentmem_llm_calls_total from g: calls per step, every
// outcome summed. Steps never called are absent.
func LLMCallCounts(g prometheus.Gatherer) (map[string]float64, error) { return llmCalls(g, "") }

// LLMOutcomeCounts gathers agentmem_llm_calls_total from g for one outcome
// (e.g. "fallback"): count per step. Steps without it are absent.
func LLMOutcomeCounts(g prometheus.Gatherer, outcome string) (map[string]float64, error) {
	return llmCalls(g, outcome)
}

// llmCalls sums agentmem_llm_calls_total per step, of outcome ("" for all).
func llmCalls(g prometheus.Gatherer, outcome string) (map[string]float64, error) {
	families, err := g.Gather()
	if err != nil {
		return nil, fmt.Errorf("obs: gather: %w", err)
	}
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "agentmem_llm_calls_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			step, ok := "", outcome == ""
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "step":
					step = l.GetValue()
				case "outcome":
					ok = ok || l.GetValue() == outcome
				}
			}
			if ok && step != "" {
				out[step] += m.GetCounter().GetValue()
			}
		}
	}
	return out, nil
}
