package events

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// SessionKey is the one-string name of a session used by the records of SPEC D1:
// "<tenant>.<user>.<session>". The dots cannot occur inside valid IDs, so the key
// splits back unambiguously (ParseSessionKey).
func SessionKey(tenant, user, session string) (string, error) {
	if err := validateIDs("tenant", tenant, "user", user, "session", session); err != nil {
		return "", wrap(ErrInvalidRecord, err)
	}
	return tenant + "." + user + "." + session, nil
}

// ParseSessionKey splits a key made by SessionKey.
func ParseSessionKey(key string) (tenant, user, session string, err error) {
	if err := validateSessionKey("session_key", key); err != nil {
		return "", "", "", wrap(ErrInvalidRecord, err)
	}
	parts := strings.Split(key, ".")
	return parts[0], parts[1], parts[2], nil
}

func validateSessionKey(path, key string) error {
	parts := strings.Split(key, ".")
	if len(parts) != 3 {
		return ruleError(path, "is %q; it must be <tenant>.<user>.<session>", key)
	}
	return validateIDs(path+" tenant", parts[0], path+" user", parts[1], path+" session", parts[2])
}

// finite rejects NaN and ±Inf, which JSON cannot carry.
func finite(path string, v float64) error {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return ruleError(path, "is %v; it must be a finite number", v)
	}
	return nil
}

// Gate is the write decision ingest took for an observation (SPEC C3).
type Gate struct {
	Write  bool    `json:"write"`
	Reason string  `json:"reason,omitempty"`
	Score  float64 `json:"score,omitempty"`
}

// EventRecord is one stored event of a session (SPEC D1); Envelope.Record builds it.
type EventRecord struct {
	EventID       string         `json:"event_id"`
	Type          Type           `json:"type,omitempty"`
	TS            time.Time      `json:"ts"`
	SessionKey    string         `json:"session_key"`
	AgentID       string         `json:"agent_id,omitempty"`
	Obs           *Observation   `json:"obs,omitempty"`
	Gate          *Gate          `json:"gate,omitempty"`
	Meta          map[string]any `json:"meta,omitempty"`
	SchemaVersion int            `json:"schema_version"`
}

// Validate checks the record; errors wrap ErrInvalidRecord and name the field.
func (r EventRecord) Validate() error {
	return wrap(ErrInvalidRecord, r.validate(""))
}

func (r EventRecord) validate(path string) error {
	if err := ValidateID(field(path, "event_id"), r.EventID); err != nil {
		return err
	}
	if r.TS.IsZero() {
		return ruleError(field(path, "ts"), "is missing (zero time)")
	}
	if err := validateSessionKey(field(path, "session_key"), r.SessionKey); err != nil {
		return err
	}
	if err := optionalID(field(path, "agent_id"), r.AgentID); err != nil {
		return err
	}
	if r.SchemaVersion < 1 || r.SchemaVersion > SchemaVersion {
		return ruleError(field(path, "schema_version"), "is %d; it must be between 1 and %d", r.SchemaVersion, SchemaVersion)
	}
	if r.Type != "" && r.Type != TypeObservation && r.Type != TypeSessionEnded {
		return ruleError(field(path, "type"), "is %q; a session's records are observation or session_ended", r.Type)
	}
	if r.Type == TypeObservation && r.Obs == nil {
		return ruleError(field(path, "obs"), "is required for type observation")
	}
	if r.Obs != nil {
		if err := r.Obs.validate(field(path, "obs"), r.SessionKey); err != nil {
			return err
		}
	}
	if r.Gate != nil {
		return finite(field(path, "gate.score"), r.Gate.Score)
	}
	return nil
}

// TurnStatus is the state of a turn.
type TurnStatus string

// Turn statuses; running is the only one without a finished_ts.
const (
	TurnRunning TurnStatus = "running"
	TurnOK      TurnStatus = "ok"
	TurnError   TurnStatus = "error"
	TurnTimeout TurnStatus = "timeout"
)

// TurnStatuses lists every turn status.
var TurnStatuses = []TurnStatus{TurnRunning, TurnOK, TurnError, TurnTimeout}

