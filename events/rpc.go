package events

import (
	"fmt"
	"strings"
	"time"
)

// Request/reply types of the retriever endpoints (memrpc.<tenant>.<endpoint>). The
// tenant comes from the subject, so requests carry only the user and what follows.
// Errors are not part of these types: the retriever answers a failed request with a
// NATS micro error (headers Nats-Service-Error and Nats-Service-Error-Code).

// Error codes the retriever puts in the Nats-Service-Error-Code header.
const (
	RPCCodeBadRequest  = "400" // the request broke the contract; the message says how
	RPCCodeNotFound    = "404" // the memory, item, topic or session does not exist
	RPCCodeInternal    = "500" // a store or model failed
	RPCCodeUnavailable = "503" // a dependency is down; retry later
	// RPCCodeTooLarge: the reply would not fit in one NATS message (the
	// connection's max_payload) and cannot be cut; the message names both sizes.
	RPCCodeTooLarge = "413"
	// RPCCodeQuota: the write would take the tenant over one of its quotas
	// (quotas.memories, quotas.markdown_bytes); the message names the key.
	RPCCodeQuota = "429"
)

// Limits of list-shaped requests, so one request cannot ask for the whole store.
const (
	MaxLimit     = 1000
	MaxIDsPerReq = 1000
)

// ContextRequest asks for a ContextPack (endpoint context).
type ContextRequest struct {
	UserID      string `json:"user_id"`
	AgentID     string `json:"agent_id,omitempty"`
	SessionID   string `json:"session_id,omitempty"`
	Query       string `json:"query,omitempty"` // empty: the whole core memory plus recent notes
	Lightweight bool   `json:"lightweight,omitempty"`
	MaxTokens   int    `json:"max_tokens,omitempty"` // 0: the retriever's default
	// RecordHits false asks for a preview: the pack's memories are not counted
	// as used (no memory_hit, so no hit count, reconsolidation or history
	// entry; SPEC C4 counts memories used). Absent means true: agents use what
	// they ask for; the inspector and the evals only look.
	RecordHits *bool `json:"record_hits,omitempty"`
}

// RecordsHits reports whether the pack's memories count as used: RecordHits,
// true when absent.
func (r ContextRequest) RecordsHits() bool { return r.RecordHits == nil || *r.RecordHits }

// NoHits is the RecordHits value of a preview.
func NoHits() *bool {
	no := false
	return &no
}

// Validate checks the request; errors wrap ErrInvalidRequest and name the field.
func (r ContextRequest) Validate() error {
	return wrap(ErrInvalidRequest, firstError(
		ValidateID("user_id", r.UserID),
		optionalID("agent_id", r.AgentID),
		optionalID("session_id", r.SessionID),
		nonNegative("max_tokens", r.MaxTokens),
	))
}

// MemoryType is the kind of a searchable memory.
type MemoryType string

// Memory types: the vector store's three, and markdown for chunks of the Markdown
// memory (MEMORY.md and daily notes) scored by keyword.
const (
	MemoryEpisodic MemoryType = "episodic"
	MemorySemantic MemoryType = "semantic"
	MemoryItemType MemoryType = "item"
	MemoryMarkdown MemoryType = "markdown"
)

// MemoryTypes lists every memory type.
var MemoryTypes = []MemoryType{MemoryEpisodic, MemorySemantic, MemoryItemType, MemoryMarkdown}

// SearchRequest searches a user's memories (endpoint search), with the agent
// scope of AgentID (when set) and the tenant scope: every result names its
// scope.
type SearchRequest struct {
	UserID      string       `json:"user_id"`
	AgentID     string       `json:"agent_id,omitempty"`
	Query       string       `json:"query"`
	Limit       int          `json:"limit,omitempty"`        // 0: the retriever's default
	MemoryTypes []MemoryType `json:"memory_types,omitempty"` // empty: all
}

