package events

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// sized is one text CheckSize must measure: check puts text into a value of its
// type and measures it, path is the field the error names, sentinel the error
// it wraps.
type sized struct {
	path     string
	sentinel error
	check    func(text string, limit int) error
}

func sizedTexts() []sized {
	obs := func(f func(o *Observation, text string)) func(string, int) error {
		return func(text string, limit int) error {
			o := &Observation{Role: RoleTool, Text: "short"}
			f(o, text)
			return Envelope{Observation: o}.CheckSize(limit)
		}
	}
	return []sized{
		{"observation.text", ErrInvalidEvent, obs(func(o *Observation, t string) { o.Text = t })},
		{"observation.tool_call.arguments", ErrInvalidEvent, obs(func(o *Observation, t string) {
			o.ToolCall = &ToolCall{Name: "read", Arguments: json.RawMessage(t)}
		})},
		{"observation.tool_result.output", ErrInvalidEvent, obs(func(o *Observation, t string) {
			o.ToolCall = &ToolCall{Name: "read", Arguments: json.RawMessage(`{}`)}
			o.ToolResult = &ToolResult{Name: "read", Output: t}
		})},
		{"memory_written.entries[1].content", ErrInvalidEvent, func(t string, limit int) error {
			return Envelope{MemoryWritten: &MemoryWritten{Entries: []WrittenEntry{{Content: "short"}, {Content: t}}}}.CheckSize(limit)
		}},
		{"memory_hit.query", ErrInvalidEvent, func(t string, limit int) error {
			return Envelope{MemoryHit: &MemoryHit{Query: t}}.CheckSize(limit)
		}},
		{"query", ErrInvalidRequest, func(t string, limit int) error { return ContextRequest{Query: t}.CheckSize(limit) }},
		{"query", ErrInvalidRequest, func(t string, limit int) error { return SearchRequest{Query: t}.CheckSize(limit) }},
		{"content", ErrInvalidRequest, func(t string, limit int) error { return AppendRequest{Content: t}.CheckSize(limit) }},
		{"text", ErrInvalidRequest, func(t string, limit int) error { return AddRequest{Text: t}.CheckSize(limit) }},
		{"text", ErrInvalidRequest, func(t string, limit int) error { return UpdateRequest{Text: t}.CheckSize(limit) }},
		{"item.content", ErrInvalidRequest, func(t string, limit int) error { return ItemRequest{Item: MemoryItem{Content: t}}.CheckSize(limit) }},
		{"query", ErrInvalidRequest, func(t string, limit int) error { return ItemSearchRequest{Query: t}.CheckSize(limit) }},
		{"events[1]: invalid event: observation.tool_call.arguments", ErrInvalidRequest, func(t string, limit int) error {
			big := Envelope{Observation: &Observation{Role: RoleAssistant, ToolCall: &ToolCall{Name: "run", Arguments: json.RawMessage(t)}}}
			return SessionArchive{Events: []Envelope{{Observation: &Observation{Text: "short"}}, big}}.CheckSize(limit)
		}},
		{"items[1].content", ErrInvalidRequest, func(t string, limit int) error {
			return SessionArchive{Items: []MemoryItem{{Content: "short"}, {Content: t}}}.CheckSize(limit)
		}},
	}
}

// Every text an event or request stores is measured: one byte over the limit is
// refused naming the field, its size and the limit, wrapping ErrTooLarge and the
// kind's sentinel; at the limit, or with no limit (<= 0), it passes.
func TestCheckSizeMeasuresEveryText(t *testing.T) {
	const limit = 16
	at, over := `"`+strings.Repeat("a", limit-2)+`"`, `"`+strings.Repeat("a", limit-1)+`"`
	for _, s := range sizedTexts() {
		if err := s.check(at, limit); err != nil {
			t.Errorf("%s at the limit: %v", s.path, err)
		}
		err := s.check(over, limit)
		if !errors.Is(err, ErrTooLarge) || !errors.Is(err, s.sentinel) || !strings.Contains(err.Error(), s.path+" is 17 bytes, limit 16") {
			t.Errorf("%s one byte over: %v; want ErrTooLarge and %v naming the field, its size and the limit", s.path, err, s.sentinel)
		}
		for _, none := range []int{0, -1} {
			if err := s.check(over+strings.Repeat(" ", 100), none); err != nil {
				t.Errorf("%s with limit %d: %v", s.path, none, err)
			}
		}
	}
}
