package bus

import "errors"

// Sentinel errors. Every error this package returns wraps one of them (with context
// naming what failed), so callers can branch with errors.Is.
var (
	// ErrInvalidConfig is returned for a configuration or spec that cannot work; the
	// message says which field and why.
	ErrInvalidConfig = errors.New("bus: invalid config")
	// ErrConnect is returned when a client connection cannot be established; the
	// message names the server URL, never the credentials.
	ErrConnect = errors.New("bus: connect")
	// ErrProvision is returned when a stream or consumer cannot be created
	// or updated.
	ErrProvision = errors.New("bus: provision")
	// ErrPublish is returned when JetStream does not acknowledge a publish.
	ErrPublish = errors.New("bus: publish")
	// ErrClosed is returned by a Publisher or Subscriber used after Close.
	ErrClosed = errors.New("bus: closed")
	// ErrDeadLetter is returned when dead letters cannot be read or replayed.
	ErrDeadLetter = errors.New("bus: dead letter")
)
