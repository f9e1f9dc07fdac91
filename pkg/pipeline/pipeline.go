// Package pipeline is the runtime every stream worker (ingest, extractor,
// consolidator) shares: a durable JetStream consumer read through a Watermill Router
// with the project's middleware, dead letters for what cannot be processed (and for
// messages that exhausted their deliveries), metrics and structured logs. A worker
// supplies only a Handler for decoded, validated events.
package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/bus"
	"github.com/agentmem/agentmem/pkg/obs"
)

// Sentinel errors.
var (
	// ErrInvalidConfig is returned for a Config that cannot work.
	ErrInvalidConfig = errors.New("pipeline: invalid config")
	// ErrStopped is returned by Run when a dependency refused the configuration
	// (a bus.ConfigError: the model endpoint rejects the key or the model): the
	// worker stopped with the message that hit it still in the stream.
	ErrStopped = errors.New("pipeline: worker stopped")
)

// Handler processes one event that decoded and validated and arrived on the subject
// its ids belong on. Returning an error retries it (then dead-letters it); wrap input
// that can never succeed with bus.Permanent to dead-letter it at once. Handlers must
// be idempotent: JetStream delivers at least once.
type Handler func(ctx context.Context, env events.Envelope) error

// Dialer opens a new NATS connection named for its use; the worker closes it.
type Dialer func(name string) (*nats.Conn, error)

// Config configures a Worker.
type Config struct {
	// Worker names the worker ("ingest"): logs, metrics and memdlq.<Worker>. Required.
	Worker string
	// Stream holding the events; default bus.DefaultStream.
	Stream string
	// Consumer is the worker's durable (see bus.WorkerConsumer). Required.
	Consumer bus.ConsumerSpec
	// Concurrency is how many messages one replica handles at once; default 4.
	Concurrency int
	// InOrderPerUser hands a user's events to the handler one at a time, in stream
	// order (bus.SubscriberConfig.OrderKey), for a handler whose result depends on
	// the order of a user's events: what a replay, which feeds them in that order,
	// must reproduce. Other users' events still run Concurrency at once.
	InOrderPerUser bool
	// Router configures retries and timeouts; its Worker is set from Worker.
	Router bus.RouterConfig
	// Dial opens the worker's connections: one for consuming, one for dead letters
	// (a publisher must not share a Watermill subscriber's connection). Required.
	Dial Dialer
	// Registry receives the worker's metrics; nil disables them.
	Metrics *obs.Metrics
	// Limits bound each event (events.Admit): its texts and its ts. An event
	// outside them is dead-lettered naming the field and the limit.
	Limits events.Limits
	// Claim, when set, decides whether an admitted event owns its id
	// (eventstore.Store.Claim): an error wrapping events.ErrInvalidEvent
	// dead-letters the event, any other is retried.
	Claim func(ctx context.Context, env events.Envelope, subject string, seq uint64) error
	// Quota, when set, is asked about each admitted event before its claim,
	// with the time the stream stored it (the time of a token bucket,
	// quota.Rate.Take): an error dead-letters the event at once, with class
	// quota when it wraps quota.ErrExceeded.
	Quota func(env events.Envelope, storedAt time.Time) error
}

func (c *Config) setDefaults() {
	if c.Stream == "" {
		c.Stream = bus.DefaultStream
	}
	if c.Concurrency == 0 {
		c.Concurrency = 4
	}
	c.Router.Worker = c.Worker
	c.Router.MaxDeliver = c.Consumer.MaxDeliver
}

// Validate reports configuration errors.
func (c Config) Validate() error {
	if err := events.ValidateID("worker", c.Worker); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if err := c.Consumer.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if c.Dial == nil {
		return fmt.Errorf("%w: %s: Dial is nil", ErrInvalidConfig, c.Worker)
	}
	if c.Concurrency < 0 {
		return fmt.Errorf("%w: %s: Concurrency %d is negative", ErrInvalidConfig, c.Worker, c.Concurrency)
	}
	if err := c.Limits.Validate(); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrInvalidConfig, c.Worker, err)
	}
	return nil
}

