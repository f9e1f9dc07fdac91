package bus

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmem/agentmem/pkg/kvcas"
)

// OutageError is implemented by the errors of a dependency that is down for a
// while, such as a model endpoint behind an open circuit breaker (pkg/breaker's
// Unavailable). The Router does not retry or dead-letter a message that failed
// with one: it waits until WaitRecovery returns, with the message held (its ack
// deadline extended by the Subscriber), and runs the handler again, as often as
// the outage takes.
type OutageError interface {
	error
	// WaitRecovery blocks until the dependency may be tried again, or ctx ends
	// (then it returns ctx's error).
	WaitRecovery(ctx context.Context) error
}

// ConfigError is implemented by the errors of a dependency that refuses the
// configuration (an API key or a model the endpoint rejects: pkg/breaker's
// Misconfigured): no message can succeed until an operator fixes it. The Router
// neither retries nor dead-letters the message; it leaves it unacknowledged in the
// stream and calls RouterConfig.OnConfigError, which stops the worker.
type ConfigError interface {
	error
	ConfigError() bool
}

// Gate pauses a Subscriber's pulls while a dependency its handlers need is down:
// pkg/breaker's Group of the model endpoints. Messages already pulled are not
// affected, except that the time the gate is closed does not count toward
// SubscriberConfig.MaxProcessing: a handler waiting out an outage is not hung.
type Gate interface {
	// Closed reports whether pulling should pause now.
	Closed() bool
	// Wait blocks until pulling may go on (nil), or ctx ends (its error).
	Wait(ctx context.Context) error
}

// MetaHeld marks a message the Router releases without settling it: the
// Subscriber neither acks nor naks it, and the server redelivers it after its ack
// deadline (to this replica once it pulls again, or to another).
const MetaHeld = "agentmem_held"

// IsOutage reports whether err, or an error it wraps, is an OutageError.
func IsOutage(err error) bool {
	var o OutageError
	return errors.As(err, &o)
}

// StreamUnavailable reports an error of a JetStream request that nobody
// answered, or that JetStream refused as temporarily unavailable: a stream,
// bucket or consumer without a leader while a cluster elects one after losing
// a node (seconds, longer under load), or JetStream starting up. The Router
// waits these out like an OutageError: with three quick retries a write acked
// by nothing during an election was dead-lettered although its memory was
// stored. Unanswered are also a request that got no reply within
// kvcas.RequestTimeout (kvcas.ErrNoReply), a compare-and-set that kept losing
// to a write the stream does not commit (kvcas.ErrUncommitted), an asynchronous publish whose ack
// never came (jetstream.ErrAsyncPublishTimeout: the leader it went to died),
// and a publish whose message id an earlier attempt's proposal still holds
// across a leader change (409 "duplicate message id is in process").
func StreamUnavailable(err error) bool {
	var api *jetstream.APIError
	return errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) ||
		errors.Is(err, kvcas.ErrNoReply) || errors.Is(err, kvcas.ErrUncommitted) || errors.Is(err, jetstream.ErrAsyncPublishTimeout) ||
		(errors.As(err, &api) && (api.Code == http.StatusServiceUnavailable || api.ErrorCode == errCodeDuplicateInProcess))
}

// errCodeDuplicateInProcess is JetStream's JSStreamDuplicateMessageConflict:
// a publish whose Nats-Msg-Id an earlier publish, not yet committed, holds.
const errCodeDuplicateInProcess jetstream.ErrorCode = 10158

// StreamRecoveryPause is how long the Router waits before running again a
// handler that failed with StreamUnavailable; a cluster elects a leader within
// a few of them.
const StreamRecoveryPause = time.Second

// streamOutage is a StreamUnavailable error as an OutageError.
type streamOutage struct{ err error }

func (e streamOutage) Error() string { return e.err.Error() }
func (e streamOutage) Unwrap() error { return e.err }

func (e streamOutage) WaitRecovery(ctx context.Context) error {
	select {
	case <-time.After(StreamRecoveryPause):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// IsConfigError reports whether err, or an error it wraps, is a ConfigError.
func IsConfigError(err error) bool {
	var c ConfigError
	return errors.As(err, &c) && c.ConfigError()
}

// heldError is what the Router's handler returns for a held message. It matches
// context.Canceled, as the handling was cancelled: Watermill does not log such a
// return as a handler error (one line per message held would bury the one line
// that says why).
type heldError struct{ err error }

func (e *heldError) Error() string        { return "message held for redelivery: " + e.err.Error() }
func (e *heldError) Unwrap() error        { return e.err }
func (e *heldError) Is(target error) bool { return target == context.Canceled }

func isHeld(err error) bool {
	var h *heldError
	return errors.As(err, &h)
}

// hold marks msg held and returns err as a held error.
func hold(msg *message.Message, err error) error {
	msg.Metadata.Set(MetaHeld, "1")
	return &heldError{err: err}
}

// waitOutages runs the handler again after each outage of a dependency, once
// WaitRecovery says it may be over; the message context is reset for each run (the
// Timeout middleware inside replaced it). A ConfigError, or a shutdown (done
// closed) during a wait, holds the message: it returns unsettled, and the
// PoisonQueue lets it pass.
func waitOutages(done <-chan struct{}, onConfigError func(error)) message.HandlerMiddleware {
	waitCtx := context.Background()
	if done != nil {
		var cancel context.CancelFunc
		waitCtx, cancel = context.WithCancel(waitCtx)
		go func() {
			<-done
			cancel()
		}()
	}
	return func(h message.HandlerFunc) message.HandlerFunc {
		return func(msg *message.Message) ([]*message.Message, error) {
			ctx := msg.Context()
			for {
				out, err := h(msg)
				if err == nil {
					return out, nil
				}
				if IsConfigError(err) {
					if onConfigError != nil {
						onConfigError(err)
					}
					return nil, hold(msg, err)
				}
				var outage OutageError
				switch {
				case errors.As(err, &outage):
				case StreamUnavailable(err) && !IsPermanent(err):
					outage = streamOutage{err}
				default:
					return out, err
				}
				if werr := outage.WaitRecovery(waitCtx); werr != nil {
					return nil, hold(msg, err)
				}
				msg.SetContext(ctx)
			}
		}
	}
}
