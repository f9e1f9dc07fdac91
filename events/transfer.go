package events

import (
	"encoding/json"
	"fmt"
	"time"
)

// Endpoints of export and import (agentmem export / import): a namespace's derived
// memory read out and written back in pages, each of which fits one NATS message.
const (
	EndpointExport = "export"
	EndpointImport = "import"
)

// ExportPart is what one export request reads.
type ExportPart string

// Export parts. Info needs no user; the others page through one user's stores.
const (
	ExportInfo     ExportPart = "info"     // the embedder and the tenant's users
	ExportFiles    ExportPart = "files"    // Markdown files, backups, policy overrides and snapshots
	ExportRecords  ExportPart = "records"  // vector memories and memory items, with vectors
	ExportSessions ExportPart = "sessions" // session state, summaries and turns (KV)
)

// ExportParts lists every part.
var ExportParts = []ExportPart{ExportInfo, ExportFiles, ExportRecords, ExportSessions}

// ExportRequest asks for one page of a part (endpoint export). Cursor is "" for
// the first page, then the previous reply's Next.
type ExportRequest struct {
	UserID string     `json:"user_id,omitempty"`
	Part   ExportPart `json:"part"`
	Cursor string     `json:"cursor,omitempty"`
	// Limit bounds the entries of a page (0: as many as fit one message).
	Limit int `json:"limit,omitempty"`
}

// Validate checks the request; errors wrap ErrInvalidRequest and name the field.
func (r ExportRequest) Validate() error {
	if !oneOf(r.Part, ExportParts) {
		return wrap(ErrInvalidRequest, enumError("part", r.Part, ExportParts))
	}
	if r.Part == ExportInfo {
		return wrap(ErrInvalidRequest, optionalID("user_id", r.UserID))
	}
	return wrap(ErrInvalidRequest, firstError(ValidateID("user_id", r.UserID), limit("limit", r.Limit)))
}

// EmbedderInfo names the embedder whose vectors a deployment stores.
type EmbedderInfo struct {
	Model      string `json:"model"`
	Dimensions int    `json:"dimensions"`
}

// ExportReply is one page. Next is "" after the last page of the part.
type ExportReply struct {
	Embedder *EmbedderInfo `json:"embedder,omitempty"` // part info
	Users    []string      `json:"users,omitempty"`    // part info: users with files, session state or events
	// SkippedUsers (part info) are names a store holds that are no valid id
	// (a "*" from an event subject stored before ingest dead-lettered it): left
	// out of Users, so that an export never fails on them.
	SkippedUsers []string    `json:"skipped_users,omitempty"`
	Files        []FileChunk `json:"files,omitempty"`
	Records      []Record    `json:"records,omitempty"`
	Sessions     []SessionKV `json:"sessions,omitempty"`
	Next         string      `json:"next,omitempty"`
}

// FileChunk is part of a file of a namespace's memory layout (docstore names:
// "MEMORY.md", "202611/20261123.md", "backups/…", "policy_snapshots/…"): Data
// goes at Offset; a file larger than a message comes in several chunks, in
// order, the first at offset 0.
type FileChunk struct {
	Name   string `json:"name"`
	Offset int    `json:"offset,omitempty"`
	Data   []byte `json:"data"`
}

// Record is one vector memory or memory item as stored, vector included.
type Record struct {
	ID         string         `json:"id"`
	MemoryType MemoryType     `json:"memory_type"`
	Scope      string         `json:"scope,omitempty"`
	Kind       string         `json:"kind,omitempty"`
	Key        string         `json:"key,omitempty"`
	Text       string         `json:"text"`
	Vector     []float32      `json:"vector,omitempty"` // absent: the importer embeds Text
	TS         time.Time      `json:"ts"`
	ChatID     string         `json:"chat_id,omitempty"`
	Who        string         `json:"who,omitempty"`
	HitCount   int            `json:"hit_count,omitempty"`
	Confidence float64        `json:"confidence,omitempty"`
	ExpiresAt  time.Time      `json:"expires_at,omitzero"`
	Metadata   map[string]any `json:"metadata,omitempty"`
}

// SessionKV kinds: the keys a session has in the session buckets.
const (
	SessionKVState     = "state"
	SessionKVSummary   = "summary"
	SessionKVReflected = "reflected"
	SessionKVTurn      = "turn"
)

