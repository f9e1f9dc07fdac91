// Package breaker is the circuit breaker of a model endpoint (the chat model, the
// embedder): one per endpoint, shared by every step that calls it, so that an
// outage is noticed once, waited out by the stream workers instead of
// dead-lettering their messages, and shown on /readyz.
//
// A Breaker is closed while the endpoint answers. A transient failure (the client
// gave up after its own retries: unreachable, timeout, 429, 5xx) opens it: calls
// fail at once with an *Unavailable error, without reaching the endpoint, and the
// stream workers stop pulling (Group as their bus.Gate). After OpenFor it is half
// open: the next call is the one probe. A probe that succeeds closes it; one that
// fails opens it again for twice as long, up to MaxOpenFor. A configuration error
// (401, 403, 404: a key or model the endpoint refuses) latches it misconfigured:
// every call fails with a *Misconfigured error until the process restarts, which
// stops the workers that need the endpoint.
//
// github.com/sony/gobreaker (v1, in the module graph through Watermill) was not
// used: its open period is fixed (no backoff between failed probes), it changes
// state only when called (a waiter would have to poll to see it half open), and
// it has no latched state for configuration errors. This one is small and does
// exactly that.
package breaker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"
)

// State of a Breaker.
type State int

// States.
const (
	// StateClosed: calls go to the endpoint.
	StateClosed State = iota
	// StateOpen: calls fail at once until the open period ends.
	StateOpen
	// StateHalfOpen: the next call is let through as the probe.
	StateHalfOpen
	// StateProbing: the probe is in flight; other calls fail at once.
	StateProbing
	// StateMisconfigured: the endpoint refused the configuration; calls fail at once
	// until the process restarts.
	StateMisconfigured
)