// Validate checks the request; errors wrap ErrInvalidRequest and name the field.
func (r SearchRequest) Validate() error {
	err := firstError(
		ValidateID("user_id", r.UserID),
		optionalID("agent_id", r.AgentID),
		required("query", r.Query),
		limit("limit", r.Limit),
	)
	for i, t := range r.MemoryTypes {
		if err == nil && !oneOf(t, MemoryTypes) {
			err = enumError(indexed("memory_types", i), t, MemoryTypes)
		}
	}
	return wrap(ErrInvalidRequest, err)
}

// SearchReply answers SearchRequest, best first.
type SearchReply struct {
	Results []SearchResult `json:"results"`
	// Truncated is set when the lowest-ranked results were dropped so that the
	// reply fits in one NATS message (max_payload).
	Truncated bool `json:"truncated,omitempty"`
	// Degraded says why the results were found without a model, when they were
	// (e.g. "embedder unavailable: ..."; then the vector memories are ranked by
	// BM25 alone). Absent when nothing degraded.
	Degraded []string `json:"degraded,omitempty"`
}

// SearchResult is one found memory.
type SearchResult struct {
	ID         string     `json:"id"`
	MemoryType MemoryType `json:"memory_type"`
	Text       string     `json:"text"`
	// Context is an episodic memory's context, as in PackItem: Text is its
	// statement alone.
	Context  []string       `json:"context,omitempty"`
	Score    float64        `json:"score"`
	Metadata map[string]any `json:"metadata,omitempty"`
	Source   string         `json:"source,omitempty"` // Markdown file name, or the vector collection
	// Scope is the memory scope the result was found in.
	Scope MemoryScope `json:"scope"`
}

// Slot is where memory_append writes.
type Slot string

// Append slots (SPEC A9).
const (
	SlotLongTerm Slot = "long_term" // MEMORY.md, under a "## YYYY-MM-DD" heading
	SlotToday    Slot = "today"     // today's daily note
)

// Slots lists every slot.
var Slots = []Slot{SlotLongTerm, SlotToday}

// AppendRequest appends to the Markdown memory (endpoint append; the tenant
// scope through tenant.append) of Scope: the user's (user_id), AgentID's
// agent scope, or the tenant's.
type AppendRequest struct {
	UserID  string      `json:"user_id,omitempty"` // required for scope user
	Content string      `json:"content"`
	Slot    Slot        `json:"slot,omitempty"`     // empty: long_term
	Scope   MemoryScope `json:"scope,omitempty"`    // empty: user
	AgentID string      `json:"agent_id,omitempty"` // required for scope agent
}

// AppendReply answers append: the file written, relative to the user's memory
// directory (MEMORY.md, or today's note YYYYMM/YYYYMMDD.md).
type AppendReply struct {
	File string `json:"file"`
	Slot Slot   `json:"slot"`
}

// EffectiveSlot is Slot, or SlotLongTerm when empty.
func (r AppendRequest) EffectiveSlot() Slot {
	if r.Slot == "" {
		return SlotLongTerm
	}
	return r.Slot
}

// Validate checks the request; errors wrap ErrInvalidRequest and name the field.
func (r AppendRequest) Validate() error {
	err := firstError(validateScoped(r.Scope, r.UserID, r.AgentID), required("content", r.Content))
	if err == nil && !oneOf(r.EffectiveSlot(), Slots) {
		err = enumError("slot", r.Slot, Slots)
	}
	return wrap(ErrInvalidRequest, err)
}

// Topics are the topic names memory_read_topic accepts (SPEC A5); the whitelist is
// what keeps a topic from ever naming a path outside the memory directory.
var Topics = []string{"file_patterns", "user_prefs"}

// TopicFile maps a topic ("user_prefs" or "user_prefs.md") to its file name.
func TopicFile(topic string) (string, error) {
	name := strings.TrimSuffix(topic, ".md")
	if !oneOf(name, Topics) {
		return "", fmt.Errorf("%w: topic is %q; allowed topics are %q", ErrUnknownTopic, topic, Topics)
	}
	return name + ".md", nil
}

// TopicRequest reads one topic file (endpoint topic).
type TopicRequest struct {
	UserID string `json:"user_id"`
	Topic  string `json:"topic"`
}