// Worker runs one Handler, or one BatchHandler, over one durable consumer.
type Worker struct {
	cfg     Config
	handle  Handler  // nil for a batching worker
	batch   *batcher // nil unless batching
	logger  *zap.Logger
	running chan struct{}
	once    sync.Once
}

// New returns a Worker; nothing connects before Run. logger names the worker
// already (app.Runtime.Component adds obs.Worker once, for every component).
func New(cfg Config, handle Handler, logger *zap.Logger) (*Worker, error) {
	if handle == nil {
		return nil, fmt.Errorf("%w: %s: nil handler", ErrInvalidConfig, cfg.Worker)
	}
	w, err := newWorker(cfg, logger)
	if err != nil {
		return nil, err
	}
	w.handle = handle
	return w, nil
}

func newWorker(cfg Config, logger *zap.Logger) (*Worker, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	return &Worker{cfg: cfg, logger: logger, running: make(chan struct{})}, nil
}

// Running is closed once the worker consumes.
func (w *Worker) Running() <-chan struct{} { return w.running }

// Ready reports whether the worker is consuming, for /readyz.
func (w *Worker) Ready(context.Context) error {
	select {
	case <-w.running:
		return nil
	default:
		return fmt.Errorf("%s is not consuming yet", w.cfg.Worker)
	}
}

// Run consumes until ctx ends, then stops pulling and lets the messages in flight
// finish (bounded by the router's CloseTimeout) before it returns. A message not
// finished by then is not acked and is redelivered to a replica.
//
// While cfg.Router.Gate is closed (a model endpoint is down) it pulls nothing and
// the handlers that hit the outage wait for it (bus.NewRouter). A handler error
// that is a bus.ConfigError stops the worker the same way and Run returns it,
// wrapped in ErrStopped; the messages in flight stay in the stream.
func (w *Worker) Run(ctx context.Context) error {
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	subConn, err := w.cfg.Dial("agentmem-" + w.cfg.Worker)
	if err != nil {
		return fmt.Errorf("pipeline: %s: %w", w.cfg.Worker, err)
	}
	defer subConn.Close()
	dlqConn, err := w.cfg.Dial("agentmem-" + w.cfg.Worker + "-dlq")
	if err != nil {
		return fmt.Errorf("pipeline: %s: %w", w.cfg.Worker, err)
	}
	defer dlqConn.Close()

	js, err := jetstream.New(subConn)
	if err != nil {
		return fmt.Errorf("pipeline: %s: %w", w.cfg.Worker, err)
	}
	if _, err := bus.ProvisionConsumer(ctx, js, w.cfg.Stream, w.cfg.Consumer); err != nil {
		return fmt.Errorf("pipeline: %s: %w", w.cfg.Worker, err)
	}
	sc := bus.SubscriberConfig{Conn: subConn, Stream: w.cfg.Stream, Consumer: w.cfg.Consumer, Concurrency: w.cfg.Concurrency,
		MaxProcessing: maxProcessing(w.cfg.Router), Gate: w.cfg.Router.Gate}
	if w.cfg.InOrderPerUser {
		sc.OrderKey = userKey
	}
	sub, err := bus.NewSubscriber(sc, w.logger)
	if err != nil {
		return fmt.Errorf("pipeline: %s: %w", w.cfg.Worker, err)
	}
	defer func() { _ = sub.Close() }()
	dlqPub, err := bus.NewPublisher(bus.PublisherConfig{Conn: dlqConn}, w.logger)
	if err != nil {
		return fmt.Errorf("pipeline: %s: %w", w.cfg.Worker, err)
	}
	rc := w.cfg.Router
	rc.Done = ctx.Done()
	rc.OnConfigError = func(err error) { stop(fmt.Errorf("%w: %w", ErrStopped, err)) }
	router, err := bus.NewRouter(rc, countingPublisher{dlqPub, w.cfg.Metrics}, w.logger)
	if err != nil {
		return fmt.Errorf("pipeline: %s: %w", w.cfg.Worker, err)
	}
	router.AddConsumerHandler(w.cfg.Worker, w.cfg.Consumer.Durable, sub, w.consume)
	go func() {
		select {
		case <-router.Running():
			w.once.Do(func() { close(w.running) })
			w.logger.Info("worker consuming", zap.String("consumer", w.cfg.Consumer.Durable))
		case <-ctx.Done():
		}
	}()
	if err := router.Run(ctx); err != nil {
		return fmt.Errorf("pipeline: %s: %w", w.cfg.Worker, err)
	}
	if cause := context.Cause(ctx); errors.Is(cause, ErrStopped) {
		return cause
	}
	return nil
}