// TurnRecord is one agent turn: the input event, the plan, the tool calls and
// results, and the final output (SPEC D1).
type TurnRecord struct {
	TurnID           string         `json:"turn_id"`
	SessionKey       string         `json:"session_key,omitempty"` // required when stored; inside an observation it defaults to the event's session
	InputEventID     string         `json:"input_event_id,omitempty"`
	Plan             string         `json:"plan,omitempty"`
	ToolCalls        []ToolCall     `json:"tool_calls,omitempty"`
	ToolResults      []ToolResult   `json:"tool_results,omitempty"`
	FinalOutputObsID string         `json:"final_output_obs_id,omitempty"`
	StartedTS        time.Time      `json:"started_ts"`
	FinishedTS       time.Time      `json:"finished_ts,omitzero"`
	Status           TurnStatus     `json:"status"`
	Error            string         `json:"error,omitempty"`
	Meta             map[string]any `json:"meta,omitempty"`
}

// Validate checks a stored turn; errors wrap ErrInvalidRecord and name the field.
func (t TurnRecord) Validate() error {
	return wrap(ErrInvalidRecord, t.validate("", true))
}

func (t *TurnRecord) validate(path string, requireKey bool) error {
	if err := ValidateID(field(path, "turn_id"), t.TurnID); err != nil {
		return err
	}
	if requireKey || t.SessionKey != "" {
		if err := validateSessionKey(field(path, "session_key"), t.SessionKey); err != nil {
			return err
		}
	}
	if err := optionalID(field(path, "input_event_id"), t.InputEventID); err != nil {
		return err
	}
	if err := optionalID(field(path, "final_output_obs_id"), t.FinalOutputObsID); err != nil {
		return err
	}
	for i := range t.ToolCalls {
		if err := t.ToolCalls[i].validate(indexed(field(path, "tool_calls"), i)); err != nil {
			return err
		}
	}
	for i := range t.ToolResults {
		if err := t.ToolResults[i].validate(indexed(field(path, "tool_results"), i)); err != nil {
			return err
		}
	}
	if !oneOf(t.Status, TurnStatuses) {
		return enumError(field(path, "status"), t.Status, TurnStatuses)
	}
	if t.StartedTS.IsZero() {
		return ruleError(field(path, "started_ts"), "is missing (zero time)")
	}
	switch {
	case t.Status == TurnRunning && !t.FinishedTS.IsZero():
		return ruleError(field(path, "finished_ts"), "must be empty while status is running")
	case t.Status != TurnRunning && t.FinishedTS.IsZero():
		return ruleError(field(path, "finished_ts"), "is required once status is %s", t.Status)
	case t.FinishedTS.Before(t.StartedTS) && !t.FinishedTS.IsZero():
		return ruleError(field(path, "finished_ts"), "is before started_ts")
	}
	return nil
}

// Scope says whom a memory item belongs to.
type Scope string

// Scopes of memory items.
const (
	ScopePersona  Scope = "persona"
	ScopeUser     Scope = "user"
	ScopeSession  Scope = "session"
	ScopeEpisodic Scope = "episodic"
	ScopeGlobal   Scope = "global"
)

// Scopes lists every scope.
var Scopes = []Scope{ScopePersona, ScopeUser, ScopeSession, ScopeEpisodic, ScopeGlobal}

// ItemKind says what a memory item states.
type ItemKind string

// Kinds of memory items.
const (
	ItemFact       ItemKind = "fact"
	ItemPreference ItemKind = "preference"
	ItemGoal       ItemKind = "goal"
	ItemConstraint ItemKind = "constraint"
	ItemNote       ItemKind = "note"
)

// ItemKinds lists every item kind.
var ItemKinds = []ItemKind{ItemFact, ItemPreference, ItemGoal, ItemConstraint, ItemNote}

// MaxTTLSec bounds ttl_sec (100 years) so that expiry arithmetic cannot overflow.
const MaxTTLSec = 100 * 365 * 24 * 60 * 60

// MemoryItem is a keyed structured memory (SPEC D1, D4), identified by (scope, kind,
// key) within a user, and within a session for scope session.
type MemoryItem struct {
	Scope      Scope          `json:"scope"`
	Kind       ItemKind       `json:"kind"`
	Key        string         `json:"key"`
	SessionID  string         `json:"session_id,omitempty"` // set exactly when scope is session
	Content    string         `json:"content"`
	Data       map[string]any `json:"data,omitempty"`
	Source     string         `json:"source,omitempty"`
	Confidence float64        `json:"confidence"` // 0..1
	CreatedTS  time.Time      `json:"created_ts,omitzero"`
	UpdatedTS  time.Time      `json:"updated_ts,omitzero"`
	TTLSec     int64          `json:"ttl_sec,omitempty"` // 0: never expires
	Meta       map[string]any `json:"meta,omitempty"`
}

