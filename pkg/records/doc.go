// Package records is the payload schema of vector-store memories: metadata keys,
// record builders, converters. Ingest, extract, consolidate, memory and retrieve
// share it, so every writer of a record writes the same fields and every reader
// finds them.
//
// # Episodic and semantic records (SPEC C1)
//
// An episodic record (EpisodeRecord, from an Observation and the Episode the write
// decision made of it) keeps its statement in the record text and in metadata
// "thing", with "context", "time" (RFC 3339, UTC, FormatTime), "chatid", "who",
// "updates" (the rewrites of reconsolidation and separation, oldest first, each
// {ts, context, previous_text}), "source_chat_ids" and "merged_from_ids"; the
// consolidator adds "separated_from_ids" and "hit_events". Its id is derived from
// the source observation, so a redelivered observation upserts the same record,
// and is time-ordered by the episode's time. Its text is the exchange: the
// messages said just before the observation, a line each (each at most 500
// bytes), then the statement (EpisodeStatement), which is what its vector embeds.
//
// A semantic record (FactRecord, from a Fact) keeps "fact", "source_chatid" and
// "first_seen". Its id is derived from the normalised fact (textnorm.Normalize),
// so the same fact found twice, even by two writers at once, upserts one record
// (SPEC C8).
//
// Records built from observations carry their provenance: "source_event_ids" and
// "source_meta" list the events and the meta (PlainMeta) of every message the text
// holds, oldest first.
//
// Metadata values are plain JSON (strings, lists, objects) so they survive every
// store backend unchanged; StringList, MapList and AnyList read a list back
// whether it is as written or as decoded from JSON, and ToAnyList writes one.
package records