// Validate checks the request; errors wrap ErrInvalidRequest (and ErrUnknownTopic).
func (r TopicRequest) Validate() error {
	err := ValidateID("user_id", r.UserID)
	if err == nil {
		_, err = TopicFile(r.Topic)
	}
	return wrap(ErrInvalidRequest, err)
}

// TopicReply answers TopicRequest; Content is empty when the file does not exist yet.
type TopicReply struct {
	Topic   string `json:"topic"`
	Content string `json:"content"`
}

// SessionRequest names one session (endpoints session.summary, session.clear,
// session.archive).
type SessionRequest struct {
	UserID    string `json:"user_id"`
	SessionID string `json:"session_id"`
}

// Validate checks the request; errors wrap ErrInvalidRequest and name the field.
func (r SessionRequest) Validate() error {
	return wrap(ErrInvalidRequest, validateIDs("user_id", r.UserID, "session_id", r.SessionID))
}

// SessionSummaryReply answers session.summary.
type SessionSummaryReply struct {
	SessionID    string `json:"session_id"`
	Summary      string `json:"summary"`
	MessageCount int    `json:"message_count"`
	TurnCount    int    `json:"turn_count"`
}

// SessionArchive is one JSON document holding a whole session: the reply of
// session.archive and the request of session.restore. Events are the original
// envelopes, so a restore re-publishes them with their IDs and stays idempotent.
type SessionArchive struct {
	SchemaVersion int          `json:"schema_version"`
	Tenant        string       `json:"tenant"`
	UserID        string       `json:"user_id"`
	SessionID     string       `json:"session_id"`
	ArchivedTS    time.Time    `json:"archived_ts"`
	Events        []Envelope   `json:"events,omitempty"`
	Turns         []TurnRecord `json:"turns,omitempty"`
	Items         []MemoryItem `json:"items,omitempty"` // the session-scoped memory items
	Summary       string       `json:"summary,omitempty"`
}

// Validate checks the archive and that everything in it belongs to its session;
// errors wrap ErrInvalidRequest, since an archive arrives as a restore request.
func (a SessionArchive) Validate() error {
	return wrap(ErrInvalidRequest, a.validate())
}

func (a *SessionArchive) validate() error {
	if a.SchemaVersion != SchemaVersion {
		return ruleError("schema_version", "is %d; this build knows only %d", a.SchemaVersion, SchemaVersion)
	}
	key, err := SessionKey(a.Tenant, a.UserID, a.SessionID)
	if err != nil {
		return err
	}
	if a.ArchivedTS.IsZero() {
		return ruleError("archived_ts", "is missing (zero time)")
	}
	for i, e := range a.Events {
		path := indexed("events", i)
		if err := e.validate(); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if e.sessionKey() != key {
			return ruleError(path, "belongs to session %q, not %q", e.sessionKey(), key)
		}
	}
	for i := range a.Turns {
		path := indexed("turns", i)
		if err := a.Turns[i].validate(path, true); err != nil {
			return err
		}
		if a.Turns[i].SessionKey != key {
			return ruleError(field(path, "session_key"), "is %q, not %q", a.Turns[i].SessionKey, key)
		}
	}
	for i := range a.Items {
		path := indexed("items", i)
		if err := a.Items[i].validate(path); err != nil {
			return err
		}
		if a.Items[i].SessionID != a.SessionID {
			return ruleError(field(path, "session_id"), "is %q, not %q (an archive holds only its session's items)", a.Items[i].SessionID, a.SessionID)
		}
	}
	return nil
}

// SessionRestoreReply answers session.restore with what was re-published or stored.
type SessionRestoreReply struct {
	SessionID string `json:"session_id"`
	Events    int    `json:"events"`
	Turns     int    `json:"turns"`
	Items     int    `json:"items"`
}