// Validate checks the item; errors wrap ErrInvalidRecord and name the field. The
// timestamps may be empty in a save request: the store sets them.
func (m MemoryItem) Validate() error {
	return wrap(ErrInvalidRecord, m.validate(""))
}

func (m *MemoryItem) validate(path string) error {
	if !oneOf(m.Scope, Scopes) {
		return enumError(field(path, "scope"), m.Scope, Scopes)
	}
	if !oneOf(m.Kind, ItemKinds) {
		return enumError(field(path, "kind"), m.Kind, ItemKinds)
	}
	if err := ValidateID(field(path, "key"), m.Key); err != nil {
		return err
	}
	if err := validateItemSession(path, m.Scope, m.SessionID); err != nil {
		return err
	}
	if m.Content == "" {
		return ruleError(field(path, "content"), "is required")
	}
	if math.IsNaN(m.Confidence) || m.Confidence < 0 || m.Confidence > 1 {
		return ruleError(field(path, "confidence"), "is %v; it must be between 0 and 1", m.Confidence)
	}
	if m.TTLSec < 0 || m.TTLSec > MaxTTLSec {
		return ruleError(field(path, "ttl_sec"), "is %d; it must be between 0 (never expires) and %d", m.TTLSec, MaxTTLSec)
	}
	if !m.CreatedTS.IsZero() && !m.UpdatedTS.IsZero() && m.UpdatedTS.Before(m.CreatedTS) {
		return ruleError(field(path, "updated_ts"), "is before created_ts")
	}
	return nil
}

// validateItemSession: session-scoped items name their session, others must not,
// so one item has exactly one identity.
func validateItemSession(path string, scope Scope, sessionID string) error {
	if scope == ScopeSession {
		if err := ValidateID(field(path, "session_id"), sessionID); err != nil {
			return fmt.Errorf("%w (required for scope session)", err)
		}
		return nil
	}
	if sessionID != "" {
		return ruleError(field(path, "session_id"), "must be empty for scope %s", scope)
	}
	return nil
}

// ExpiresAt is when the item expires, counted from its last update (or creation);
// ok is false when it never expires.
func (m MemoryItem) ExpiresAt() (at time.Time, ok bool) {
	if m.TTLSec <= 0 {
		return time.Time{}, false
	}
	base := m.UpdatedTS
	if base.IsZero() {
		base = m.CreatedTS
	}
	return base.Add(time.Duration(min(m.TTLSec, MaxTTLSec)) * time.Second), true
}

// IsExpired reports whether the item's TTL has run out at now; ttl_sec 0 never does.
// An item expires at the instant its age equals its TTL.
func (m MemoryItem) IsExpired(now time.Time) bool {
	at, ok := m.ExpiresAt()
	return ok && !now.Before(at)
}

// PackItemKind says where a context-pack item came from.
type PackItemKind string

// Kinds of context-pack items.
const (
	PackKindCore      PackItemKind = "core"       // head of MEMORY.md
	PackKindTopic     PackItemKind = "topic"      // a topic file
	PackKindChunk     PackItemKind = "chunk"      // a keyword-matched chunk of MEMORY.md
	PackKindDailyNote PackItemKind = "daily_note" // a recent daily note
	PackKindEpisodic  PackItemKind = "episodic"   // vector store, episodic memory
	PackKindSemantic  PackItemKind = "semantic"   // vector store, semantic memory
	PackKindItem      PackItemKind = "item"       // a memory item found by search
	PackKindTurn      PackItemKind = "turn"       // a relevant session turn
)

// PackItemKinds lists every pack item kind.
var PackItemKinds = []PackItemKind{
	PackKindCore, PackKindTopic, PackKindChunk, PackKindDailyNote,
	PackKindEpisodic, PackKindSemantic, PackKindItem, PackKindTurn,
}

// Provenance says where a memory came from, down to the observation meta of the
// events it was built from (e.g. [{"dia_id":"D1:3"}]).
type Provenance struct {
	File       string           `json:"file,omitempty"` // relative Markdown file, for file-based memories
	EventIDs   []string         `json:"event_ids,omitempty"`
	SessionIDs []string         `json:"session_ids,omitempty"`
	Meta       []map[string]any `json:"meta,omitempty"`
}