func (s State) String() string {
	switch s {
	case StateClosed:
		return "closed"
	case StateOpen:
		return "open"
	case StateHalfOpen:
		return "half-open"
	case StateProbing:
		return "probing"
	case StateMisconfigured:
		return "misconfigured"
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// Class is what the outcome of one call says about the endpoint.
type Class int

// Classes.
const (
	// ClassSuccess: the endpoint answered (a reply about the request itself, a 400 or
	// an unusable body, counts too: the endpoint is up).
	ClassSuccess Class = iota
	// ClassNeutral: says nothing about the endpoint (the caller gave up).
	ClassNeutral
	// ClassTransient: unreachable, timed out, throttled or failing (429, 5xx), after
	// the client's own retries.
	ClassTransient
	// ClassConfig: the endpoint refuses the configuration (401, 403, 404 for the model).
	ClassConfig
)

// Sentinel errors.
var (
	// ErrInvalidConfig reports a Config that cannot work.
	ErrInvalidConfig = errors.New("breaker: invalid config")
	// ErrOpen is the cause of a call refused while the circuit is open.
	ErrOpen = errors.New("circuit open")
	// ErrMisconfigured is the cause of a call refused after a configuration error.
	ErrMisconfigured = errors.New("endpoint rejects the configuration")
)

// Config configures a Breaker.
type Config struct {
	// Name of the endpoint's role ("llm", "embedder"): ready check, metric label,
	// logs. Required.
	Name string
	// Endpoint is the URL, without credentials, for logs and errors. Required.
	Endpoint string
	// Classify tells what a failed call's error says about the endpoint. Required.
	Classify func(error) Class
	// Threshold is how many transient failures in a row open the circuit; default
	// 1: a failure the client reports has already survived its own retries.
	Threshold int
	// OpenFor is the first open period; default 5s.
	OpenFor time.Duration
	// MaxOpenFor caps the open period, doubled after each failed probe; default
	// 30s: the longest a recovered endpoint waits for its next probe.
	MaxOpenFor time.Duration
	// OnChange, if set, is called after every state change with the new state
	// (metrics). It must not call the Breaker.
	OnChange func(State)
}

func (c *Config) setDefaults() {
	if c.Threshold == 0 {
		c.Threshold = 1
	}
	if c.OpenFor == 0 {
		c.OpenFor = 5 * time.Second
	}
	if c.MaxOpenFor == 0 {
		c.MaxOpenFor = 30 * time.Second
	}
}

// Validate reports configuration errors.
func (c Config) Validate() error {
	switch {
	case c.Name == "" || c.Endpoint == "":
		return fmt.Errorf("%w: Name and Endpoint are required", ErrInvalidConfig)
	case c.Classify == nil:
		return fmt.Errorf("%w: %s: Classify is nil", ErrInvalidConfig, c.Name)
	case c.Threshold < 0 || c.OpenFor < 0 || c.MaxOpenFor < 0:
		return fmt.Errorf("%w: %s: Threshold, OpenFor and MaxOpenFor must not be negative", ErrInvalidConfig, c.Name)
	case c.MaxOpenFor != 0 && c.OpenFor > c.MaxOpenFor:
		return fmt.Errorf("%w: %s: OpenFor %s exceeds MaxOpenFor %s", ErrInvalidConfig, c.Name, c.OpenFor, c.MaxOpenFor)
	}
	return nil
}

// Breaker is one endpoint's circuit breaker; safe for concurrent use.
type Breaker struct {
	cfg    Config
	logger *zap.Logger

	mu       sync.Mutex
	state    State
	gen      uint64        // bumped at every state change: late results of older calls are ignored
	failures int           // transient failures in a row while closed
	openFor  time.Duration // the current open period
	since    time.Time     // when the circuit left the closed state
	until    time.Time     // when the current open period ends
	cause    error         // the failure that opened or misconfigured it
	changed  chan struct{} // closed and replaced at every state change
	timer    *time.Timer
}

// New returns a closed Breaker.
func New(cfg Config, logger *zap.Logger) (*Breaker, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	return &Breaker{
		cfg:     cfg,
		logger:  logger.With(zap.String("model_endpoint", cfg.Name), zap.String("endpoint", cfg.Endpoint)),
		openFor: cfg.OpenFor,
		changed: make(chan struct{}),
	}, nil
}

// Name is the endpoint's role, as configured.
func (b *Breaker) Name() string { return b.cfg.Name }

// State returns the current state.
func (b *Breaker) State() State {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state
}

// Do runs call unless the circuit refuses it, and records what its outcome says
// about the endpoint. It returns call's error, wrapped in *Unavailable for a
// transient failure and in *Misconfigured for a configuration error; a refused
// call returns one of those without running. A call whose ctx ended (cancelled or
// past its deadline) counts as neutral: the caller's deadline also covers the
// time spent before the call (queued behind the client's concurrency limit, or
// behind other work of the same handler), so it would open the circuit of an
// endpoint that answers, only slowly. The client's own timeout of one attempt,
// which covers the request alone, is what reports an endpoint that does not
// answer in time (as a transient error). The outcome is recorded even if call
// panics (as neutral): a probe that never reported would leave the circuit
// probing, every waiter waiting and nobody probing.
func (b *Breaker) Do(ctx context.Context, call func(context.Context) error) error {
	gen, err := b.allow()
	if err != nil {
		return err
	}
	class := ClassNeutral
	defer func() { b.record(gen, class, err) }()
	err = call(ctx)
	class = b.classOf(ctx, err)
	switch class {
	case ClassTransient:
		return &Unavailable{b: b, err: err}
	case ClassConfig:
		return &Misconfigured{b: b, err: err}
	}
	return err
}

// classOf is what a call's outcome says about the endpoint.
func (b *Breaker) classOf(ctx context.Context, err error) Class {
	if err == nil {
		return ClassSuccess
	}
	class := b.cfg.Classify(err)
	if class != ClassConfig && ctx.Err() != nil {
		return ClassNeutral
	}
	return class
}

// allow admits a call, taking the probe when half open, and returns the
// generation it runs in.
func (b *Breaker) allow() (uint64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state {
	case StateClosed:
		return b.gen, nil
	case StateHalfOpen:
		b.setState(StateProbing)
		return b.gen, nil
	case StateMisconfigured:
		return 0, &Misconfigured{b: b, err: fmt.Errorf("%w: %w", ErrMisconfigured, b.cause)}
	}
	return 0, &Unavailable{b: b, err: ErrOpen}
}

func (b *Breaker) record(gen uint64, class Class, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if class == ClassConfig && b.state != StateMisconfigured {
		b.cause = err
		b.stopTimer()
		b.setState(StateMisconfigured)
		b.logger.Error("model endpoint rejects the configuration; the workers that use it stop (fix the key or model and restart)",
			zap.Error(err))
		return
	}
	if gen != b.gen {
		return // a call of an earlier state finished late
	}
	switch b.state {
	case StateClosed:
		switch class {
		case ClassSuccess:
			b.failures = 0
		case ClassTransient:
			b.failures++
			if b.failures >= b.cfg.Threshold {
				b.cause, b.since = err, time.Now()
				b.open()
				b.logger.Warn("model endpoint unavailable; circuit open, workers pause until it answers again",
					zap.Duration("retry_in", b.openFor), zap.Error(err))
			}
		}
	case StateProbing:
		switch class {
		case ClassSuccess:
			down := time.Since(b.since)
			b.failures, b.openFor, b.cause = 0, b.cfg.OpenFor, nil
			b.setState(StateClosed)
			b.logger.Info("model endpoint answers again; circuit closed, workers resume", zap.Duration("unavailable_for", down))
		case ClassTransient:
			b.cause = err
			b.openFor = min(2*b.openFor, b.cfg.MaxOpenFor)
			b.open()
			b.logger.Debug("probe failed; circuit open again", zap.Duration("retry_in", b.openFor), zap.Error(err))
		default:
			b.setState(StateHalfOpen) // the probe said nothing: the next call probes
		}
	}
}

// open opens the circuit for the current period; the timer half-opens it.
func (b *Breaker) open() {
	b.until = time.Now().Add(b.openFor)
	b.setState(StateOpen)
	b.stopTimer()
	gen := b.gen
	b.timer = time.AfterFunc(b.openFor, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.state == StateOpen && b.gen == gen {
			b.setState(StateHalfOpen)
		}
	})
}

func (b *Breaker) stopTimer() {
	if b.timer != nil {
		b.timer.Stop()
		b.timer = nil
	}
}

// setState changes the state and wakes the waiters; b.mu is held.
func (b *Breaker) setState(s State) {
	b.state = s
	b.gen++
	close(b.changed)
	b.changed = make(chan struct{})
	if b.cfg.OnChange != nil {
		b.cfg.OnChange(s)
	}
}

// Passable reports whether a call may go to the endpoint now: closed, or half
// open with the probe not taken yet.
func (b *Breaker) Passable() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return passable(b.state)
}