// defaultMaxProcessing is the subscriber's own default MaxProcessing.
const defaultMaxProcessing = 5 * time.Minute

// maxProcessing is how long the subscriber keeps a message's ack deadline
// extended: the Router's whole budget for it (every attempt and the retry
// intervals) and a minute for the dead-letter publish and the ack, at least the
// subscriber's default. With a model, handler timeouts derive from the work
// (app), and the Router's budget can pass the default five minutes.
func maxProcessing(rc bus.RouterConfig) time.Duration {
	return max(defaultMaxProcessing, rc.Budget()+time.Minute)
}

// consume decodes and checks one message and hands it to the Handler, or to the
// batch it joins. Anything malformed is a permanent error: retrying bytes cannot
// fix them.
//
// The Router runs consume on a fresh goroutine per message, whose stack starts
// small: consume keeps its own frame small (the envelope stays behind a pointer,
// log lines are built in functions of their own) so that the common path does
// not grow it, a stack copy per message.
func (w *Worker) consume(msg *message.Message) error {
	start := time.Now()
	var r *result
	if w.batch != nil {
		r = w.batch.submit(msg)
	} else {
		r = w.handleOne(msg)
	}
	if r.err != nil {
		if r.decoded {
			w.logFailure(msg, r)
		}
		w.observe(obs.OutcomeRetry, start)
		return r.err
	}
	// Core().Enabled is a cheap test; zap's Check grows the stack of this
	// goroutine, which is fresh per message.
	if w.logger.Core().Enabled(zap.DebugLevel) {
		w.logProcessed(r)
	}
	w.observe(obs.OutcomeOK, start)
	return nil
}

// result is what became of one message.
type result struct {
	env     events.Envelope
	decoded bool // env is set: the message reached the handler
	err     error
}

func (w *Worker) handleOne(msg *message.Message) *result {
	env, err := w.decode(msg.Context(), msg)
	if err != nil {
		return &result{err: err}
	}
	return &result{env: env, decoded: true, err: w.handle(msg.Context(), env)}
}

func (w *Worker) logFailure(msg *message.Message, r *result) {
	if bus.IsOutage(r.err) || bus.IsConfigError(r.err) {
		// Logged once per endpoint by its circuit breaker, not once per message.
		if w.logger.Core().Enabled(zap.DebugLevel) {
			w.logger.Debug("handler waits for a dependency", append(eventFields(r.env), zap.Error(r.err))...)
		}
		return
	}
	w.logger.Warn("handler failed", append(eventFields(r.env), zap.String("delivery", msg.Metadata.Get(bus.MetaDeliveryCount)), zap.Error(r.err))...)
}

func (w *Worker) logProcessed(r *result) {
	w.logger.Debug("event processed", append(eventFields(r.env), zap.String("type", string(r.env.Type)))...)
}

// decode admits one message as every reader of the stream does (admit) and
// claims its id (claim).
func (w *Worker) decode(ctx context.Context, msg *message.Message) (events.Envelope, error) {
	env, err := w.admit(msg)
	if err == nil {
		err = w.quota(msg, env)
	}
	if err == nil {
		err = w.claim(ctx, msg, env)
	}
	return env, err
}

