package events

import (
	"errors"
	"fmt"
)

// DefaultMaxTextBytes is the default limit on each text an event or request asks
// agentmem to store or search with: an observation's text, tool-call arguments and
// tool-result output, append content, an added or updated memory's text, a memory
// item's content, a query. It is far below NATS's default max_payload (1 MiB), so a
// reply carrying several such texts still fits in one message.
const DefaultMaxTextBytes = 64 << 10

// ErrTooLarge: a text is over its size limit. Size errors also wrap ErrInvalidEvent
// or ErrInvalidRequest, and their text names the field, its size and the limit:
// "observation.text is 700000 bytes, limit 65536".
var ErrTooLarge = errors.New("too large")

// sizeError reports a text over its limit without repeating ErrTooLarge's text.
type sizeError struct {
	path        string
	size, limit int
}

func (e *sizeError) Error() string {
	return fmt.Sprintf("%s is %d bytes, limit %d", e.path, e.size, e.limit)
}

func (e *sizeError) Is(target error) bool { return target == ErrTooLarge }

// checkSize reports text longer than limit bytes; limit <= 0 is no limit.
func checkSize(path, text string, limit int) error {
	if limit > 0 && len(text) > limit {
		return &sizeError{path: path, size: len(text), limit: limit}
	}
	return nil
}

// CheckSize reports the first text of the event longer than maxTextBytes (observation
// text, tool_call.arguments, tool_result.output, memory_written entry content,
// memory_hit query); the error wraps ErrInvalidEvent and ErrTooLarge. Workers call it
// after Decode with their configured limit; maxTextBytes <= 0 checks nothing.
func (e Envelope) CheckSize(maxTextBytes int) error {
	var err error
	switch {
	case e.Observation != nil:
		o := e.Observation
		err = checkSize("observation.text", o.Text, maxTextBytes)
		if err == nil && o.ToolCall != nil {
			err = checkSize("observation.tool_call.arguments", string(o.ToolCall.Arguments), maxTextBytes)
		}
		if err == nil && o.ToolResult != nil {
			err = checkSize("observation.tool_result.output", o.ToolResult.Output, maxTextBytes)
		}
	case e.MemoryWritten != nil:
		for i, en := range e.MemoryWritten.Entries {
			if err = checkSize(indexed("memory_written.entries", i)+".content", en.Content, maxTextBytes); err != nil {
				break
			}
		}
	case e.MemoryHit != nil:
		err = checkSize("memory_hit.query", e.MemoryHit.Query, maxTextBytes)
	}
	return wrap(ErrInvalidEvent, err)
}

// CheckSize reports a query longer than maxTextBytes (ErrInvalidRequest, ErrTooLarge).
func (r ContextRequest) CheckSize(maxTextBytes int) error {
	return wrap(ErrInvalidRequest, checkSize("query", r.Query, maxTextBytes))
}

// CheckSize reports a query longer than maxTextBytes (ErrInvalidRequest, ErrTooLarge).
func (r SearchRequest) CheckSize(maxTextBytes int) error {
	return wrap(ErrInvalidRequest, checkSize("query", r.Query, maxTextBytes))
}

// CheckSize reports content longer than maxTextBytes (ErrInvalidRequest, ErrTooLarge).
func (r AppendRequest) CheckSize(maxTextBytes int) error {
	return wrap(ErrInvalidRequest, checkSize("content", r.Content, maxTextBytes))
}

// CheckSize reports text longer than maxTextBytes (ErrInvalidRequest, ErrTooLarge).
func (r AddRequest) CheckSize(maxTextBytes int) error {
	return wrap(ErrInvalidRequest, checkSize("text", r.Text, maxTextBytes))
}

// CheckSize reports text longer than maxTextBytes (ErrInvalidRequest, ErrTooLarge).
func (r UpdateRequest) CheckSize(maxTextBytes int) error {
	return wrap(ErrInvalidRequest, checkSize("text", r.Text, maxTextBytes))
}

// CheckSize reports item content longer than maxTextBytes (ErrInvalidRequest,
// ErrTooLarge).
func (r ItemRequest) CheckSize(maxTextBytes int) error {
	return wrap(ErrInvalidRequest, checkSize("item.content", r.Item.Content, maxTextBytes))
}

// CheckSize reports a query longer than maxTextBytes (ErrInvalidRequest, ErrTooLarge).
func (r ItemSearchRequest) CheckSize(maxTextBytes int) error {
	return wrap(ErrInvalidRequest, checkSize("query", r.Query, maxTextBytes))
}

// CheckSize reports the first text of the archive longer than maxTextBytes: an
// event's (as Envelope.CheckSize) or an item's content (ErrInvalidRequest,
// ErrTooLarge). A restore stores them again, so they meet the same limits.
func (a SessionArchive) CheckSize(maxTextBytes int) error {
	for i, e := range a.Events {
		if err := e.CheckSize(maxTextBytes); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrInvalidRequest, indexed("events", i), err)
		}
	}
	for i, it := range a.Items {
		if err := checkSize(indexed("items", i)+".content", it.Content, maxTextBytes); err != nil {
			return wrap(ErrInvalidRequest, err)
		}
	}
	return nil
}
