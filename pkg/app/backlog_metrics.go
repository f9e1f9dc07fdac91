package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/agentmem/agentmem/pkg/bus"
)

// streamWorkers are the components that consume the event stream through a
// durable consumer of their own.
var streamWorkers = []string{bus.WorkerIngest, bus.WorkerExtractor, bus.WorkerConsolidator}

// backlogScrapeTimeout bounds the server round trip of one scrape.
const backlogScrapeTimeout = 2 * time.Second

// backlogCollector exports agentmem_consumer_pending{worker}: how many messages
// the worker's durable consumer has still to deliver or see acknowledged
// (bus.Backlog), read from the server at each scrape. The durable is shared, so
// every replica of the worker reports the same figure: the consumer lag to
// alert on. A scrape that cannot read it reports no sample (and logs why).
type backlogCollector struct {
	js      jetstream.JetStream
	durable string
	desc    *prometheus.Desc
	logger  *zap.Logger
}

// registerBacklog registers the backlog of worker's durable in reg; registering
// it again is a no-op.
func registerBacklog(reg prometheus.Registerer, js jetstream.JetStream, worker string, logger *zap.Logger) error {
	c := &backlogCollector{
		js:      js,
		durable: bus.WorkerConsumer(worker, bus.ConsumerDefaults{}).Durable,
		desc: prometheus.NewDesc("agentmem_consumer_pending",
			"Messages the worker's durable consumer has still to deliver or see acknowledged (the consumer lag).",
			nil, prometheus.Labels{"worker": worker}),
		logger: logger,
	}
	var are prometheus.AlreadyRegisteredError
	if err := reg.Register(c); err != nil && !errors.As(err, &are) {
		return fmt.Errorf("app: register the backlog of %s: %w", worker, err)
	}
	return nil
}

func (c *backlogCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *backlogCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), backlogScrapeTimeout)
	defer cancel()
	n, err := bus.Backlog(ctx, c.js, bus.DefaultStream, c.durable)
	if err != nil {
		c.logger.Warn("metrics: cannot read the consumer backlog", zap.String("durable", c.durable), zap.Error(err))
		return
	}
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n))
}