// AddRequest adds a memory through the write decision (endpoint add, mem0
// style; the tenant scope through tenant.add) to Scope's memory, as
// AppendRequest.
type AddRequest struct {
	UserID     string         `json:"user_id,omitempty"` // required for scope user
	Scope      MemoryScope    `json:"scope,omitempty"`   // empty: user
	AgentID    string         `json:"agent_id,omitempty"`
	Text       string         `json:"text"`
	MemoryType MemoryType     `json:"memory_type,omitempty"` // empty: episodic
	ChatID     string         `json:"chat_id,omitempty"`
	Who        string         `json:"who,omitempty"`
	Metadata   map[string]any `json:"metadata,omitempty"`
}

// EffectiveMemoryType is MemoryType, or MemoryEpisodic when empty.
func (r AddRequest) EffectiveMemoryType() MemoryType {
	if r.MemoryType == "" {
		return MemoryEpisodic
	}
	return r.MemoryType
}

// addableTypes are the memory types add writes; items have their own endpoints and
// Markdown has append.
var addableTypes = []MemoryType{MemoryEpisodic, MemorySemantic}

// Validate checks the request; errors wrap ErrInvalidRequest and name the field.
func (r AddRequest) Validate() error {
	err := firstError(validateScoped(r.Scope, r.UserID, r.AgentID), required("text", r.Text), optionalID("chat_id", r.ChatID))
	if err == nil && !oneOf(r.EffectiveMemoryType(), addableTypes) {
		err = enumError("memory_type", r.MemoryType, addableTypes)
	}
	return wrap(ErrInvalidRequest, err)
}

// AddReply lists the memories add wrote; empty when the write decision declined.
type AddReply struct {
	MemoryIDs []string `json:"memory_ids"`
}

// Memory is one vector-store memory as get returns it.
type Memory struct {
	ID         string         `json:"id"`
	MemoryType MemoryType     `json:"memory_type"`
	Text       string         `json:"text"`
	TS         time.Time      `json:"ts"`
	ChatID     string         `json:"chat_id,omitempty"`
	Who        string         `json:"who,omitempty"`
	HitCount   int            `json:"hit_count"`
	Metadata   map[string]any `json:"metadata,omitempty"`
}

// GetRequest reads one memory (endpoint get; reply Memory).
type GetRequest struct {
	UserID string `json:"user_id"`
	ID     string `json:"id"`
}

// Validate checks the request; errors wrap ErrInvalidRequest and name the field.
func (r GetRequest) Validate() error {
	return wrap(ErrInvalidRequest, validateIDs("user_id", r.UserID, "id", r.ID))
}

// UpdateRequest rewrites a memory's text and/or metadata (endpoint update; reply Memory).
type UpdateRequest struct {
	UserID   string         `json:"user_id"`
	ID       string         `json:"id"`
	Text     string         `json:"text,omitempty"`
	Metadata map[string]any `json:"metadata,omitempty"`
}

// Validate checks the request; errors wrap ErrInvalidRequest and name the field.
func (r UpdateRequest) Validate() error {
	err := validateIDs("user_id", r.UserID, "id", r.ID)
	if err == nil && r.Text == "" && len(r.Metadata) == 0 {
		err = ruleError("text", "or metadata is required: an update must change something")
	}
	return wrap(ErrInvalidRequest, err)
}

// DeleteRequest deletes memories by id (endpoint delete; reply DeleteReply).
type DeleteRequest struct {
	UserID string   `json:"user_id"`
	IDs    []string `json:"ids"`
}

// Validate checks the request; errors wrap ErrInvalidRequest and name the field.
func (r DeleteRequest) Validate() error {
	err := firstError(ValidateID("user_id", r.UserID), idList("ids", r.IDs, true))
	if err == nil && len(r.IDs) > MaxIDsPerReq {
		err = ruleError("ids", "holds %d ids; at most %d are allowed", len(r.IDs), MaxIDsPerReq)
	}
	return wrap(ErrInvalidRequest, err)
}

// DeleteReply says how many records a delete, session.clear, item.delete or
// item.delete_scope removed.
type DeleteReply struct {
	Deleted int `json:"deleted"`
}