func (p *Provenance) validate(path string) error {
	if p.File != "" {
		if err := validateRelativeFile(field(path, "file"), p.File); err != nil {
			return err
		}
	}
	if err := idList(field(path, "event_ids"), p.EventIDs, false); err != nil {
		return err
	}
	return idList(field(path, "session_ids"), p.SessionIDs, false)
}

// PackItem is one piece of text in a context pack, with its provenance.
type PackItem struct {
	ID   string       `json:"id,omitempty"` // memory id; required for episodic and semantic (hit counting)
	Kind PackItemKind `json:"kind"`
	Text string       `json:"text"`
	// Context, for an episodic memory, is what was said just before its
	// statement ("Who: text" each, oldest first): shown apart from Text, the
	// statement, as the situation it was said in, not as more facts.
	Context []string   `json:"context,omitempty"`
	Score   float64    `json:"score,omitempty"`
	Source  Provenance `json:"source"`
	// Scope is the memory scope the item comes from.
	Scope MemoryScope `json:"scope"`
}

// validate checks the item of a list of kind want (any kind when "") and of
// memory scope scope (the user's lists may leave it out).
func (it *PackItem) validate(path string, want PackItemKind, scope MemoryScope) error {
	if want != "" && it.Kind != want {
		return ruleError(field(path, "kind"), "is %q; items of this list are %q", it.Kind, want)
	}
	if !oneOf(it.Kind, PackItemKinds) {
		return enumError(field(path, "kind"), it.Kind, PackItemKinds)
	}
	if it.Kind == PackKindEpisodic || it.Kind == PackKindSemantic {
		if err := ValidateID(field(path, "id"), it.ID); err != nil {
			return err
		}
	}
	if it.Text == "" {
		return ruleError(field(path, "text"), "is required")
	}
	if it.Scope != scope && (scope != MemoryScopeUser || it.Scope != "") {
		return ruleError(field(path, "scope"), "is %q; items of this list are of scope %q", it.Scope, scope)
	}
	if err := finite(field(path, "score"), it.Score); err != nil {
		return err
	}
	return it.Source.validate(field(path, "source"))
}

// PackCounts holds the length of every list of a ContextPack, and their sum.
type PackCounts struct {
	Persona       int `json:"persona"`
	UserProfile   int `json:"user_profile"`
	SessionItems  int `json:"session_items"`
	EpisodicItems int `json:"episodic_items"`
	SemanticItems int `json:"semantic_items"`
	Core          int `json:"core"`
	Topics        int `json:"topics"`
	Chunks        int `json:"chunks"`
	DailyNotes    int `json:"daily_notes"`
	RecentEvents  int `json:"recent_events"`
	RecentTurns   int `json:"recent_turns"`
	AgentItems    int `json:"agent_items"`
	TenantItems   int `json:"tenant_items"`
	Total         int `json:"total"`
}

// SummarySource is the range of a session's messages its summary stands for
// (SPEC B2): Messages of them, from FirstEventID to LastEventID, Dropped of them
// dropped unsummarised by the emergency path; By is who wrote the latest part
// ("llm", "rules" or "emergency" for the extractor's running summary, "digest"
// for the retriever's).
type SummarySource struct {
	FirstEventID string `json:"first_event_id"`
	LastEventID  string `json:"last_event_id"`
	Messages     int    `json:"messages"`
	Dropped      int    `json:"dropped,omitempty"`
	By           string `json:"by"`
	// Parts are the summary's parts in text order, each with its own range: the
	// running summary the extractor wrote, then the digest the retriever made of
	// the messages after it that the pack does not hold verbatim (By "digest").
	Parts []SummarySource `json:"parts,omitempty"`
}

// SummaryByDigest is SummarySource.By of the part of a session summary the
// retriever digests at request time.
const SummaryByDigest = "digest"

// Handover is the user's previous session as the next agent needs it, when
// another agent held it: who held it, its summary (the running summary and a
// digest of the messages after it, as session.summary gives it) and what it
// left open: its session items and the turns that did not finish ok.
type Handover struct {
	AgentID   string       `json:"agent_id"`
	SessionID string       `json:"session_id"`
	StartedTS time.Time    `json:"started_ts,omitzero"`
	Summary   string       `json:"summary,omitempty"`
	OpenItems []MemoryItem `json:"open_items,omitempty"`
	OpenTurns []TurnRecord `json:"open_turns,omitempty"`
}

