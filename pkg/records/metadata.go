package records

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/oklog/ulid/v2"

	"github.com/agentmem/agentmem/pkg/textnorm"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// Metadata keys of episodic and semantic records (SPEC C1). The values are plain
// JSON (strings, lists, objects) so they survive every store backend unchanged.
const (
	MetaContext       = "context"         // episodic: what the statement was for
	MetaThing         = "thing"           // episodic: the statement; mirrors Record.Text
	MetaTime          = "time"            // episodic: ISO 8601 (RFC 3339, UTC) of Record.TS
	MetaChatID        = "chatid"          // episodic: mirrors Record.ChatID
	MetaWho           = "who"             // episodic: mirrors Record.Who
	MetaUpdates       = "updates"         // episodic: list of UpdateEntry objects, oldest first
	MetaSourceChatIDs = "source_chat_ids" // episodic: every chat the memory came from
	MetaMergedFromIDs = "merged_from_ids" // episodic: ids of every record merged into this one
	// MetaContextMessages lists the messages said just before an episodic
	// statement, "Who: text" each, oldest first: its text holds them before the
	// statement (they feed its ranking), and it is shown with them apart, as its
	// context (SplitContext).
	MetaContextMessages = "context_messages"
	// MetaSeparatedFromIDs lists the records this one was separated from; the
	// planner does not pair them again, so repeated consolidation runs converge
	// instead of rewriting the same pair each time.
	MetaSeparatedFromIDs = "separated_from_ids"

	MetaFact         = "fact"          // semantic: the fact sentence
	MetaSourceChatID = "source_chatid" // semantic: chat of the episode the fact came from
	MetaFirstSeen    = "first_seen"    // semantic: ISO 8601 time of that episode
)

// MetaHitEvents lists the ids of the last memory_hit events applied to a record
// (episodic or semantic), oldest first: the consolidator's dedupe of hits, which
// keeps consolidate.HitEventWindow of them.
const MetaHitEvents = "hit_events"

// Reconsolidation bookkeeping of an episodic record (SPEC C5, issue 22: memory that
// does not drift). Reconsolidation rewrites only the text around the statement,
// always from MetaBaseText, so rewrites never stack; MetaThing is never rewritten
// by it.
const (
	// MetaBaseText is the text before any reconsolidation: what every
	// reconsolidation rewrites from. Absent until the first one; a merge or
	// separation (a new statement) sets it to its new text.
	MetaBaseText = "base_text"
	// MetaReconsolidatedSessions lists the session keys whose context packs
	// already reconsolidated the record (the newest consolidate.HitEventWindow).
	MetaReconsolidatedSessions = "reconsolidated_sessions"
	// MetaReconsolidatedAt is the RFC 3339 time of the last reconsolidation.
	MetaReconsolidatedAt = "reconsolidated_at"
)

// MetaProcessedBy marks a record written by a rule-based processor standing in
// for the model (value ProcessedByRulesFallback), so that a later pass can find
// it (a metadata filter) and redo it with the model.
const (
	MetaProcessedBy          = "processed_by"
	ProcessedByRulesFallback = "rules_fallback"
)

// Provenance of every record built from observations; the retriever copies both into
// each context-pack item, so a memory can be traced to what was said (e.g. a dia_id).
const (
	MetaSourceEventIDs = "source_event_ids" // the observations' event ids
	MetaSourceMeta     = "source_meta"      // the observations' meta objects, unchanged
)

// SpeakerMetaKey is the observation meta key naming who spoke when the role alone
// does not (a conversation between two people, e.g. LoCoMo's speakers).
const SpeakerMetaKey = "speaker"

// Speaker returns the speaker an observation's meta names, or "".
func Speaker(meta map[string]any) string {
	s, _ := meta[SpeakerMetaKey].(string)
	return strings.TrimSpace(s)
}

// PlainMeta turns decoded observation meta (events.Decode keeps numbers as
// json.Number) into plain JSON values, so every vector store backend stores and
// returns it unchanged. The result is a fresh copy, equal to a JSON encode and
// decode of meta; meta itself is returned when that round trip fails.
func PlainMeta(meta map[string]any) map[string]any {
	if meta == nil {
		return nil
	}
	// Every record built from an observation converts its meta and its context
	// messages' meta: walking the values is several times cheaper than the round
	// trip, which is kept for what the walk does not know how to copy exactly.
	if out, ok := plainObject(meta); ok {
		return out
	}
	data, err := json.Marshal(meta)
	if err != nil {
		return meta
	}
	var out map[string]any
	if json.Unmarshal(data, &out) != nil {
		return meta
	}
	return out
}