// Wait blocks until a call may go to the endpoint (Passable), and returns nil; or
// until ctx ends, and returns its error. A misconfigured breaker never becomes
// passable.
func (b *Breaker) Wait(ctx context.Context) error {
	return b.waitFor(ctx, passable)
}

func passable(s State) bool { return s == StateClosed || s == StateHalfOpen }

// waitFor blocks until ok(state) or ctx ends.
func (b *Breaker) waitFor(ctx context.Context, ok func(State) bool) error {
	for {
		b.mu.Lock()
		done, changed := ok(b.state), b.changed
		b.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Ready is the endpoint's readiness check: nil while the circuit is closed.
func (b *Breaker) Ready(context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state {
	case StateClosed:
		return nil
	case StateMisconfigured:
		return fmt.Errorf("%s endpoint %s rejects the configuration: %v", b.cfg.Name, b.cfg.Endpoint, b.cause)
	}
	return fmt.Errorf("%s endpoint %s unavailable for %s (circuit %s): %v",
		b.cfg.Name, b.cfg.Endpoint, time.Since(b.since).Round(time.Second), b.state, b.cause)
}

// Unavailable is the error of a call that failed transiently or was refused while
// the circuit is open. It implements bus.OutageError: a stream worker waits for
// the endpoint instead of retrying and dead-lettering its message.
type Unavailable struct {
	b   *Breaker
	err error
}

func (e *Unavailable) Error() string {
	return fmt.Sprintf("%s endpoint %s: %v", e.b.cfg.Name, e.b.cfg.Endpoint, e.err)
}

func (e *Unavailable) Unwrap() error { return e.err }

// WaitRecovery blocks until the endpoint may be called again (its breaker is
// passable), or became misconfigured (the next call then returns the
// configuration error); ctx's error if ctx ends first.
func (e *Unavailable) WaitRecovery(ctx context.Context) error {
	return e.b.waitFor(ctx, func(s State) bool { return passable(s) || s == StateMisconfigured })
}

// Misconfigured is the error of a call the endpoint refused for its
// configuration, and of every call after it. It implements bus.ConfigError: the
// stream workers that need the endpoint stop.
type Misconfigured struct {
	b   *Breaker
	err error
}

func (e *Misconfigured) Error() string {
	return fmt.Sprintf("%s endpoint %s rejects the configuration: %v", e.b.cfg.Name, e.b.cfg.Endpoint, e.err)
}

func (e *Misconfigured) Unwrap() error { return e.err }

// ConfigError marks it for bus.ConfigError.
func (e *Misconfigured) ConfigError() bool { return true }

// Group is the breakers of the endpoints a worker needs, as its bus.Gate: closed
// while any of them is not passable.
type Group []*Breaker

// Closed reports whether any breaker refuses calls now.
func (g Group) Closed() bool {
	for _, b := range g {
		if !b.Passable() {
			return true
		}
	}
	return false
}

// Wait blocks until every breaker is passable at once, or ctx ends.
func (g Group) Wait(ctx context.Context) error {
	for g.Closed() {
		for _, b := range g {
			if err := b.Wait(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// Ready is nil when every breaker is closed.
func (g Group) Ready(ctx context.Context) error {
	var errs []error
	for _, b := range g {
		errs = append(errs, b.Ready(ctx))
	}
	return errors.Join(errs...)
}
