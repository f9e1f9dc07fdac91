package events

import (
	"encoding/json"
	"strings"
)

// Role says who produced an observation.
type Role string

// Roles.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
	RoleSystem    Role = "system"
)

// Roles lists every role.
var Roles = []Role{RoleUser, RoleAssistant, RoleTool, RoleSystem}

// ObservationKind says what an observation records; empty means KindMessage.
type ObservationKind string

// Observation kinds.
const (
	KindMessage      ObservationKind = "message"
	KindToolCall     ObservationKind = "tool_call"
	KindToolResult   ObservationKind = "tool_result"
	KindTurnStarted  ObservationKind = "turn_started"
	KindTurnFinished ObservationKind = "turn_finished"
)

// ObservationKinds lists every observation kind.
var ObservationKinds = []ObservationKind{KindMessage, KindToolCall, KindToolResult, KindTurnStarted, KindTurnFinished}

// Observation is the body of an observation event: one message, tool call, tool
// result, or the start or end of a turn.
type Observation struct {
	Kind       ObservationKind `json:"kind,omitempty"`
	Role       Role            `json:"role"`
	Text       string          `json:"text,omitempty"`
	ToolCall   *ToolCall       `json:"tool_call,omitempty"`
	ToolResult *ToolResult     `json:"tool_result,omitempty"`
	Turn       *TurnRecord     `json:"turn,omitempty"` // for turn_started / turn_finished
	// Meta is free and kept unchanged through the pipeline (e.g. {"dia_id":"D1:3"});
	// memories built from this observation carry it in their provenance.
	Meta map[string]any `json:"meta,omitempty"`
}

// EffectiveKind is Kind, or KindMessage when Kind is empty.
func (o Observation) EffectiveKind() ObservationKind {
	if o.Kind == "" {
		return KindMessage
	}
	return o.Kind
}

