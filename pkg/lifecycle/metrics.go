package lifecycle

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics counts what the lifecycle steps did. A nil *Metrics counts nothing.
type Metrics struct {
	compressions *prometheus.CounterVec
	summaries    *prometheus.CounterVec
	proposals    *prometheus.CounterVec
}

// NewMetrics registers the lifecycle counters with reg (a collector registered
// before, by another component of the process, is reused):
// agentmem_longterm_compressions_total{outcome} (compressed, rejected, skipped,
// failed), agentmem_session_summaries_total{outcome} (summarized, emergency,
// failed), agentmem_policy_proposals_total{outcome} (applied, rejected, empty).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	c, err := counter(reg, "agentmem_longterm_compressions_total", "Long-term compressions of MEMORY.md by outcome (SPEC B4).")
	if err != nil {
		return nil, err
	}
	s, err := counter(reg, "agentmem_session_summaries_total", "Session summaries by outcome; emergency: the oldest half dropped (SPEC B2).")
	if err != nil {
		return nil, err
	}
	p, err := counter(reg, "agentmem_policy_proposals_total", "Policy evolution proposals by outcome (SPEC B5).")
	if err != nil {
		return nil, err
	}
	return &Metrics{compressions: c, summaries: s, proposals: p}, nil
}

func counter(reg prometheus.Registerer, name, help string) (*prometheus.CounterVec, error) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{"outcome"})
	if reg == nil {
		return c, nil
	}
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(*prometheus.CounterVec); ok {
				return existing, nil
			}
		}
		return nil, err
	}
	return c, nil
}

func (m *Metrics) compression(outcome string) {
	if m != nil {
		m.compressions.WithLabelValues(outcome).Inc()
	}
}

func (m *Metrics) summary(outcome string) {
	if m != nil {
		m.summaries.WithLabelValues(outcome).Inc()
	}
}

func (m *Metrics) proposal(outcome string) {
	if m != nil {
		m.proposals.WithLabelValues(outcome).Inc()
	}
}