func (h *Handover) validate() error {
	if err := validateIDs("handover.agent_id", h.AgentID, "handover.session_id", h.SessionID); err != nil {
		return err
	}
	for i := range h.OpenItems {
		path := indexed("handover.open_items", i)
		if h.OpenItems[i].Scope != ScopeSession || h.OpenItems[i].SessionID != h.SessionID {
			return ruleError(path, "is of scope %q, session %q; open items are session items of session %q", h.OpenItems[i].Scope, h.OpenItems[i].SessionID, h.SessionID)
		}
		if err := h.OpenItems[i].validate(path); err != nil {
			return err
		}
	}
	for i := range h.OpenTurns {
		if err := h.OpenTurns[i].validate(indexed("handover.open_turns", i), true); err != nil {
			return err
		}
	}
	return nil
}

// ContextPack is what an agent should know right now (SPEC D1, D5); it is also the
// reply of the context endpoint. Prompt is the rendered text for a system prompt.
type ContextPack struct {
	Tenant    string `json:"tenant"`
	UserID    string `json:"user_id"`
	SessionID string `json:"session_id,omitempty"`
	Query     string `json:"query,omitempty"`

	Persona       []MemoryItem `json:"persona,omitempty"`
	UserProfile   []MemoryItem `json:"user_profile,omitempty"`
	SessionItems  []MemoryItem `json:"session_items,omitempty"`
	EpisodicItems []PackItem   `json:"episodic_items,omitempty"`
	SemanticItems []PackItem   `json:"semantic_items,omitempty"`
	Core          *PackItem    `json:"core,omitempty"`
	Topics        []PackItem   `json:"topics,omitempty"`
	Chunks        []PackItem   `json:"chunks,omitempty"`
	DailyNotes    []PackItem   `json:"daily_notes,omitempty"`
	// AgentItems are the request agent's agent-scope memories found for the
	// query (or, without one, the head of its MEMORY.md and its items), best
	// first; TenantItems the tenant scope's, the same way. The user's memory is
	// every list above.
	AgentItems  []PackItem `json:"agent_items,omitempty"`
	TenantItems []PackItem `json:"tenant_items,omitempty"`

	RecentEvents   []EventRecord `json:"recent_events,omitempty"`
	RecentTurns    []TurnRecord  `json:"recent_turns,omitempty"`
	SessionSummary string        `json:"session_summary,omitempty"`
	// SessionSummarySource is the provenance of SessionSummary: the range of the
	// session's messages it stands for, none of which is in RecentEvents (SPEC B2).
	SessionSummarySource *SummarySource `json:"session_summary_source,omitempty"`
	// Handover is what the user's previous session left, when another agent than
	// the requesting one (the request's agent_id) held it.
	Handover *Handover `json:"handover,omitempty"`

	Counts        PackCounts `json:"counts"`
	TokenEstimate int        `json:"token_estimate"`
	// BudgetTokens is the token budget the prompt was filled within: the
	// request's max_tokens, or the retriever's default budget. The core memory is
	// always sent whole, so a core larger than the budget exceeds it.
	BudgetTokens int `json:"budget_tokens,omitempty"`
	// Sections lists the prompt's sections in prompt order, each with the
	// entries it kept, the entries the budget left out, and its estimated tokens
	// (its runes, heading included, / 4 rounded up).
	Sections []PackSection `json:"sections,omitempty"`
	Prompt   string        `json:"prompt"`
	// Truncated is set when the pack would not fit in one NATS message
	// (max_payload): the retriever dropped its lowest-priority items, and cut the
	// core memory to its first lines when even that was not enough.
	Truncated bool `json:"truncated,omitempty"`
	// Degraded says what the pack was built without, when a model it would use
	// was unavailable (e.g. "embedder unavailable: ...": episodic and semantic
	// items then come from BM25 alone). Absent when nothing degraded.
	Degraded []string `json:"degraded,omitempty"`
}

// PackSection is one section of a context pack's prompt. Name is the list behind
// it: persona, user_profile, core, topics, chunks, daily_notes, semantic_items,
// episodic_items, session_items or recent_events.
type PackSection struct {
	Name    string `json:"name"`
	Entries int    `json:"entries"`
	Dropped int    `json:"dropped,omitempty"`
	Tokens  int    `json:"tokens"`
}

