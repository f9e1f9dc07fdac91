package processor

import (
	"context"
	"errors"

	"github.com/agentmem/agentmem/pkg/records"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// Sentinel errors; callers match them with errors.Is.
var (
	// ErrInvalidConfig reports a configuration that cannot work.
	ErrInvalidConfig = errors.New("processor: invalid config")
	// ErrInvalidInput reports an argument that cannot be processed (empty tenant,
	// a record of another user, ...).
	ErrInvalidInput = errors.New("processor: invalid input")
)

// WriteDecider decides whether an observation becomes an episodic memory (SPEC C3).
type WriteDecider interface {
	Decide(ctx context.Context, obs records.Observation) (records.Episode, error)
}

// BatchDecider is a WriteDecider that decides many observations at once (a
// model asked several per request): one episode per observation, in order, each
// the one Decide would give it.
type BatchDecider interface {
	WriteDecider
	DecideBatch(ctx context.Context, obs []records.Observation) ([]records.Episode, error)
}

// SemanticWriter finds stable facts in episodic memories (SPEC C8). It never
// returns a fact that duplicates one of known (normalised comparison) or another
// returned fact.
type SemanticWriter interface {
	Facts(ctx context.Context, episodes []vectorstore.Record, known []vectorstore.Record) ([]records.Fact, error)
}

// Rewrite is a text a Merger, Separator or Reconsolidator wrote. ProcessedBy is
// records.ProcessedByRulesFallback when the rule-based twin wrote it in the
// model's place; like records.Episode's, it becomes metadata
// records.MetaProcessedBy of the record the text is written to.
type Rewrite struct {
	Text        string
	ProcessedBy string
}

// Merger writes the text of the memory that replaces two near-duplicates (SPEC C6).
type Merger interface {
	Merge(ctx context.Context, a, b vectorstore.Record) (Rewrite, error)
}

// Separator rewrites two similar but distinct memories so that they read as
// distinct (SPEC C6).
type Separator interface {
	Separate(ctx context.Context, a, b vectorstore.Record) (Rewrite, Rewrite, error)
}

// Reconsolidator rewrites a memory after it was used in a new context (SPEC C5).
// It returns only the new text: time, chat and speaker are the caller's to keep.
type Reconsolidator interface {
	Reconsolidate(ctx context.Context, m vectorstore.Record, newContext string) (Rewrite, error)
}