// ResetRequest deletes every vector memory of a user (endpoint reset).
type ResetRequest struct {
	UserID string `json:"user_id"`
}

// Validate checks the request; errors wrap ErrInvalidRequest and name the field.
func (r ResetRequest) Validate() error {
	return wrap(ErrInvalidRequest, ValidateID("user_id", r.UserID))
}

// ResetReply says how many memories reset deleted (SPEC C2).
type ResetReply struct {
	Deleted int `json:"deleted"`
}

// HistoryRequest asks for the changes of one memory (endpoint history).
type HistoryRequest struct {
	UserID string `json:"user_id"`
	ID     string `json:"id"`
}

// Validate checks the request; errors wrap ErrInvalidRequest and name the field.
func (r HistoryRequest) Validate() error {
	return wrap(ErrInvalidRequest, validateIDs("user_id", r.UserID, "id", r.ID))
}

// HistoryReply lists a memory's changes, oldest first.
type HistoryReply struct {
	ID      string   `json:"id"`
	Changes []Change `json:"changes"`
	// Truncated is set when the oldest changes were dropped so that the reply
	// fits in one NATS message (max_payload).
	Truncated bool `json:"truncated,omitempty"`
}

// Change is one step in a memory's life.
type Change struct {
	TS     time.Time      `json:"ts"`
	Op     string         `json:"op"` // create (told from the record), add, update, reconsolidate, merge, separate, delete
	Text   string         `json:"text,omitempty"`
	Detail map[string]any `json:"detail,omitempty"`
}

// ConsolidateRequest runs consolidation for a user now (endpoint consolidate).
type ConsolidateRequest struct {
	UserID string `json:"user_id"`
}

// Validate checks the request; errors wrap ErrInvalidRequest and name the field.
func (r ConsolidateRequest) Validate() error {
	return wrap(ErrInvalidRequest, ValidateID("user_id", r.UserID))
}

// ConsolidateReply says what a consolidation run did (SPEC C6, C8, D4).
type ConsolidateReply struct {
	Merged          int `json:"merged"`
	Separated       int `json:"separated"`
	SemanticWritten int `json:"semantic_written"`
	ExpiredSwept    int `json:"expired_swept"`
}

// ItemRequest saves or updates one memory item (endpoints item.save,
// item.update; reply MemoryItem as stored). Scope is the memory scope item.save
// saves into, as AppendRequest (the tenant scope through tenant.item.save);
// item.update takes the user scope only.
type ItemRequest struct {
	UserID  string      `json:"user_id,omitempty"` // required for scope user
	Item    MemoryItem  `json:"item"`
	Scope   MemoryScope `json:"scope,omitempty"` // empty: user
	AgentID string      `json:"agent_id,omitempty"`
}

// Validate checks the request; errors wrap ErrInvalidRequest and name the field.
func (r ItemRequest) Validate() error {
	err := validateScoped(r.Scope, r.UserID, r.AgentID)
	if err == nil {
		err = r.Item.validate("item")
	}
	return wrap(ErrInvalidRequest, err)
}

// ItemKeyRequest names one memory item (endpoints item.get, item.delete).
type ItemKeyRequest struct {
	UserID    string   `json:"user_id"`
	Scope     Scope    `json:"scope"`
	Kind      ItemKind `json:"kind"`
	Key       string   `json:"key"`
	SessionID string   `json:"session_id,omitempty"` // required for scope session
}

// Validate checks the request; errors wrap ErrInvalidRequest and name the field.
func (r ItemKeyRequest) Validate() error {
	err := ValidateID("user_id", r.UserID)
	if err == nil && !oneOf(r.Scope, Scopes) {
		err = enumError("scope", r.Scope, Scopes)
	}
	if err == nil && !oneOf(r.Kind, ItemKinds) {
		err = enumError("kind", r.Kind, ItemKinds)
	}
	return wrap(ErrInvalidRequest, firstError(err, ValidateID("key", r.Key), validateItemSession("", r.Scope, r.SessionID)))
}

