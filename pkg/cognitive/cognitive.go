package cognitive

import (
	"context"
	"errors"
	"time"

	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// Sentinel errors; callers match them with errors.Is.
var (
	// ErrInvalidConfig reports a configuration that cannot work.
	ErrInvalidConfig = errors.New("cognitive: invalid config")
	// ErrInvalidInput reports an argument that cannot be processed (empty tenant,
	// a record of another user, ...).
	ErrInvalidInput = errors.New("cognitive: invalid input")
)

// Observation is one message seen by an agent, the input of the write decision.
type Observation struct {
	Role    string // "user", "assistant", "tool", "system", or a speaker role
	Text    string
	TS      time.Time
	ChatID  string
	Who     string // speaker name when known (e.g. a LoCoMo speaker)
	EventID string
	// Meta is the observation's meta, kept as the memory's provenance (e.g. a dia_id).
	Meta map[string]any
	// Before are the messages said just before this one in the same chat, oldest
	// first (ingest takes them from the session state). They are not decided on;
	// an episode written from this observation keeps them as its context.
	Before []Utterance
}

// Utterance is one earlier message of a chat, as context of an observation.
type Utterance struct {
	Role    string
	Who     string // speaker name when known
	Text    string
	EventID string
	Meta    map[string]any
}

// Episode is the outcome of the write decision (SPEC C3). When Write is false
// only Reason is meaningful.
type Episode struct {
	Write   bool
	Context string    // short description: the chat and the purpose of the statement
	Thing   string    // the normalised statement to remember
	Who     string    // the speaker
	Time    time.Time // when it was said (the observation's time)
	Reason  string    // which rule or model decision produced this outcome
}

// WriteDecider decides whether an observation becomes an episodic memory (SPEC C3).
type WriteDecider interface {
	Decide(ctx context.Context, obs Observation) (Episode, error)
}

// Fact is a stable fact about a person found in episodic memories (SPEC C8).
type Fact struct {
	Fact         string
	SourceChatID string
	FirstSeen    time.Time
}

// SemanticWriter finds stable facts in episodic memories (SPEC C8). It never
// returns a fact that duplicates one of known (normalised comparison) or another
// returned fact.
type SemanticWriter interface {
	Facts(ctx context.Context, episodes []vectorstore.Record, known []vectorstore.Record) ([]Fact, error)
}

// Merger writes the text of the memory that replaces two near-duplicates (SPEC C6).
type Merger interface {
	Merge(ctx context.Context, a, b vectorstore.Record) (string, error)
}

// Separator rewrites two similar but distinct memories so that they read as
// distinct (SPEC C6).
type Separator interface {
	Separate(ctx context.Context, a, b vectorstore.Record) (string, string, error)
}

// Reconsolidator rewrites a memory after it was used in a new context (SPEC C5).
// It returns only the new text: time, chat and speaker are the caller's to keep.
type Reconsolidator interface {
	Reconsolidate(ctx context.Context, m vectorstore.Record, newContext string) (string, error)
}
