package events

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error of this package wraps one of them (and ErrInvalidID
// when an ID is at fault), so callers can tell bad input from everything else with
// errors.Is and, for example, answer a request with a 400 or dead-letter an event.
var (
	// ErrUnknownSchemaVersion: the envelope's schema_version is missing or not one this
	// build understands. It is distinct from ErrMalformed so a newer producer's events
	// can be parked and replayed once the workers are upgraded.
	ErrUnknownSchemaVersion = errors.New("unknown schema_version")
	// ErrMalformed: the input is not JSON of the expected shape.
	ErrMalformed = errors.New("malformed event")
	// ErrInvalidEvent: the envelope decoded but breaks a rule of the contract.
	ErrInvalidEvent = errors.New("invalid event")
	// ErrInvalidSubject: a subject cannot be built from, or parsed into, valid tokens.
	ErrInvalidSubject = errors.New("invalid subject")
	// ErrInvalidRequest: a retriever request breaks a rule of the contract.
	ErrInvalidRequest = errors.New("invalid request")
	// ErrInvalidRecord: an EventRecord, TurnRecord, MemoryItem, ContextPack or
	// SessionArchive breaks a rule of the contract.
	ErrInvalidRecord = errors.New("invalid record")
	// ErrUnknownTopic: a topic name that is not in Topics.
	ErrUnknownTopic = errors.New("unknown topic")
)

// field joins a parent path and a field name into the dotted JSON path used in error
// messages ("observation.tool_call.name").
func field(parent, name string) string {
	if parent == "" {
		return name
	}
	return parent + "." + name
}

// indexed names element i of the list at path ("memory_ids[2]").
func indexed(path string, i int) string {
	return fmt.Sprintf("%s[%d]", path, i)
}

// ruleError reports that the field at path breaks a rule; the exported Validate
// methods wrap it with their sentinel.
func ruleError(path, format string, args ...any) error {
	return fmt.Errorf("%s %s", path, fmt.Sprintf(format, args...))
}

// wrap tags a validation error with the sentinel of the caller's domain, keeping any
// sentinel already inside it (ErrInvalidID, ErrUnknownTopic) reachable by errors.Is.
func wrap(sentinel, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: %w", sentinel, err)
}

// optionalID validates id only when it is set.
func optionalID(path, id string) error {
	if id == "" {
		return nil
	}
	return ValidateID(path, id)
}

// idList validates a list of IDs; required demands at least one element.
func idList(path string, ids []string, required bool) error {
	if required && len(ids) == 0 {
		return ruleError(path, "must hold at least one id")
	}
	for i, id := range ids {
		if err := ValidateID(indexed(path, i), id); err != nil {
			return err
		}
	}
	return nil
}

// oneOf reports whether v is one of allowed; used for the string enums of the contract.
func oneOf[T ~string](v T, allowed []T) bool {
	for _, a := range allowed {
		if v == a {
			return true
		}
	}
	return false
}

// enumError names the field, the bad value and the allowed values.
func enumError[T ~string](path string, v T, allowed []T) error {
	return ruleError(path, "is %q; allowed values are %q", string(v), allowed)
}
