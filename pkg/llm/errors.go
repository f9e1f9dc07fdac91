package llm

import (
	"errors"
	"fmt"
)

// Sentinel errors; callers match them with errors.Is. Every error from a call to the
// endpoint is an *EndpointError wrapping one of the first three.
var (
	// ErrUnavailable reports that the endpoint could not be reached or kept failing
	// transiently (network error, timeout, HTTP 429 or 5xx) after every retry.
	ErrUnavailable = errors.New("llm: endpoint unavailable")
	// ErrBadReply reports a reply that is not JSON or does not match the schema.
	// Retrying would not help at temperature 0: callers fall back to a safe default.
	ErrBadReply = errors.New("llm: bad reply")
	// ErrRequest reports a request the endpoint rejected (HTTP 4xx other than 429),
	// e.g. a wrong key or an unknown model. It is never retried.
	ErrRequest = errors.New("llm: request rejected")
	// ErrInvalidConfig reports a Config that cannot work.
	ErrInvalidConfig = errors.New("llm: invalid config")
	// ErrInvalidArgument reports a call that cannot be made: a schema that does not
	// compile or an output that is not a non-nil pointer.
	ErrInvalidArgument = errors.New("llm: invalid argument")
)

// EndpointError names the endpoint and model a failed call was made to, so that an
// operator reading a log line knows which configuration is at fault (SPEC C9).
// Endpoint never carries credentials.
type EndpointError struct {
	Endpoint string // base URL without user info or query
	Model    string
	Status   int // HTTP status of the last attempt; 0 when no response was received
	Err      error
}

func (e *EndpointError) Error() string {
	if e.Status != 0 {
		return fmt.Sprintf("llm endpoint %s (model %s): HTTP %d: %v", e.Endpoint, e.Model, e.Status, e.Err)
	}
	return fmt.Sprintf("llm endpoint %s (model %s): %v", e.Endpoint, e.Model, e.Err)
}

func (e *EndpointError) Unwrap() error { return e.Err }