// plainValue copies v as a JSON encode and decode into an any would, for the
// values decoded JSON holds; ok is false for anything else (another Go type, a
// number or string JSON would change or reject), which the round trip handles.
func plainValue(v any) (out any, ok bool) {
	// v itself is returned for the values that stay as they are: boxing x again
	// would allocate.
	switch x := v.(type) {
	case nil, bool:
		return v, true
	case string:
		return v, utf8.ValidString(x)
	case float64:
		return v, !math.IsInf(x, 0) && !math.IsNaN(x)
	case json.Number:
		// Decoding the literal applies JSON's number syntax, not ParseFloat's
		// (which takes "0x10", "Inf" or "1_0").
		var f float64
		err := json.Unmarshal([]byte(x), &f)
		return f, err == nil
	case map[string]any:
		if x == nil {
			return nil, true
		}
		return plainObject(x)
	case []any:
		if x == nil {
			return nil, true
		}
		l := make([]any, len(x))
		for i, e := range x {
			if l[i], ok = plainValue(e); !ok {
				return nil, false
			}
		}
		return l, true
	}
	return nil, false
}

func plainObject(m map[string]any) (map[string]any, bool) {
	out := make(map[string]any, len(m))
	for k, v := range m {
		pv, ok := plainValue(v)
		if !ok || !utf8.ValidString(k) {
			return nil, false
		}
		out[k] = pv
	}
	return out, true
}

// Keys of one entry of MetaUpdates.
const (
	UpdateTS           = "ts"
	UpdateContext      = "context"
	UpdatePreviousText = "previous_text"
	// UpdatePreviousContext is the context a reconsolidation replaced.
	UpdatePreviousContext = "previous_context"
)

// AppendUpdate is rec's MetaUpdates list with one more entry, as a fresh list:
// rec's text was rewritten at ts because of why, and the entry keeps the text it
// had. Reconsolidation, separation and the memory API's update all write it.
func AppendUpdate(rec vectorstore.Record, ts time.Time, why string) []any {
	return append(AnyList(rec.Metadata[MetaUpdates]), updateEntry(rec, ts, why))
}

// AppendContextUpdate is AppendUpdate for a reconsolidation of rec for
// newContext, which replaces rec's context: the entry keeps the context it
// replaces as well as the text.
func AppendContextUpdate(rec vectorstore.Record, ts time.Time, newContext string) []any {
	entry := updateEntry(rec, ts, newContext)
	if prev, ok := rec.Metadata[MetaContext].(string); ok {
		entry[UpdatePreviousContext] = prev
	}
	return append(AnyList(rec.Metadata[MetaUpdates]), entry)
}

func updateEntry(rec vectorstore.Record, ts time.Time, why string) map[string]any {
	return map[string]any{
		UpdateTS:           FormatTime(ts),
		UpdateContext:      why,
		UpdatePreviousText: rec.Text,
	}
}

// FormatTime is the one time format written into metadata: RFC 3339 with
// nanoseconds, in UTC.
func FormatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// EpisodeMetadata is the episodic metadata (SPEC C1) of a new memory from ep said
// in chat chatID.
func EpisodeMetadata(ep Episode, chatID string) map[string]any {
	// Sized for the provenance keys EpisodeRecord adds too: growing the map past
	// its first eight entries would copy it.
	md := make(map[string]any, episodeMetadataKeys)
	md[MetaContext] = ep.Context
	md[MetaThing] = ep.Thing
	md[MetaTime] = FormatTime(ep.Time)
	md[MetaChatID] = chatID
	md[MetaWho] = ep.Who
	md[MetaUpdates] = []any{}
	md[MetaSourceChatIDs] = []any{chatID}
	md[MetaMergedFromIDs] = []any{}
	if ep.ProcessedBy != "" {
		md[MetaProcessedBy] = ep.ProcessedBy
	}
	return md
}

// episodeMetadataKeys is the most keys an episodic record's metadata starts with:
// those of EpisodeMetadata, MetaContextMessages and those of addProvenance.
const episodeMetadataKeys = 12