// quota asks Config.Quota about env, admitted from msg; an over-quota event is
// refused for good (bus.ClassQuota), never retried into the same refusal.
func (w *Worker) quota(msg *message.Message, env events.Envelope) error {
	if w.cfg.Quota == nil {
		return nil
	}
	storedAt, _ := time.Parse(time.RFC3339Nano, msg.Metadata.Get(bus.MetaStoredTime))
	if err := w.cfg.Quota(env, storedAt); err != nil {
		// A flood is refused event by event: a line each at Warn would cost
		// more than the refusal. The dead letter is its record, and
		// agentmem_dead_letters_total{reason="quota"} counts them.
		if w.logger.Core().Enabled(zap.DebugLevel) {
			w.logger.Debug("refusing an event over quota", append(eventFields(env), zap.Error(err))...)
		}
		return bus.Permanent(err)
	}
	return nil
}

// admit checks one message as every reader of the stream does (events.Admit:
// it decodes, arrived on its own subject, within Limits).
func (w *Worker) admit(msg *message.Message) (events.Envelope, error) {
	subject := msg.Metadata.Get(bus.MetaSubject)
	storedAt, _ := time.Parse(time.RFC3339Nano, msg.Metadata.Get(bus.MetaStoredTime))
	env, err := events.Admit(subject, msg.Payload, storedAt, w.cfg.Limits)
	if err != nil {
		return events.Envelope{}, w.reject(subject, err)
	}
	return env, nil
}

// claim decides with Config.Claim whether env, admitted from msg, owns its id;
// without a Claim every event does.
func (w *Worker) claim(ctx context.Context, msg *message.Message, env events.Envelope) error {
	if w.cfg.Claim == nil {
		return nil
	}
	subject := msg.Metadata.Get(bus.MetaSubject)
	err := w.cfg.Claim(ctx, env, subject, streamSeq(msg))
	if err != nil && errors.Is(err, events.ErrInvalidEvent) {
		return w.reject(subject, err)
	}
	return err // nil, or the claims could not be read: retried
}

func streamSeq(msg *message.Message) uint64 {
	seq, _ := strconv.ParseUint(msg.Metadata.Get(bus.MetaStreamSeq), 10, 64)
	return seq
}

// reject logs what a reader leaves out and marks it permanent: dead-lettered.
func (w *Worker) reject(subject string, err error) error {
	w.logger.Warn("rejecting malformed event", zap.String("subject", subject), zap.Error(err))
	// The contract's error first: dead-letter reasons start with its text.
	return bus.Permanent(fmt.Errorf("%w (received on %s)", err, subject))
}

// eventFields name the event in a log line.
func eventFields(env events.Envelope) []zap.Field {
	return []zap.Field{obs.Tenant(env.Tenant), obs.User(env.UserID), obs.Session(env.SessionID), obs.EventID(env.ID)}
}

func (w *Worker) observe(o obs.Outcome, start time.Time) {
	if w.cfg.Metrics != nil {
		w.cfg.Metrics.ObserveMessage(o, time.Since(start))
	}
}

// countingPublisher counts the dead letters the Router publishes.
type countingPublisher struct {
	message.Publisher
	metrics *obs.Metrics
}

func (p countingPublisher) Publish(topic string, msgs ...*message.Message) error {
	err := p.Publisher.Publish(topic, msgs...)
	if err == nil && p.metrics != nil {
		for _, m := range msgs {
			p.metrics.DeadLetter(m.Metadata.Get(bus.HeaderReasonClass))
		}
	}
	return err
}

// userKey is the ordering key of an event subject: its tenant and user. A subject
// outside the contract is not ordered; its handler dead-letters it.
func userKey(subject string) string {
	sub, err := events.ParseSubject(subject)
	if err != nil || sub.User == "" {
		return ""
	}
	return sub.Tenant + "." + sub.User
}
