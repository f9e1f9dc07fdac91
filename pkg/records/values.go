package records

import "time"

// The values records are built from: what the write decision reads (Observation,
// Utterance) and decides (Episode), and what the semantic writer finds (Fact). The
// processors produce them; EpisodeRecord and FactRecord turn them into records.

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
	// ProcessedBy is ProcessedByRulesFallback when the rules decided in the
	// model's place; it becomes metadata MetaProcessedBy.
	ProcessedBy string
}

// Fact is a stable fact about a person found in episodic memories (SPEC C8).
type Fact struct {
	Fact         string
	SourceChatID string
	FirstSeen    time.Time
	// ProcessedBy is ProcessedByRulesFallback when the rules found the fact in
	// the model's place; it becomes metadata MetaProcessedBy.
	ProcessedBy string
}