// EpisodeRecord builds the episodic record of ep for (tenant, userID), without its
// vector (embed EpisodeStatement(obs, ep)). The id is deterministic from the source
// observation (episodeID: its event id alone when set), so a redelivered or re-sent
// observation upserts the same record instead of adding a duplicate; it is
// time-ordered by the event id's ULID time, so the embedded store's id index grows
// at its end as observations arrive.
//
// The record's text is the exchange: the messages of obs.Before, a line each, then
// the statement; the lines are also in MetaContextMessages, so that the statement
// can be shown apart from them (SplitContext). An answer is rarely understood, or found, without the question it
// answers ("Yes, last Tuesday!"); on LoCoMo keeping the two messages before each
// utterance raised recall@10 by about 15 points (BENCHMARKS.md). The provenance
// (MetaSourceEventIDs, MetaSourceMeta) lists every message the text holds, oldest
// first.
func EpisodeRecord(tenant, userID string, obs Observation, ep Episode) vectorstore.Record {
	rec := vectorstore.Record{
		ID:         episodeID(tenant, userID, obs),
		Tenant:     tenant,
		UserID:     userID,
		MemoryType: vectorstore.Episodic,
		TS:         ep.Time,
		ChatID:     obs.ChatID,
		Who:        ep.Who,
		Metadata:   EpisodeMetadata(ep, obs.ChatID),
	}
	lines := contextLines(obs)
	rec.Text = episodeText(lines, EpisodeStatement(obs, ep))
	if len(lines) > 0 {
		rec.Metadata[MetaContextMessages] = ToAnyList(lines)
	}
	addProvenance(rec.Metadata, obs)
	return rec
}

// episodeID is the record id of the episode of obs: derived from the event id
// alone, so that an event re-sent with another ts upserts the same record. It is
// time-ordered by the event id's ULID time (events.New makes ULIDs); an event id
// that is no ULID gives an id of no particular order. Without an event id, the
// chat, time and text are the identity.
func episodeID(tenant, userID string, obs Observation) string {
	if obs.EventID == "" {
		return vectorstore.TimeOrderedID(obs.TS, "episodic", tenant, userID, obs.ChatID+"\x00"+FormatTime(obs.TS)+"\x00"+obs.Text)
	}
	if id, err := ulid.ParseStrict(obs.EventID); err == nil {
		return vectorstore.TimeOrderedID(ulid.Time(id.Time()), "episodic", tenant, userID, obs.EventID)
	}
	return vectorstore.DeterministicID("episodic", tenant, userID, obs.EventID)
}

// episodeText is the text of an episode: its context lines, then the statement.
func episodeText(lines []string, statement string) string {
	if len(lines) == 0 {
		return statement
	}
	return strings.Join(lines, "\n") + "\n" + statement
}

// contextLines are the messages of obs.Before an episode keeps, oldest first:
// "Who: text" each, the text single-spaced and shortened; empty ones skipped.
func contextLines(obs Observation) []string {
	lines := make([]string, 0, len(obs.Before))
	for _, u := range obs.Before {
		text := strings.TrimSpace(u.Text)
		if text == "" {
			continue
		}
		line := textnorm.Shorten(text, maxContextBytes)
		if who := speakerName(u.Who, u.Role); who != "" {
			line = who + ": " + line
		}
		lines = append(lines, line)
	}
	return lines
}

// SplitContext is how an episodic record is shown (search results, context
// packs, the inspector): its statement, and apart from it, as its context, the
// messages said before it (MetaContextMessages) that its text holds. One memory
// shows one fact (issue 28): the messages before a statement are often other
// statements, and shown as part of it they read as more facts of this memory.
// The text keeps them because they feed its keyword ranking (BENCHMARKS.md).
// A record without them, or whose text no longer holds them as one block (a
// model rewrote it, a merge), and any other record, is shown as its text.
func SplitContext(rec vectorstore.Record) (statement string, context []string) {
	lines := StringList(rec.Metadata[MetaContextMessages])
	if rec.MemoryType != vectorstore.Episodic || len(lines) == 0 {
		return rec.Text, nil
	}
	block := strings.Join(lines, "\n") + "\n"
	i := strings.Index(rec.Text, block)
	if i < 0 {
		return rec.Text, nil
	}
	return rec.Text[:i] + rec.Text[i+len(block):], lines
}

// maxContextBytes bounds each context message in an episode's text: a tool's
// output or a pasted document said before an utterance must not be copied whole
// into every episode that follows it.
const maxContextBytes = 500