// ItemScopeRequest names the items of one scope (endpoints item.list,
// item.delete_scope); Limit and Offset page item.list.
type ItemScopeRequest struct {
	UserID    string `json:"user_id"`
	Scope     Scope  `json:"scope"`
	SessionID string `json:"session_id,omitempty"` // required for scope session
	Limit     int    `json:"limit,omitempty"`
	Offset    int    `json:"offset,omitempty"`
}

// Validate checks the request; errors wrap ErrInvalidRequest and name the field.
func (r ItemScopeRequest) Validate() error {
	err := ValidateID("user_id", r.UserID)
	if err == nil && !oneOf(r.Scope, Scopes) {
		err = enumError("scope", r.Scope, Scopes)
	}
	return wrap(ErrInvalidRequest, firstError(err, validateItemSession("", r.Scope, r.SessionID),
		limit("limit", r.Limit), nonNegative("offset", r.Offset)))
}

// ItemSearchRequest searches memory items by text (endpoint item.search).
type ItemSearchRequest struct {
	UserID string `json:"user_id"`
	Query  string `json:"query"`
	Scope  Scope  `json:"scope,omitempty"` // empty: every scope
	Limit  int    `json:"limit,omitempty"`
}

// Validate checks the request; errors wrap ErrInvalidRequest and name the field.
func (r ItemSearchRequest) Validate() error {
	err := firstError(ValidateID("user_id", r.UserID), required("query", r.Query), limit("limit", r.Limit))
	if err == nil && r.Scope != "" && !oneOf(r.Scope, Scopes) {
		err = enumError("scope", r.Scope, Scopes)
	}
	return wrap(ErrInvalidRequest, err)
}

// ItemListReply answers item.list and item.search; expired items are never in it.
type ItemListReply struct {
	Items []MemoryItem `json:"items"`
	// Truncated is set when the last items were dropped so that the reply fits in
	// one NATS message (max_payload).
	Truncated bool `json:"truncated,omitempty"`
}

func firstError(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func required(path, v string) error {
	if v == "" {
		return ruleError(path, "is required")
	}
	return nil
}

func nonNegative(path string, v int) error {
	if v < 0 {
		return ruleError(path, "is %d; it must not be negative", v)
	}
	return nil
}

func limit(path string, v int) error {
	if v < 0 || v > MaxLimit {
		return ruleError(path, "is %d; it must be between 0 (default) and %d", v, MaxLimit)
	}
	return nil
}

// EndpointForget erases a user everywhere (agentmem forget).
const EndpointForget = "forget"

// ForgetRequest erases one user of the tenant (endpoint forget): Markdown files
// with backups and policy files, vector memories and items, session state,
// summaries and turns, the workers' per-user state, the user's events in the
// stream (by subject), memory history and dead letters. There is no undo.
type ForgetRequest struct {
	UserID string `json:"user_id"`
}

// Validate checks the request; errors wrap ErrInvalidRequest and name the field.
func (r ForgetRequest) Validate() error {
	return wrap(ErrInvalidRequest, ValidateID("user_id", r.UserID))
}

// ForgetReply counts what forget removed, per store.
type ForgetReply struct {
	Files       int `json:"files"`        // Markdown files, backups, policy overrides and snapshots
	Memories    int `json:"memories"`     // episodic and semantic vector records
	Items       int `json:"items"`        // memory items
	SessionKeys int `json:"session_keys"` // session states, summaries, reflection claims
	Turns       int `json:"turns"`
	WorkerKeys  int `json:"worker_keys"` // extractor and consolidator records of the user
	Events      int `json:"events"`      // messages of the event stream
	History     int `json:"history"`     // memory history entries
	DeadLetters int `json:"dead_letters"`
	// Provenance counts the agent lessons' provenance records the user was
	// removed from (the lessons stay; memory.agent_learning).
	Provenance int `json:"provenance"`
}

// Total is the sum of the counts.
func (r ForgetReply) Total() int {
	return r.Files + r.Memories + r.Items + r.SessionKeys + r.Turns + r.WorkerKeys + r.Events + r.History + r.DeadLetters + r.Provenance
}
