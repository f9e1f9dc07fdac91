package obs

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// RPCMetrics count the requests a request/reply service refuses to serve.
type RPCMetrics struct {
	refusedReplies *prometheus.CounterVec
}

// NewRPCMetrics registers (or reuses) in reg:
//
//	agentmem_rpc_refused_replies_total{endpoint}
func NewRPCMetrics(reg prometheus.Registerer) (*RPCMetrics, error) {
	if reg == nil {
		return nil, fmt.Errorf("%w: nil prometheus registerer", ErrInvalidConfig)
	}
	refused, err := register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "agentmem",
		Name:      "rpc_refused_replies_total",
		Help:      "Requests not served because their reply subject is outside the requesting tenant's inbox, by endpoint.",
	}, []string{"endpoint"}))
	if err != nil {
		return nil, err
	}
	return &RPCMetrics{refusedReplies: refused}, nil
}

// RefusedReply counts one request to endpoint refused for its reply subject.
func (m *RPCMetrics) RefusedReply(endpoint string) {
	m.refusedReplies.WithLabelValues(endpoint).Inc()
}