// Recount sets Counts from the lists.
func (p *ContextPack) Recount() {
	p.Counts = p.count()
}

func (p *ContextPack) count() PackCounts {
	c := PackCounts{
		Persona:       len(p.Persona),
		UserProfile:   len(p.UserProfile),
		SessionItems:  len(p.SessionItems),
		EpisodicItems: len(p.EpisodicItems),
		SemanticItems: len(p.SemanticItems),
		Topics:        len(p.Topics),
		Chunks:        len(p.Chunks),
		DailyNotes:    len(p.DailyNotes),
		RecentEvents:  len(p.RecentEvents),
		RecentTurns:   len(p.RecentTurns),
		AgentItems:    len(p.AgentItems),
		TenantItems:   len(p.TenantItems),
	}
	if p.Core != nil {
		c.Core = 1
	}
	c.Total = c.Persona + c.UserProfile + c.SessionItems + c.EpisodicItems + c.SemanticItems +
		c.Core + c.Topics + c.Chunks + c.DailyNotes + c.RecentEvents + c.RecentTurns + c.AgentItems + c.TenantItems
	return c
}

// Validate checks the pack, every item in it, that each list holds only its own
// scope or kind, and that Counts matches the lists; errors wrap ErrInvalidRecord.
func (p ContextPack) Validate() error {
	return wrap(ErrInvalidRecord, p.validate())
}

func (p *ContextPack) validate() error {
	if err := validateIDs("tenant", p.Tenant, "user_id", p.UserID); err != nil {
		return err
	}
	if err := optionalID("session_id", p.SessionID); err != nil {
		return err
	}
	itemLists := []struct {
		name  string
		items []MemoryItem
		scope Scope
	}{
		{"persona", p.Persona, ScopePersona},
		{"user_profile", p.UserProfile, ScopeUser},
		{"session_items", p.SessionItems, ScopeSession},
	}
	for _, l := range itemLists {
		for i := range l.items {
			path := indexed(l.name, i)
			if l.items[i].Scope != l.scope {
				return ruleError(field(path, "scope"), "is %q; items of %s have scope %q", l.items[i].Scope, l.name, l.scope)
			}
			if err := l.items[i].validate(path); err != nil {
				return err
			}
		}
	}
	packLists := []struct {
		name  string
		items []PackItem
		kind  PackItemKind
		scope MemoryScope
	}{
		{"episodic_items", p.EpisodicItems, PackKindEpisodic, MemoryScopeUser},
		{"semantic_items", p.SemanticItems, PackKindSemantic, MemoryScopeUser},
		{"topics", p.Topics, PackKindTopic, MemoryScopeUser},
		{"chunks", p.Chunks, PackKindChunk, MemoryScopeUser},
		{"daily_notes", p.DailyNotes, PackKindDailyNote, MemoryScopeUser},
		{"agent_items", p.AgentItems, "", MemoryScopeAgent},
		{"tenant_items", p.TenantItems, "", MemoryScopeTenant},
	}
	for _, l := range packLists {
		for i := range l.items {
			if err := l.items[i].validate(indexed(l.name, i), l.kind, l.scope); err != nil {
				return err
			}
		}
	}
	if p.Core != nil {
		if err := p.Core.validate("core", PackKindCore, MemoryScopeUser); err != nil {
			return err
		}
	}
	if p.Handover != nil {
		if err := p.Handover.validate(); err != nil {
			return err
		}
	}
	for i := range p.RecentEvents {
		if err := p.RecentEvents[i].validate(indexed("recent_events", i)); err != nil {
			return err
		}
	}
	for i := range p.RecentTurns {
		if err := p.RecentTurns[i].validate(indexed("recent_turns", i), true); err != nil {
			return err
		}
	}
	if want := p.count(); p.Counts != want {
		return ruleError("counts", "is %+v but the lists hold %+v (call Recount)", p.Counts, want)
	}
	if p.TokenEstimate < 0 {
		return ruleError("token_estimate", "is %d; it must not be negative", p.TokenEstimate)
	}
	if p.BudgetTokens < 0 {
		return ruleError("budget_tokens", "is %d; it must not be negative", p.BudgetTokens)
	}
	for i, s := range p.Sections {
		if s.Name == "" || s.Entries < 0 || s.Dropped < 0 || s.Tokens < 0 {
			return ruleError(indexed("sections", i), "is %+v; it needs a name and no negative count", s)
		}
	}
	return nil
}
