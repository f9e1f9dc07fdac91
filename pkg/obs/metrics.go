package obs

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Outcome is how a worker's handler finished with one message.
type Outcome string

// Outcomes, the values of the "outcome" label.
const (
	OutcomeOK         Outcome = "ok"
	OutcomeRetry      Outcome = "retry"
	OutcomeDeadLetter Outcome = "dead_letter"
)

// Metrics is the metric set every message worker exports, labelled with its worker name.
// Several workers may share one registry (agentmem up runs all of them in one process):
// the collectors are registered once and each Metrics is a view for its worker.
type Metrics struct {
	messages    *prometheus.CounterVec
	duration    prometheus.ObserverVec
	deadLetters *prometheus.CounterVec
	// outcomes holds the children of the known outcomes, looked up once: every
	// message is observed, and a label lookup hashes the label values each time.
	outcomes map[Outcome]outcomeMetrics
}

// outcomeMetrics are the series of one outcome.
type outcomeMetrics struct {
	messages prometheus.Counter
	duration prometheus.Observer
}

func (m *Metrics) series(o Outcome) outcomeMetrics {
	return outcomeMetrics{m.messages.WithLabelValues(string(o)), m.duration.WithLabelValues(string(o))}
}

// NewMetrics registers (or reuses, when another worker already registered them) the
// worker metrics in reg:
//
//	agentmem_messages_processed_total{worker,outcome}
//	agentmem_handler_duration_seconds{worker,outcome}
//	agentmem_dead_letters_total{worker,reason}
func NewMetrics(reg prometheus.Registerer, worker string) (*Metrics, error) {
	if reg == nil {
		return nil, fmt.Errorf("%w: nil prometheus registerer", ErrInvalidConfig)
	}
	if worker == "" {
		return nil, fmt.Errorf("%w: empty worker name", ErrInvalidConfig)
	}
	messages, err := Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "agentmem",
		Name:      "messages_processed_total",
		Help:      "Messages handled by a worker, by outcome (ok, retry, dead_letter).",
	}, []string{"worker", "outcome"}))
	if err != nil {
		return nil, err
	}
	duration, err := Register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "agentmem",
		Name:      "handler_duration_seconds",
		Help:      "Time a worker's handler spent on one message, by outcome.",
		Buckets:   prometheus.ExponentialBuckets(0.001, 4, 10), // 1ms .. ~4.4min: LLM calls are slow
	}, []string{"worker", "outcome"}))
	if err != nil {
		return nil, err
	}
	deadLetters, err := Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "agentmem",
		Name:      "dead_letters_total",
		Help:      "Messages a worker published to the dead-letter stream, by reason.",
	}, []string{"worker", "reason"}))
	if err != nil {
		return nil, err
	}
	labels := prometheus.Labels{"worker": worker}
	m := &Metrics{
		messages:    messages.MustCurryWith(labels),
		duration:    duration.MustCurryWith(labels),
		deadLetters: deadLetters.MustCurryWith(labels),
	}
	// Every outcome is exported from the start, so rate() and alerts see zeros, not gaps.
	m.outcomes = make(map[Outcome]outcomeMetrics, 3)
	for _, o := range []Outcome{OutcomeOK, OutcomeRetry, OutcomeDeadLetter} {
		m.outcomes[o] = m.series(o)
	}
	return m, nil
}

// ExportDeadLetterReasons exports the worker's dead-letter series of reasons at
// zero from the start: increase() only sees a counter's first increment against
// an earlier sample, so the first dead letter of a reason would not fire an alert.
func (m *Metrics) ExportDeadLetterReasons(reasons ...string) {
	for _, r := range reasons {
		m.deadLetters.WithLabelValues(r)
	}
}

// Register registers c, or returns the collector already registered under its
// name: the components of one process share the series.
func Register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	err := reg.Register(c)
	if err == nil {
		return c, nil
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	var zero C
	return zero, fmt.Errorf("obs: register metrics: %w", err)
}

// ObserveMessage records one handled message and how long its handler took.
func (m *Metrics) ObserveMessage(outcome Outcome, took time.Duration) {
	om, ok := m.outcomes[outcome]
	if !ok {
		om = m.series(outcome)
	}
	om.messages.Inc()
	om.duration.Observe(took.Seconds())
}

// DeadLetter records one message sent to the dead-letter stream, also as a message
// handled with outcome dead_letter. reason must come from a small fixed set (e.g.
// "malformed", "max_deliveries"): it is a label.
func (m *Metrics) DeadLetter(reason string) {
	m.deadLetters.WithLabelValues(reason).Inc()
	m.outcomes[OutcomeDeadLetter].messages.Inc()
}
