package bus

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"
	"go.uber.org/zap"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/quota"
)

// Dead-letter headers, set by Watermill's PoisonQueue middleware. A dead letter also
// carries the Subscriber's metadata: MetaSubject (the original subject),
// MetaStreamSeq and MetaDeliveryCount.
const (
	HeaderReason  = middleware.ReasonForPoisonedKey
	HeaderHandler = middleware.PoisonedHandlerKey
	// HeaderReasonClass is the reason's class, one of the Class* values: a small
	// fixed set for metrics labels and for replaying dead letters by cause.
	HeaderReasonClass = "reason_class"
)

// Dead-letter reason classes.
const (
	// ClassMalformed: input that can never succeed (an error marked Permanent).
	ClassMalformed = events.ReasonClassMalformed
	// ClassMaxDeliveries: the worker crashed or hung on every delivery.
	ClassMaxDeliveries = events.ReasonClassMaxDeliveries
	// ClassRetriesExhausted: the handler kept failing through every retry.
	ClassRetriesExhausted = events.ReasonClassRetriesExhausted
	// ClassQuota: the event's tenant was over one of its quotas (pkg/quota);
	// replayed once the quota is raised or the tenant holds less.
	ClassQuota = events.ReasonClassQuota
)

// ReasonClass is the class of a handler error that dead-letters its message.
func ReasonClass(err error) string {
	switch {
	case errors.Is(err, ErrMaxDeliveries):
		return ClassMaxDeliveries
	case errors.Is(err, quota.ErrExceeded):
		return ClassQuota
	case IsPermanent(err):
		return ClassMalformed
	}
	return ClassRetriesExhausted
}

// classify records the class of a failed message's error in its metadata, which
// the PoisonQueue copies into the dead letter.
func classify(h message.HandlerFunc) message.HandlerFunc {
	return func(msg *message.Message) ([]*message.Message, error) {
		out, err := h(msg)
		if err != nil {
			msg.Metadata.Set(HeaderReasonClass, ReasonClass(err))
		}
		return out, err
	}
}

// RetryConfig configures the Router's in-process retries of a failed handler.
type RetryConfig struct {
	// MaxRetries after the first attempt; default 3, negative disables retries.
	MaxRetries int
	// InitialInterval before the first retry; default 100ms.
	InitialInterval time.Duration
	// MaxInterval caps the growing interval; default 10s.
	MaxInterval time.Duration
	// Multiplier of the interval after each retry; default 2.
	Multiplier float64
}

// RouterConfig configures a worker's Router.
type RouterConfig struct {
	// Worker names the worker; dead letters go to memdlq.<Worker>. Required.
	Worker string
	// HandlerTimeout bounds each handler attempt (its message context ends); default 30s.
	HandlerTimeout time.Duration
	// CloseTimeout bounds how long Close waits for running handlers; default 30s.
	CloseTimeout time.Duration
	// Retry configures the in-process retries.
	Retry RetryConfig
	// MaxDeliver dead-letters, without handling it, a message delivered more than
	// this many times (its worker crashed or hung on every delivery; see
	// ConsumerSpec); 0 or -1 is unlimited.
	MaxDeliver int
	// Gate, if set, pauses the worker's pulls while a dependency of its handlers
	// is down; the pipeline hands it to the Subscriber. The Router itself waits
	// out the OutageErrors of the handlers whatever Gate is.
	Gate Gate
	// Done, when closed, ends the waits for outages: the messages waiting are
	// held (left unsettled, redelivered after their ack deadline). Set it to the
	// worker's stop signal.
	Done <-chan struct{}
	// OnConfigError is called (for every message that hit it) with a handler's
	// ConfigError; the message is held. The pipeline stops the worker with it.
	OnConfigError func(error)
}

func (c RouterConfig) withDefaults() RouterConfig {
	if c.HandlerTimeout == 0 {
		c.HandlerTimeout = 30 * time.Second
	}
	if c.CloseTimeout == 0 {
		c.CloseTimeout = 30 * time.Second
	}
	r := &c.Retry
	switch {
	case r.MaxRetries == 0:
		r.MaxRetries = 3
	case r.MaxRetries < 0:
		r.MaxRetries = 0
	}
	if r.InitialInterval == 0 {
		r.InitialInterval = 100 * time.Millisecond
	}
	if r.MaxInterval == 0 {
		r.MaxInterval = 10 * time.Second
	}
	if r.Multiplier == 0 {
		r.Multiplier = 2
	}
	return c
}

// Budget is the longest the Router may hold one message: every attempt at
// HandlerTimeout and the retry intervals between them. A Subscriber's
// MaxProcessing below it lets the server redeliver a message still being retried.
func (c RouterConfig) Budget() time.Duration {
	c = c.withDefaults()
	total := time.Duration(c.Retry.MaxRetries+1) * c.HandlerTimeout
	interval := c.Retry.InitialInterval
	for range c.Retry.MaxRetries {
		total += interval
		interval = min(time.Duration(float64(interval)*c.Retry.Multiplier), c.Retry.MaxInterval)
	}
	return total
}

// Validate reports configuration errors.
func (c RouterConfig) Validate() error {
	if err := events.ValidateID("router Worker", c.Worker); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if c.HandlerTimeout < 0 || c.CloseTimeout < 0 || c.Retry.InitialInterval < 0 || c.Retry.MaxInterval < 0 {
		return fmt.Errorf("%w: router %s: timeouts and retry intervals must not be negative", ErrInvalidConfig, c.Worker)
	}
	if c.MaxDeliver < -1 {
		return fmt.Errorf("%w: router %s: MaxDeliver is %d, want -1, 0 (unlimited) or > 0", ErrInvalidConfig, c.Worker, c.MaxDeliver)
	}
	if c.Retry.Multiplier != 0 && c.Retry.Multiplier < 1 {
		return fmt.Errorf("%w: router %s: retry Multiplier %g is below 1", ErrInvalidConfig, c.Worker, c.Retry.Multiplier)
	}
	return nil
}

