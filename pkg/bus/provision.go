package bus

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmem/agentmem/events"
)

// Stream defaults.
const (
	DefaultStream          = "AGENTMEM"
	DefaultDLQStream       = "AGENTMEM_DLQ"
	DefaultDuplicateWindow = 2 * time.Minute
)

// StreamConfig configures the event stream and the dead-letter stream.
type StreamConfig struct {
	// Name of the event stream (subjects mem.>); default "AGENTMEM".
	Name string
	// MaxAge bounds how long events are kept; 0 keeps them forever.
	MaxAge time.Duration
	// DuplicateWindow is how long JetStream remembers Nats-Msg-Id values to drop
	// duplicate publishes; default 2m. Both streams use it.
	DuplicateWindow time.Duration
	// DLQName of the dead-letter stream (subjects memdlq.>); default "AGENTMEM_DLQ".
	DLQName string
	// DLQMaxAge bounds how long dead letters are kept; 0 (the default) keeps them
	// until someone looks at them.
	DLQMaxAge time.Duration
}

func (c StreamConfig) withDefaults() StreamConfig {
	if c.Name == "" {
		c.Name = DefaultStream
	}
	if c.DLQName == "" {
		c.DLQName = DefaultDLQStream
	}
	if c.DuplicateWindow == 0 {
		c.DuplicateWindow = DefaultDuplicateWindow
	}
	return c
}

// Validate reports configuration errors of c after defaults are applied.
func (c StreamConfig) Validate() error {
	c = c.withDefaults()
	for _, n := range []struct{ field, name string }{{"Name", c.Name}, {"DLQName", c.DLQName}} {
		if err := events.ValidateID("stream "+n.field, n.name); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
		}
	}
	if c.Name == c.DLQName {
		return fmt.Errorf("%w: stream Name and DLQName are both %q", ErrInvalidConfig, c.Name)
	}
	if c.MaxAge < 0 || c.DLQMaxAge < 0 || c.DuplicateWindow < 0 {
		return fmt.Errorf("%w: stream MaxAge, DLQMaxAge and DuplicateWindow must not be negative", ErrInvalidConfig)
	}
	// nats-server rejects a duplicate window longer than the max age.
	if c.MaxAge > 0 && c.DuplicateWindow > c.MaxAge {
		return fmt.Errorf("%w: stream DuplicateWindow %s exceeds MaxAge %s", ErrInvalidConfig, c.DuplicateWindow, c.MaxAge)
	}
	if c.DLQMaxAge > 0 && c.DuplicateWindow > c.DLQMaxAge {
		return fmt.Errorf("%w: stream DuplicateWindow %s exceeds DLQMaxAge %s", ErrInvalidConfig, c.DuplicateWindow, c.DLQMaxAge)
	}
	return nil
}

// ProvisionStreams creates or updates the event stream (mem.>) and the dead-letter
// stream (memdlq.>), both on file storage with the duplicate window, so that a
// publish carrying a Nats-Msg-Id already seen within the window is stored once.
// It is idempotent: every binary runs it at start-up. The replica count is js's
// (WithReplicas).
func ProvisionStreams(ctx context.Context, js jetstream.JetStream, cfg StreamConfig) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	cfg = cfg.withDefaults()
	streams := []jetstream.StreamConfig{{
		Name:        cfg.Name,
		Description: "agentmem events",
		Subjects:    []string{events.StreamSubjects},
		Storage:     jetstream.FileStorage,
		MaxAge:      cfg.MaxAge,
		Duplicates:  cfg.DuplicateWindow,
	}, {
		Name:        cfg.DLQName,
		Description: "agentmem dead letters",
		Subjects:    []string{events.DLQSubjects},
		Storage:     jetstream.FileStorage,
		MaxAge:      cfg.DLQMaxAge,
		Duplicates:  cfg.DuplicateWindow,
	}}
	for _, sc := range streams {
		if _, err := js.CreateOrUpdateStream(ctx, sc); err != nil {
			return fmt.Errorf("%w: stream %s: %w", ErrProvision, sc.Name, err)
		}
	}
	return nil
}