// addProvenance records the events and meta of obs and of the messages of
// obs.Before that the text holds, in md; an observation without an event id (a
// direct add) has no provenance.
func addProvenance(md map[string]any, obs Observation) {
	if obs.EventID == "" {
		return
	}
	ids := make([]any, 0, len(obs.Before)+1)
	metas := make([]any, 0, len(obs.Before)+1)
	hasMeta := false
	for _, u := range obs.Before {
		if u.EventID != "" && strings.TrimSpace(u.Text) != "" {
			ids = append(ids, u.EventID)
			metas = append(metas, plainMetaObject(u.Meta))
			hasMeta = hasMeta || len(u.Meta) > 0
		}
	}
	md[MetaSourceEventIDs] = append(ids, obs.EventID)
	if hasMeta || len(obs.Meta) > 0 {
		md[MetaSourceMeta] = append(metas, plainMetaObject(obs.Meta))
	}
}

// plainMetaObject is PlainMeta, and an empty object for no meta, so every entry
// of MetaSourceMeta is an object.
func plainMetaObject(meta map[string]any) map[string]any {
	if m := PlainMeta(meta); m != nil {
		return m
	}
	return map[string]any{}
}

// EpisodeStatement is the statement of an episode: what its vector embeds and the
// last line of its text. In a conversation between named people (obs.Who names
// someone, not just the role) it is the speaker and the whole utterance: questions
// name people, and the cleaned statement drops the words a later question uses (on
// LoCoMo this raised recall@10 from 47.2 to 51.6, BENCHMARKS.md). Otherwise it is
// the decider's statement. The context messages are left out of the vector, so
// consolidation compares what was said, not the overlapping conversation around it.
func EpisodeStatement(obs Observation, ep Episode) string {
	if who := strings.TrimSpace(obs.Who); who != "" && !strings.EqualFold(who, strings.TrimSpace(obs.Role)) {
		return who + ": " + strings.TrimSpace(obs.Text)
	}
	return ep.Thing
}

// speakerName names who said a context message: its speaker, else its role.
func speakerName(who, role string) string {
	if who = strings.TrimSpace(who); who != "" {
		return who
	}
	return strings.TrimSpace(role)
}

// FactRecord builds the semantic record of f for (tenant, userID), without its
// vector. The id is deterministic from the normalised fact, so the same fact found
// twice (even by two consolidators at once) upserts one record (SPEC C8).
func FactRecord(tenant, userID string, f Fact) vectorstore.Record {
	rec := vectorstore.Record{
		ID:         vectorstore.DeterministicID("semantic", tenant, userID, textnorm.Normalize(f.Fact)),
		Tenant:     tenant,
		UserID:     userID,
		MemoryType: vectorstore.Semantic,
		Text:       f.Fact,
		TS:         f.FirstSeen,
		ChatID:     f.SourceChatID,
		Metadata: map[string]any{
			MetaFact:         f.Fact,
			MetaSourceChatID: f.SourceChatID,
			MetaFirstSeen:    FormatTime(f.FirstSeen),
		},
	}
	if f.ProcessedBy != "" {
		rec.Metadata[MetaProcessedBy] = f.ProcessedBy
	}
	return rec
}

// StringList reads a metadata list of strings, as written ([]string, []any) or
// as decoded from JSON ([]any of string); other values give nil.
func StringList(v any) []string { return listOf[string](v) }

// MapList reads a metadata list of objects (e.g. source_meta), as written
// ([]map[string]any, []any) or as decoded from JSON; other values give nil.
func MapList(v any) []map[string]any { return listOf[map[string]any](v) }

// listOf reads a metadata list of T, as written ([]T) or as decoded from JSON
// ([]any), as a fresh slice; elements of another type are skipped.
func listOf[T any](v any) []T {
	switch l := v.(type) {
	case []T:
		return slices.Clone(l)
	case []any:
		out := make([]T, 0, len(l))
		for _, x := range l {
			if t, ok := x.(T); ok {
				out = append(out, t)
			}
		}
		return out
	}
	return nil
}

// AnyList reads a metadata list (e.g. updates) as a fresh []any; other values give
// an empty list.
func AnyList(v any) []any {
	switch l := v.(type) {
	case []any:
		return slices.Clone(l)
	case []map[string]any:
		out := make([]any, len(l))
		for i, m := range l {
			out[i] = m
		}
		return out
	}
	return []any{}
}

// ToAnyList turns strings into a JSON-shaped list.
func ToAnyList(s []string) []any {
	out := make([]any, len(s))
	for i, x := range s {
		out[i] = x
	}
	return out
}