// NewRouter returns a Watermill Router for worker cfg.Worker whose handlers are
// wrapped, outermost first, in:
//
//  1. CorrelationID: copies the correlation ID to the messages a handler produces.
//  2. PoisonQueue: a message whose handler still fails after the retries is
//     published to memdlq.<worker> (with the reason and the Subscriber's metadata:
//     original subject, stream sequence, delivery count) and then acked, so a
//     poison message never blocks or loops. It sits outside Retry so that only
//     exhausted retries are dead-lettered; if the dead-letter publish fails, the
//     message is nacked and redelivered.
//     The reason's class (HeaderReasonClass) goes with it.
//     Held messages (below) pass it untouched.
//  3. MaxDeliveries: a message delivered more than MaxDeliver times fails at once
//     with ErrMaxDeliveries (permanent), so the PoisonQueue dead-letters it.
//  4. Outage wait: a handler that failed with an OutageError (a model endpoint
//     behind an open circuit), or, after its retries, with StreamUnavailable (a
//     JetStream cluster electing a leader), runs again once the outage may be
//     over, as often as it takes, so an outage never dead-letters a message nor
//     uses up its deliveries. A ConfigError (the endpoint refuses the key or model) calls
//     OnConfigError and holds the message: it is neither acked nor nacked and the
//     server redelivers it after its ack deadline. So does a stop (Done) during
//     a wait.
//  5. Retry: retries a failed attempt with exponential backoff, except errors
//     marked Permanent (malformed input), which go straight to the PoisonQueue,
//     and outage and configuration errors, which go to the outage wait.
//  6. Timeout: each attempt gets its own deadline (Retry resets the context
//     between attempts, otherwise attempt 2 would start with attempt 1's expired one).
//  7. Recoverer: innermost, so that a panic becomes an error that is retried and
//     then dead-lettered like any other failure.
//
// dlqPub publishes the dead letters; give it a connection of its own.
func NewRouter(cfg RouterConfig, dlqPub message.Publisher, logger *zap.Logger) (*message.Router, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if dlqPub == nil {
		return nil, fmt.Errorf("%w: router %s: dead-letter publisher is nil", ErrInvalidConfig, cfg.Worker)
	}
	cfg = cfg.withDefaults()
	wlog := NewWatermillLogger(logger)
	r, err := message.NewRouter(message.RouterConfig{CloseTimeout: cfg.CloseTimeout}, wlog)
	if err != nil {
		return nil, fmt.Errorf("%w: router %s: %w", ErrInvalidConfig, cfg.Worker, err)
	}
	dlqSubject, err := events.DLQSubject(cfg.Worker)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	poison, err := middleware.PoisonQueueWithFilter(dlqPub, dlqSubject, func(err error) bool { return !isHeld(err) })
	if err != nil {
		return nil, fmt.Errorf("%w: router %s: %w", ErrInvalidConfig, cfg.Worker, err)
	}
	retry := middleware.Retry{
		MaxRetries:      cfg.Retry.MaxRetries,
		InitialInterval: cfg.Retry.InitialInterval,
		MaxInterval:     cfg.Retry.MaxInterval,
		Multiplier:      cfg.Retry.Multiplier,
		ShouldRetry: func(p middleware.RetryParams) bool {
			return !IsPermanent(p.Err) && !IsOutage(p.Err) && !IsConfigError(p.Err)
		},
		ResetContextOnRetry: true,
		Logger:              wlog,
	}
	r.AddMiddleware(
		middleware.CorrelationID,
		poison,
		classify,
		maxDeliveries(cfg.MaxDeliver),
		waitOutages(cfg.Done, cfg.OnConfigError),
		retry.Middleware,
		middleware.Timeout(cfg.HandlerTimeout),
		middleware.Recoverer,
	)
	return r, nil
}

// ErrMaxDeliveries is the error, and so the dead-letter reason, of a message
// delivered more than MaxDeliver times.
var ErrMaxDeliveries = errors.New(ReasonMaxDeliveries)

// maxDeliveries fails a message delivered more than limit times before the
// handler sees it; the count is the Subscriber's MetaDeliveryCount.
func maxDeliveries(limit int) message.HandlerMiddleware {
	return func(h message.HandlerFunc) message.HandlerFunc {
		if limit <= 0 {
			return h
		}
		return func(msg *message.Message) ([]*message.Message, error) {
			if n, err := strconv.Atoi(msg.Metadata.Get(MetaDeliveryCount)); err == nil && n > limit {
				return nil, Permanent(fmt.Errorf("%w: delivered %d times, limit %d", ErrMaxDeliveries, n, limit))
			}
			return h(msg)
		}
	}
}

// permanentError marks an error that retrying cannot fix. Its text is the wrapped
// error's: it becomes the dead letter's reason, whose prefixes are documented.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent marks err as not worth retrying (malformed input, an unknown schema
// version): the Router dead-letters the message after this one attempt. It returns
// nil for nil; errors.Is and errors.As still see err.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

// IsPermanent reports whether err, or any error it wraps, was marked by Permanent,
// or is a tenant over a quota (quota.ErrExceeded): retries within one message's
// deliveries would not bring the tenant under it.
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p) || errors.Is(err, quota.ErrExceeded)
}
