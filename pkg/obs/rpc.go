package obs

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// RPCMetrics time the requests a request/reply service serves and count those it
// refuses to serve.
type RPCMetrics struct {
	refusedReplies *prometheus.CounterVec
	duration       *prometheus.HistogramVec
}

// rpcBuckets spread around the context target (docs/operations.md
// "Monitoring"): a millisecond to ten seconds, a remote model's round trip
// included.
var rpcBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// NewRPCMetrics registers (or reuses) in reg:
//
//	agentmem_rpc_refused_replies_total{endpoint}
//	agentmem_rpc_duration_seconds{endpoint}
func NewRPCMetrics(reg prometheus.Registerer) (*RPCMetrics, error) {
	if reg == nil {
		return nil, fmt.Errorf("%w: nil prometheus registerer", ErrInvalidConfig)
	}
	refused, err := Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "agentmem",
		Name:      "rpc_refused_replies_total",
		Help:      "Requests not served because their reply subject is outside the requesting tenant's inbox, by endpoint.",
	}, []string{"endpoint"}))
	if err != nil {
		return nil, err
	}
	duration, err := Register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "agentmem",
		Name:      "rpc_duration_seconds",
		Help:      "Time from receiving a request to sending its reply (an error reply too), by endpoint.",
		Buckets:   rpcBuckets,
	}, []string{"endpoint"}))
	if err != nil {
		return nil, err
	}
	return &RPCMetrics{refusedReplies: refused, duration: duration}, nil
}

// Served records one request to endpoint answered took after it was received.
func (m *RPCMetrics) Served(endpoint string, took time.Duration) {
	m.duration.WithLabelValues(endpoint).Observe(took.Seconds())
}

// RefusedReply counts one request to endpoint refused for its reply subject.
func (m *RPCMetrics) RefusedReply(endpoint string) {
	m.refusedReplies.WithLabelValues(endpoint).Inc()
}