// SessionKinds lists the SessionKV kinds.
var SessionKinds = []string{SessionKVState, SessionKVSummary, SessionKVReflected, SessionKVTurn}

// SessionKV is one stored value of a session: its state, running summary,
// reflection claim or one turn (TurnID set). Value is the stored JSON; an
// import into another tenant rewrites the tenant it names.
type SessionKV struct {
	Kind      string          `json:"kind"`
	SessionID string          `json:"session_id"`
	TurnID    string          `json:"turn_id,omitempty"`
	Value     json.RawMessage `json:"value"`
}

// Validate checks the entry's kind and ids.
func (e SessionKV) Validate() error {
	if !oneOf(e.Kind, SessionKinds) {
		return enumError("kind", e.Kind, SessionKinds)
	}
	if err := ValidateID("session_id", e.SessionID); err != nil {
		return err
	}
	if (e.Kind == SessionKVTurn) != (e.TurnID != "") {
		return ruleError("turn_id", "is set for kind turn and only for it")
	}
	if e.TurnID != "" {
		if err := ValidateID("turn_id", e.TurnID); err != nil {
			return err
		}
	}
	if !json.Valid(e.Value) {
		return ruleError("value", "is not JSON")
	}
	return nil
}

// ImportRequest writes one page into a user's memory (endpoint import): file
// chunks, records and session values, each replacing what has its name, id or
// key, so importing twice gives the same memory. With Reembed, every record's
// vector is computed from its Text by this deployment's embedder (its vector,
// if any, is ignored); without, a record must carry a vector of the store's
// dimensions.
type ImportRequest struct {
	UserID string `json:"user_id"`
	// FromTenant is the tenant the records were exported from. Record ids are
	// derived from the tenant, so into another tenant they are derived anew
	// (an item's as the item endpoints derive it), and an import next to its
	// source in one deployment does not collide with it. Empty: this tenant.
	FromTenant string      `json:"from_tenant,omitempty"`
	Files      []FileChunk `json:"files,omitempty"`
	Records    []Record    `json:"records,omitempty"`
	Sessions   []SessionKV `json:"sessions,omitempty"`
	Reembed    bool        `json:"reembed,omitempty"`
	// Embedder is the embedder the records' vectors are of. The retriever sets
	// it to its own when it records the page as a write event, so that a
	// rebuild on a deployment with another embedder embeds the records again
	// instead of storing vectors of the wrong model. Empty: this deployment's.
	Embedder *EmbedderInfo `json:"embedder,omitempty"`
}

// Validate checks the request; errors wrap ErrInvalidRequest and name the field.
func (r ImportRequest) Validate() error {
	if err := firstError(ValidateID("user_id", r.UserID), optionalID("from_tenant", r.FromTenant)); err != nil {
		return wrap(ErrInvalidRequest, err)
	}
	if n := len(r.Files) + len(r.Records) + len(r.Sessions); n > MaxIDsPerReq {
		return fmt.Errorf("%w: %d entries; at most %d per request", ErrInvalidRequest, n, MaxIDsPerReq)
	}
	for i, f := range r.Files {
		if err := required(indexed("files", i)+".name", f.Name); err != nil {
			return wrap(ErrInvalidRequest, err)
		}
		if err := nonNegative(indexed("files", i)+".offset", f.Offset); err != nil {
			return wrap(ErrInvalidRequest, err)
		}
	}
	for i, rec := range r.Records {
		if !oneOf(rec.MemoryType, []MemoryType{MemoryEpisodic, MemorySemantic, MemoryItemType}) {
			return wrap(ErrInvalidRequest, enumError(indexed("records", i)+".memory_type", rec.MemoryType, []MemoryType{MemoryEpisodic, MemorySemantic, MemoryItemType}))
		}
		if !r.Reembed && len(rec.Vector) == 0 {
			return fmt.Errorf("%w: records[%d] has no vector; set reembed to embed its text", ErrInvalidRequest, i)
		}
	}
	for i, s := range r.Sessions {
		if err := s.Validate(); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrInvalidRequest, indexed("sessions", i), err)
		}
	}
	return nil
}

// ImportReply counts what one import request wrote.
type ImportReply struct {
	Files    int `json:"files"` // chunks
	Records  int `json:"records"`
	Sessions int `json:"sessions"`
}
