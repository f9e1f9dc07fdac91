package obs

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// EndpointMetrics are the metrics of the model endpoints' circuit breakers:
//
//	agentmem_model_available{endpoint}            1 while the circuit is closed, else 0
//	agentmem_model_config_errors_total{endpoint}  the endpoint refused the configuration
//	                                              (401, 403, 404): its workers stopped; alert on it
//
// endpoint is the endpoint's role ("llm", "embedder"), never its URL.
type EndpointMetrics struct {
	available    *prometheus.GaugeVec
	configErrors *prometheus.CounterVec
}

// NewEndpointMetrics registers (or reuses) the endpoint metrics in reg.
func NewEndpointMetrics(reg prometheus.Registerer) (*EndpointMetrics, error) {
	if reg == nil {
		return nil, fmt.Errorf("%w: nil prometheus registerer", ErrInvalidConfig)
	}
	available, err := Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "agentmem",
		Name:      "model_available",
		Help:      "1 while the model endpoint's circuit breaker is closed, 0 while it is open, probing or misconfigured.",
	}, []string{"endpoint"}))
	if err != nil {
		return nil, err
	}
	configErrors, err := Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "agentmem",
		Name:      "model_config_errors_total",
		Help:      "Times the model endpoint refused the configuration (401, 403, 404) and the workers using it stopped.",
	}, []string{"endpoint"}))
	if err != nil {
		return nil, err
	}
	return &EndpointMetrics{available: available, configErrors: configErrors}, nil
}

// Watch exports endpoint's series from the start: available, no configuration
// error yet. increase() only sees a counter's first increment against an earlier
// sample, so a counter born at 1 would never fire its alert.
func (m *EndpointMetrics) Watch(endpoint string) {
	m.Available(endpoint, true)
	m.configErrors.WithLabelValues(endpoint)
}

// Available sets whether endpoint's circuit is closed.
func (m *EndpointMetrics) Available(endpoint string, up bool) {
	v := 0.0
	if up {
		v = 1
	}
	m.available.WithLabelValues(endpoint).Set(v)
}

// ConfigError counts one configuration error of endpoint.
func (m *EndpointMetrics) ConfigError(endpoint string) {
	m.configErrors.WithLabelValues(endpoint).Inc()
}
