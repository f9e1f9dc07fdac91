package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
)

// validSeeds decode: one of each event type and observation kind, with a non-UTC
// offset and tool arguments that are neither compact nor HTML-escaped.
var validSeeds = []string{
	exampleObservation,
	exampleEnded,
	`{"id":"01JD3S","type":"observation","schema_version":1,"ts":"2026-11-22T10:01:00+02:00","tenant":"acme","user_id":"u1","session_id":"s1",
	  "observation":{"kind":"tool_call","role":"assistant","tool_call":{"id":"call_1","name":"read_excel","arguments":{ "path" : "<sales>.xlsx" }}}}`,
	`{"id":"01JD3T","type":"observation","schema_version":1,"ts":"2026-11-22T10:02:00Z","tenant":"acme","user_id":"u1","session_id":"s1",
	  "observation":{"kind":"tool_result","role":"tool","tool_result":{"call_id":"call_1","output":"date,product,qty","is_error":false}}}`,
	`{"id":"01JD3U","type":"observation","schema_version":1,"ts":"2026-11-22T10:03:00Z","tenant":"acme","user_id":"u1","session_id":"s1",
	  "observation":{"kind":"turn_finished","role":"assistant","turn":{"turn_id":"t1","status":"ok","started_ts":"2026-11-22T10:00:00Z","finished_ts":"2026-11-22T10:03:00Z"}}}`,
	`{"id":"01JD3V","type":"memory_hit","schema_version":1,"ts":"2026-11-22T10:04:00Z","tenant":"acme","user_id":"u1","memory_hit":{"memory_ids":["m1","m2"],"query":"columns"}}`,
	`{"id":"01JD3W","type":"memory_written","schema_version":1,"ts":"2026-11-22T10:05:00Z","tenant":"acme","user_id":"u1",
	  "memory_written":{"entries":[{"file":"file_patterns.md","category":"file_pattern","content":"Sales: date, product, qty"}],"source_session_id":"s1"}}`,
	`{"id":"01JD3X","type":"consolidate_requested","schema_version":1,"ts":"2026-11-22T10:06:00Z","tenant":"acme","user_id":"u1","consolidate_requested":{"reason":"nightly"}}`,
	`{"id":"01JD3Y","type":"write","schema_version":1,"ts":"2026-11-22T10:07:00Z","tenant":"acme","user_id":"u1",
	  "write":{"op":"add","request":{"user_id":"u1","text":"Manager is Ana."},"memory_ids":["d13c0a6e-a477-525c-897c-b52646327fb3"]}}`,
}

// invalidSeeds are rejected, each by a different rule.
var invalidSeeds = []string{
	`{"schema_version":2,"type":"observation"}`,
	`{"schema_version":"1"}`,
	`{"schema_version":1,"observation":{"meta":{"n":1e400}}}`,
	`{"id":"01JD3Z","type":"write","schema_version":1,"ts":"2026-11-22T10:07:00Z","tenant":"acme","user_id":"u1","write":{"op":"append","request":{"user_id":"u2","content":"x"}}}`,
	`[]`,
	`null`,
	``,
	"\xff\xfe",
}

func TestFuzzSeedsDecodeAsLabelled(t *testing.T) {
	for _, seed := range validSeeds {
		if _, err := Decode([]byte(seed)); err != nil {
			t.Errorf("valid seed rejected: %v\n%s", err, seed)
		}
	}
	for _, seed := range invalidSeeds {
		if _, err := Decode([]byte(seed)); err == nil {
			t.Errorf("invalid seed accepted: %s", seed)
		}
	}
}

// FuzzDecode: Decode never panics, every failure wraps one of its three sentinels, and
// whatever it accepts is valid and survives encode → decode unchanged. The encodings
// are compared, not the structs: json.RawMessage arguments are compacted and
// HTML-escaped on the first encode, so only from then on are the bytes stable.
func FuzzDecode(f *testing.F) {
	for _, seed := range append(append([]string(nil), validSeeds...), invalidSeeds...) {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := Decode(data)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrUnknownSchemaVersion) && !errors.Is(err, ErrInvalidEvent) {
				t.Fatalf("Decode error %v wraps none of the sentinels", err)
			}
			return
		}
		if err := e.Validate(); err != nil {
			t.Fatalf("Decode returned an invalid envelope: %v", err)
		}
		if _, err := e.Subject(); err != nil {
			t.Fatalf("a decoded envelope has no subject: %v", err)
		}
		first, err := json.Marshal(e)
		if err != nil {
			t.Fatalf("a decoded envelope does not encode: %v", err)
		}
		again, err := Decode(first)
		if err != nil {
			t.Fatalf("re-decoding %s: %v", first, err)
		}
		second, err := json.Marshal(again)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(first, second) {
			t.Fatalf("re-decoded envelope differs\nfirst  %s\nsecond %s", first, second)
		}
	})
}