// ConsumerSpec is a durable pull consumer with explicit acks that delivers the
// stream from its start.
//
// nats-server's rules, checked by Validate before anything is sent:
//   - BackOff[i] is the ack deadline of delivery i+1 (the last entry repeats), and it
//     replaces AckWait: the server silently sets AckWait = BackOff[0]. A spec with
//     both set to different values is rejected rather than silently changed.
//   - BackOff applies to ack timeouts only; an explicit Nak is redelivered at once.
//
// MaxDeliver is enforced by the Router (RouterConfig.MaxDeliver), not by the
// server: a server that runs out of deliveries drops the message and only says so
// in a core-NATS advisory, which a busy or absent subscriber misses (a graceful
// stop once lost 126 messages that way). The durable is created with unlimited
// deliveries, and the Router dead-letters a message delivered more than MaxDeliver
// times before its handler sees it.
type ConsumerSpec struct {
	// Durable is the consumer name; stable, since KEDA scales on it.
	Durable string
	// FilterSubjects selects the subjects delivered; at least one.
	FilterSubjects []string
	// AckWait is how long a delivery may go unacknowledged before redelivery; 0 uses
	// BackOff[0], or the server default of 30s without BackOff.
	AckWait time.Duration
	// MaxDeliver is how many deliveries a message gets before the Router
	// dead-letters it (see above); 0 or -1 is unlimited.
	MaxDeliver int
	// BackOff lists ack deadlines per delivery (see above).
	BackOff []time.Duration
	// MaxAckPending caps unacknowledged deliveries across all replicas; 0 uses the
	// server default (1000).
	MaxAckPending int
	// FilterOnClient has the server deliver the whole stream and the Subscriber
	// ack each message outside FilterSubjects at once, without handing it out. It
	// pays for a consumer that reads most of the stream (ingest: nearly every
	// event is an observation) and often lags behind it: nats-server finds a
	// wildcard-filtered consumer's next message by matching the filter against
	// every subject of the message block, once per delivery, which cost more
	// (13% of the CPU of a pipeline run, BenchmarkBatchWorker) than delivering and
	// acking the few other events. The durable's pending counts then include
	// those events until they are skipped.
	FilterOnClient bool
	// ClaimUnrouted, with FilterOnClient, also hands the Router every message
	// whose subject no worker's filter matches (Routed is false: a wrong token
	// count or an unknown kind, "mem.acme.obs.u1", "mem.acme.obs.u1.s1.extra"),
	// so that it is dead-lettered with the reason instead of skipped: the stream
	// (mem.>) stores it, and no other consumer is ever delivered it. Exactly one
	// worker claims them (ingest, which reads the whole stream anyway), so each is
	// dead-lettered once.
	ClaimUnrouted bool
}

// Validate reports specs nats-server would reject or silently change.
func (s ConsumerSpec) Validate() error {
	if err := events.ValidateID("consumer Durable", s.Durable); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if len(s.FilterSubjects) == 0 {
		return fmt.Errorf("%w: consumer %s has no FilterSubjects", ErrInvalidConfig, s.Durable)
	}
	for _, f := range s.FilterSubjects {
		if f == "" || strings.ContainsAny(f, " \t\r\n") || slices.Contains(strings.Split(f, "."), "") {
			return fmt.Errorf("%w: consumer %s: filter subject %q is not a valid subject", ErrInvalidConfig, s.Durable, f)
		}
	}
	if s.ClaimUnrouted && !s.FilterOnClient {
		return fmt.Errorf("%w: consumer %s: ClaimUnrouted needs FilterOnClient (a server-side filter never delivers unrouted subjects)", ErrInvalidConfig, s.Durable)
	}
	if s.AckWait < 0 {
		return fmt.Errorf("%w: consumer %s: AckWait %s is negative", ErrInvalidConfig, s.Durable, s.AckWait)
	}
	for i, b := range s.BackOff {
		if b <= 0 {
			return fmt.Errorf("%w: consumer %s: BackOff[%d] is %s, want > 0", ErrInvalidConfig, s.Durable, i, b)
		}
	}
	if len(s.BackOff) > 0 && s.AckWait != 0 && s.AckWait != s.BackOff[0] {
		return fmt.Errorf("%w: consumer %s: AckWait %s differs from BackOff[0] %s; nats-server would replace AckWait with BackOff[0]",
			ErrInvalidConfig, s.Durable, s.AckWait, s.BackOff[0])
	}
	if s.MaxDeliver < -1 {
		return fmt.Errorf("%w: consumer %s: MaxDeliver is %d, want -1, 0 (unlimited) or > 0", ErrInvalidConfig, s.Durable, s.MaxDeliver)
	}
	if s.MaxAckPending < 0 {
		return fmt.Errorf("%w: consumer %s: MaxAckPending %d is negative", ErrInvalidConfig, s.Durable, s.MaxAckPending)
	}
	return nil
}

// minAckDeadline is the shortest time the server waits for an ack of any delivery.
func (s ConsumerSpec) minAckDeadline() time.Duration {
	switch {
	case len(s.BackOff) > 0:
		return slices.Min(s.BackOff)
	case s.AckWait > 0:
		return s.AckWait
	default:
		return 30 * time.Second // nats-server's JsAckWaitDefault
	}
}

