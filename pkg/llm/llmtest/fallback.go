package llmtest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentmem/agentmem/pkg/llm"
	"github.com/agentmem/agentmem/pkg/obs"
)

// Unusable is one of the Model's switches for a reply no step can use.
type Unusable struct {
	Name string
	set  func(*Model)
}

// UnusableReplies are text that is not JSON, and JSON of no step's schema.
var UnusableReplies = []Unusable{
	{"invalid JSON", func(m *Model) { m.SetInvalidJSON(true) }},
	{"wrong schema", func(m *Model) { m.SetWrongSchema(true) }},
}

// UsableReply leaves the Model answering every step well: the control case
// beside UnusableReplies, started and counted the same way.
var UsableReply = Unusable{"valid reply", func(*Model) {}}

// Start starts a Model answering so and returns a client of it, without
// retries, whose calls are counted in a registry of its own; fallbacks reads
// agentmem_llm_calls_total{outcome="fallback"} from it, per step.
func (u Unusable) Start(t testing.TB) (client *llm.Client, fallbacks func() map[string]float64) {
	t.Helper()
	m := NewModel(t)
	u.set(m)
	reg := prometheus.NewRegistry()
	metrics, err := obs.NewLLMMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	client, err = llm.New(llm.Config{BaseURL: m.URL(), Model: "fake", MaxRetries: -1, Observer: metrics}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return client, func() map[string]float64 {
		n, err := obs.LLMOutcomeCounts(reg, llm.OutcomeFallback)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
}