// ToolCall is a tool invocation requested by the model.
type ToolCall struct {
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// ToolResult is what a tool returned for a call.
type ToolResult struct {
	CallID  string `json:"call_id,omitempty"`
	Name    string `json:"name,omitempty"`
	Output  string `json:"output,omitempty"`
	IsError bool   `json:"is_error,omitempty"`
}

// SessionEnded is the optional body of a session_ended event.
type SessionEnded struct {
	Reason string `json:"reason,omitempty"`
}

// MemoryHit is the body of a memory_hit event: the memories a context pack used.
type MemoryHit struct {
	MemoryIDs []string `json:"memory_ids"`
	Query     string   `json:"query,omitempty"`
	RequestID string   `json:"request_id,omitempty"`
}

// MemoryWritten is the body of a memory_written event: what a worker just stored.
type MemoryWritten struct {
	Entries         []WrittenEntry `json:"entries,omitempty"`    // Markdown entries
	MemoryIDs       []string       `json:"memory_ids,omitempty"` // vector-store records
	SourceSessionID string         `json:"source_session_id,omitempty"`
}

// WrittenEntry is one Markdown entry written to a file of the user's memory.
type WrittenEntry struct {
	File     string `json:"file"`               // relative name: MEMORY.md, user_prefs.md, 202611/20261122.md
	Category string `json:"category,omitempty"` // file_pattern, user_pref, error_solution, general
	Content  string `json:"content"`
}

// ConsolidateRequested is the optional body of a consolidate_requested event.
type ConsolidateRequested struct {
	Reason string `json:"reason,omitempty"`
}

// validate checks the observation; sessionKey is the envelope's, which a turn must
// match when it names one.
func (o *Observation) validate(path, sessionKey string) error {
	if !oneOf(o.Role, Roles) {
		return enumError(field(path, "role"), o.Role, Roles)
	}
	kind := o.EffectiveKind()
	switch kind {
	case KindMessage:
		if o.Text == "" {
			return ruleError(field(path, "text"), "is required for kind message")
		}
		if strings.TrimSpace(o.Text) == "" {
			return ruleError(field(path, "text"), "is empty or whitespace")
		}
	case KindToolCall:
		if o.ToolCall == nil {
			return ruleError(field(path, "tool_call"), "is required for kind tool_call")
		}
		if err := o.ToolCall.validate(field(path, "tool_call")); err != nil {
			return err
		}
	case KindToolResult:
		if o.ToolResult == nil {
			return ruleError(field(path, "tool_result"), "is required for kind tool_result")
		}
		if err := o.ToolResult.validate(field(path, "tool_result")); err != nil {
			return err
		}
	case KindTurnStarted, KindTurnFinished:
		if o.Turn == nil {
			return ruleError(field(path, "turn"), "is required for kind %s", kind)
		}
		if err := o.Turn.validate(field(path, "turn"), false); err != nil {
			return err
		}
		if o.Turn.SessionKey != "" && o.Turn.SessionKey != sessionKey {
			return ruleError(field(path, "turn.session_key"), "is %q but the event belongs to session %q", o.Turn.SessionKey, sessionKey)
		}
		running := o.Turn.Status == TurnRunning
		if running != (kind == KindTurnStarted) {
			return ruleError(field(path, "turn.status"), "is %q, which does not fit kind %s (turn_started needs running, turn_finished ok, error or timeout)", o.Turn.Status, kind)
		}
	default:
		return enumError(field(path, "kind"), o.Kind, ObservationKinds)
	}
	return nil
}

func (c *ToolCall) validate(path string) error {
	if c.Name == "" {
		return ruleError(field(path, "name"), "is required")
	}
	if err := optionalID(field(path, "id"), c.ID); err != nil {
		return err
	}
	if len(c.Arguments) > 0 && !json.Valid(c.Arguments) {
		return ruleError(field(path, "arguments"), "is not valid JSON")
	}
	return nil
}

func (r *ToolResult) validate(path string) error {
	if r.CallID == "" && r.Name == "" {
		return ruleError(path, "needs call_id or name to say which call it answers")
	}
	return optionalID(field(path, "call_id"), r.CallID)
}

func (h *MemoryHit) validate(path string) error {
	if err := idList(field(path, "memory_ids"), h.MemoryIDs, true); err != nil {
		return err
	}
	return optionalID(field(path, "request_id"), h.RequestID)
}

func (w *MemoryWritten) validate(path string) error {
	if len(w.Entries) == 0 && len(w.MemoryIDs) == 0 {
		return ruleError(path, "needs at least one entry or memory id")
	}
	for i, entry := range w.Entries {
		p := indexed(field(path, "entries"), i)
		if err := validateRelativeFile(field(p, "file"), entry.File); err != nil {
			return err
		}
		if entry.Content == "" {
			return ruleError(field(p, "content"), "is required")
		}
	}
	if err := idList(field(path, "memory_ids"), w.MemoryIDs, false); err != nil {
		return err
	}
	return optionalID(field(path, "source_session_id"), w.SourceSessionID)
}

// validateRelativeFile accepts a slash-separated name inside a memory directory:
// every element a valid ID, optionally ending in ".md" or ".json".
func validateRelativeFile(path, name string) error {
	if name == "" {
		return ruleError(path, "is required")
	}
	for _, elem := range strings.Split(name, "/") {
		base := elem
		for _, ext := range []string{".md", ".json"} {
			if b, ok := strings.CutSuffix(elem, ext); ok {
				base = b
				break
			}
		}
		if err := ValidateID(path, base); err != nil {
			return ruleError(path, "is %q; it must be a relative name whose elements are IDs, optionally ending in .md or .json", name)
		}
	}
	return nil
}

// SummaryDue is the body of a summary_due event (SPEC B2): the session had
// Messages message observations, Tokens of them estimated, when ingest saw it
// pass session_summary_message_threshold or session_summary_token_percent of
// the context window. The extractor summarises what is new since the last
// summary; a redelivery or a later summary_due of a session already summarised
// that far changes nothing.
type SummaryDue struct {
	Messages int `json:"messages"`
	Tokens   int `json:"tokens,omitempty"`
}

func (s *SummaryDue) validate(path string) error {
	if s.Messages < 1 {
		return ruleError(path+".messages", "is %d; must be at least 1", s.Messages)
	}
	if s.Tokens < 0 {
		return ruleError(path+".tokens", "is %d; must not be negative", s.Tokens)
	}
	return nil
}