func (s ConsumerSpec) jetstreamConfig() jetstream.ConsumerConfig {
	filters := s.FilterSubjects
	if s.FilterOnClient {
		filters = nil
	}
	return jetstream.ConsumerConfig{
		Durable:        s.Durable,
		FilterSubjects: filters,
		AckPolicy:      jetstream.AckExplicitPolicy,
		DeliverPolicy:  jetstream.DeliverAllPolicy,
		AckWait:        s.AckWait,
		MaxDeliver:     -1, // the Router enforces s.MaxDeliver
		BackOff:        s.BackOff,
		MaxAckPending:  s.MaxAckPending,
	}
}

// ProvisionConsumer validates spec and creates or updates the durable on stream.
func ProvisionConsumer(ctx context.Context, js jetstream.JetStream, stream string, spec ConsumerSpec) (jetstream.Consumer, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	c, err := js.CreateOrUpdateConsumer(ctx, stream, spec.jetstreamConfig())
	if err != nil {
		return nil, fmt.Errorf("%w: consumer %s on stream %s: %w", ErrProvision, spec.Durable, stream, err)
	}
	return c, nil
}

// Worker names; each has one durable consumer and one dead-letter subject.
const (
	WorkerIngest       = "ingest"
	WorkerExtractor    = "extractor"
	WorkerConsolidator = "consolidator"
)

// workerFilters are the subjects each worker consumes.
var workerFilters = map[string][]string{
	WorkerIngest:       {events.FilterObservations, events.FilterWrites},
	WorkerExtractor:    {events.FilterEnded, events.FilterSummaryDue},
	WorkerConsolidator: {events.FilterHits, events.FilterWritten, events.FilterConsolidate},
}

// filteredOnClient are the workers whose consumer sets FilterOnClient: ingest
// reads nearly every event. The others read a small share of the stream, and
// skipping every observation on the client would cost them far more.
var filteredOnClient = map[string]bool{WorkerIngest: true}

// unroutedOwner is the worker whose consumer claims the unrouted subjects (see
// ConsumerSpec.ClaimUnrouted); it filters on the client.
const unroutedOwner = WorkerIngest

// routedFilters are the filters of every worker: a subject matching none of them
// is delivered to no worker by its filter.
var routedFilters = slices.Concat(workerFilters[WorkerIngest], workerFilters[WorkerExtractor], workerFilters[WorkerConsolidator])

// Routed reports whether some worker's filter matches subject.
func Routed(subject string) bool {
	return slices.ContainsFunc(routedFilters, func(f string) bool { return server.SubjectMatchesFilter(subject, f) })
}

// ConsumerDefaults are the delivery settings shared by the worker consumers. Zero
// fields take the defaults: AckWait 30s, MaxDeliver 5, BackOff [30s 1m 5m].
//
// BackOff starts at AckWait because nats-server uses BackOff[0] as the first ack
// deadline (a shorter first entry would redeliver any handler slower than it to
// another replica while it still runs). The growing deadlines space out the
// redeliveries of a message whose handler keeps crashing the worker. Failures a
// handler reports are retried in-process by the Router, not by redelivery.
type ConsumerDefaults struct {
	AckWait       time.Duration
	MaxDeliver    int
	BackOff       []time.Duration
	MaxAckPending int
}

func (d ConsumerDefaults) withDefaults() ConsumerDefaults {
	if d.AckWait == 0 {
		d.AckWait = 30 * time.Second
	}
	if d.MaxDeliver == 0 {
		d.MaxDeliver = 5
	}
	if d.BackOff == nil {
		d.BackOff = []time.Duration{d.AckWait, 2 * d.AckWait, 10 * d.AckWait}
	}
	return d
}

// WorkerConsumer returns the durable consumer of a worker ("ingest", "extractor",
// "consolidator"): durable "agentmem-<worker>" with the worker's filter subjects
// (applied by the Subscriber for ingest, see FilterOnClient), explicit acks,
// delivering the whole stream. An unknown worker gets a spec without
// filter subjects, which Validate (and so ProvisionConsumer) rejects.
func WorkerConsumer(worker string, cfg ConsumerDefaults) ConsumerSpec {
	cfg = cfg.withDefaults()
	return ConsumerSpec{
		Durable:        "agentmem-" + worker,
		FilterSubjects: slices.Clone(workerFilters[worker]),
		AckWait:        cfg.AckWait,
		MaxDeliver:     cfg.MaxDeliver,
		BackOff:        slices.Clone(cfg.BackOff),
		MaxAckPending:  cfg.MaxAckPending,
		FilterOnClient: filteredOnClient[worker],
		ClaimUnrouted:  worker == unroutedOwner,
	}
}
