// Package events is agentmem's wire contract: the JSON event envelope and its typed
// bodies, the NATS subjects events and requests travel on, the request/reply types of
// the retriever, the structured records of the memory service (events, turns, memory
// items, context packs) and the JSON Schema of every event type.
//
// Anything an agent, a worker or a tool in another language must agree on lives here
// and nowhere else, so this package holds no connection code and imports no NATS
// client: it only builds, parses and validates.
//
// Every ID that becomes a subject token or a path element is checked by [ValidateID];
// an invalid value is rejected with an error naming the field and the rule, never
// escaped and never turned into a wildcard.
//
// Compatibility: fields may be added freely and unknown fields are accepted on input;
// no field is ever renamed or given a new meaning. A breaking change gets a new
// [SchemaVersion], and [Decode] rejects versions it does not know with an error
// wrapping [ErrUnknownSchemaVersion] so the message can go to the dead-letter stream.
package events
