package events

import (
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	"pgregory.net/rapid"
)

// The examples of events/README.md ("Envelope"), with complete ULIDs.
const (
	exampleObservation = `{"id":"01JD3QZ7X4K9M2N8P5R6S7T8V9","type":"observation","schema_version":1,"ts":"2026-11-22T10:00:00Z",
 "tenant":"acme","user_id":"u1","agent_id":"excel-bot","session_id":"s1",
 "observation":{"role":"user","text":"Remember: my sales files have columns date, product, qty.",
                "meta":{"dia_id":"D1:3"}}}`
	exampleEnded = `{"id":"01JD3RZ7X4K9M2N8P5R6S7T8V9","type":"session_ended","schema_version":1,"ts":"2026-11-22T10:30:00Z",
 "tenant":"acme","user_id":"u1","agent_id":"excel-bot","session_id":"s1"}`
)

func TestNewFillsIDTimeAndVersion(t *testing.T) {
	before := time.Now()
	e := New(TypeObservation, "acme", "u1", "excel-bot", "s1")
	after := time.Now()
	if _, err := ulid.ParseStrict(e.ID); err != nil {
		t.Fatalf("ID %q is not a ULID: %v", e.ID, err)
	}
	if e.TS.Location() != time.UTC || e.TS.Before(before.Add(-time.Millisecond)) || e.TS.After(after) {
		t.Fatalf("TS %v is not the current UTC time", e.TS)
	}
	if e.SchemaVersion != SchemaVersion || e.Type != TypeObservation || e.Tenant != "acme" || e.UserID != "u1" || e.AgentID != "excel-bot" || e.SessionID != "s1" {
		t.Fatalf("New copied the wrong fields: %+v", e)
	}
	if err := e.Validate(); err == nil || !strings.Contains(err.Error(), "observation is required") {
		t.Fatalf("an observation without body must fail naming the body, got %v", err)
	}
	e.Observation = &Observation{Role: RoleUser, Text: "hi"}
	if err := e.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if other := New(TypeObservation, "acme", "u1", "", "s1"); other.ID == e.ID {
		t.Fatalf("two New calls gave the same ID %q", e.ID)
	}
}

func TestEnvelopeJSONRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		e := genEnvelope().Draw(t, "envelope")
		if err := e.Validate(); err != nil {
			t.Fatalf("generator made an invalid envelope: %v", err)
		}
		data, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Decode(data)
		if err != nil {
			t.Fatalf("Decode(%s): %v", data, err)
		}
		if !reflect.DeepEqual(got, e) {
			t.Fatalf("round trip changed the envelope\n got %#v\nwant %#v", got, e)
		}
	})
}

// Encode gives what a consumer accepts: Decode returns the envelope, and the
// subject is the one CheckSubject expects; an invalid envelope is refused.
func TestEnvelopeEncode(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		e := genEnvelope().Draw(t, "envelope")
		subject, data, err := e.Encode()
		if err != nil {
			t.Fatal(err)
		}
		got, err := Decode(data)
		if err != nil || !reflect.DeepEqual(got, e) {
			t.Fatalf("Decode(Encode) = %#v, %v; want %#v", got, err, e)
		}
		if err := got.CheckSubject(subject); err != nil {
			t.Fatalf("encoded on %s: %v", subject, err)
		}
		e.Tenant = ""
		if _, _, err := e.Encode(); !errors.Is(err, ErrInvalidEvent) {
			t.Fatalf("Encode without a tenant = %v, want ErrInvalidEvent", err)
		}
	})
}

func TestEnvelopeSubjectParsesBackToItsIDs(t *testing.T) {
	kinds := map[Type]SubjectKind{
		TypeObservation: SubjectObservation, TypeSessionEnded: SubjectEnded, TypeMemoryHit: SubjectHit,
		TypeMemoryWritten: SubjectWritten, TypeConsolidateRequested: SubjectConsolidate, TypeSummaryDue: SubjectSummaryDue,
		TypeWrite: SubjectWrite,
	}
	rapid.Check(t, func(t *rapid.T) {
		e := genEnvelope().Draw(t, "envelope")
		s, err := e.Subject()
		if err != nil {
			t.Fatal(err)
		}
		sub, err := ParseSubject(s)
		if err != nil {
			t.Fatalf("ParseSubject(%q): %v", s, err)
		}
		if sub.Kind != kinds[e.Type] || sub.Tenant != e.Tenant || sub.User != e.UserID {
			t.Fatalf("subject %q parsed to %+v for %s event of %s/%s", s, sub, e.Type, e.Tenant, e.UserID)
		}
		if sub.Kind == SubjectObservation || sub.Kind == SubjectEnded {
			if sub.Session != e.SessionID {
				t.Fatalf("subject %q has session %q, event has %q", s, sub.Session, e.SessionID)
			}
		}
		if err := e.CheckSubject(s); err != nil {
			t.Fatalf("CheckSubject(own subject): %v", err)
		}
		other := e
		other.Tenant = e.Tenant + "x"
		if err := other.CheckSubject(s); !errors.Is(err, ErrInvalidEvent) {
			t.Fatalf("CheckSubject accepted an event of tenant %q on %q: %v", other.Tenant, s, err)
		}
	})
}

func validObservation() Envelope {
	e := New(TypeObservation, "acme", "u1", "excel-bot", "s1")
	e.Observation = &Observation{Role: RoleUser, Text: "hello"}
	return e
}

func TestValidateNamesFieldAndRule(t *testing.T) {
	started := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		mutate func(*Envelope)
		want   string // field path and part of the rule
		isID   bool
	}{
		{"bad id", func(e *Envelope) { e.ID = "a.b" }, "id \"a.b\" has character '.'", true},
		{"empty tenant", func(e *Envelope) { e.Tenant = "" }, "tenant is empty", true},
		{"wildcard user", func(e *Envelope) { e.UserID = "*" }, "user_id \"*\"", true},
		{"bad agent", func(e *Envelope) { e.AgentID = "a b" }, "agent_id", true},
		{"missing session", func(e *Envelope) { e.SessionID = "" }, "session_id is empty (required for type observation)", true},
		{"zero ts", func(e *Envelope) { e.TS = time.Time{} }, "ts is missing", false},
		{"unknown type", func(e *Envelope) { e.Type = "gossip" }, "type is \"gossip\"", false},
		{"future version", func(e *Envelope) { e.SchemaVersion = 2 }, "schema_version is 2", false},
		{"missing body", func(e *Envelope) { e.Observation = nil }, "observation is required", false},
		{"second body", func(e *Envelope) { e.MemoryHit = &MemoryHit{MemoryIDs: []string{"m1"}} }, "memory_hit must not be set on an event of type observation", false},
		{"bad role", func(e *Envelope) { e.Observation.Role = "robot" }, "observation.role is \"robot\"", false},
		{"bad kind", func(e *Envelope) { e.Observation.Kind = "thought" }, "observation.kind is \"thought\"", false},
		{"message without text", func(e *Envelope) { e.Observation.Text = "" }, "observation.text is required for kind message", false},
		{"tool_call without body", func(e *Envelope) { e.Observation.Kind = KindToolCall }, "observation.tool_call is required", false},
		{"tool_call without name", func(e *Envelope) {
			e.Observation.Kind, e.Observation.ToolCall = KindToolCall, &ToolCall{ID: "c1"}
		}, "observation.tool_call.name is required", false},
		{"tool_call bad arguments", func(e *Envelope) {
			e.Observation.Kind, e.Observation.ToolCall = KindToolCall, &ToolCall{Name: "f", Arguments: json.RawMessage(`{`)}
		}, "observation.tool_call.arguments is not valid JSON", false},
		{"tool_result unattached", func(e *Envelope) {
			e.Observation.Kind, e.Observation.ToolResult = KindToolResult, &ToolResult{Output: "42"}
		}, "observation.tool_result needs call_id or name", false},
		{"turn missing", func(e *Envelope) { e.Observation.Kind = KindTurnStarted }, "observation.turn is required for kind turn_started", false},
		{"turn status", func(e *Envelope) {
			e.Observation.Kind = KindTurnFinished
			e.Observation.Turn = &TurnRecord{TurnID: "t1", Status: TurnRunning, StartedTS: started}
		}, "observation.turn.status is \"running\"", false},
		{"turn other session", func(e *Envelope) {
			e.Observation.Kind = KindTurnStarted
			e.Observation.Turn = &TurnRecord{TurnID: "t1", SessionKey: "acme.u1.s2", Status: TurnRunning, StartedTS: started}
		}, "observation.turn.session_key is \"acme.u1.s2\"", false},
		{"turn finished before start", func(e *Envelope) {
			e.Observation.Kind = KindTurnFinished
			e.Observation.Turn = &TurnRecord{TurnID: "t1", Status: TurnOK, StartedTS: started, FinishedTS: started.Add(-time.Second)}
		}, "observation.turn.finished_ts is before started_ts", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := validObservation()
			tc.mutate(&e)
			err := e.Validate()
			if err == nil {
				t.Fatal("Validate accepted it")
			}
			if !errors.Is(err, ErrInvalidEvent) || errors.Is(err, ErrInvalidID) != tc.isID {
				t.Fatalf("error %q: wraps ErrInvalidEvent=%v ErrInvalidID=%v", err, errors.Is(err, ErrInvalidEvent), errors.Is(err, ErrInvalidID))
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not say %q", err, tc.want)
			}
		})
	}
}

func TestValidateBodiesOfOtherTypes(t *testing.T) {
	hit := New(TypeMemoryHit, "acme", "u1", "", "")
	hit.MemoryHit = &MemoryHit{MemoryIDs: []string{"m1", "m.2"}}
	if err := hit.Validate(); err == nil || !strings.Contains(err.Error(), "memory_hit.memory_ids[1]") {
		t.Fatalf("hit with bad id: %v", err)
	}
	hit.MemoryHit.MemoryIDs = nil
	if err := hit.Validate(); err == nil || !strings.Contains(err.Error(), "memory_hit.memory_ids must hold at least one id") {
		t.Fatalf("hit without ids: %v", err)
	}
	written := New(TypeMemoryWritten, "acme", "u1", "", "")
	written.MemoryWritten = &MemoryWritten{}
	if err := written.Validate(); err == nil || !strings.Contains(err.Error(), "memory_written needs at least one entry or memory id") {
		t.Fatalf("empty written: %v", err)
	}
	written.MemoryWritten.Entries = []WrittenEntry{{File: "../MEMORY.md", Content: "x"}}
	if err := written.Validate(); err == nil || !strings.Contains(err.Error(), "memory_written.entries[0].file") {
		t.Fatalf("written escaping the directory: %v", err)
	}
	// Its memory ids and source session are checked too, each naming its field.
	for _, tc := range []struct {
		body MemoryWritten
		want string
	}{
		{MemoryWritten{MemoryIDs: []string{"m1", "m.2"}}, "memory_written.memory_ids[1]"},
		{MemoryWritten{MemoryIDs: []string{"m1"}, SourceSessionID: "s 1"}, "memory_written.source_session_id"},
		{MemoryWritten{Entries: []WrittenEntry{{File: "MEMORY.md", Content: "x"}}, SourceSessionID: "s 1"}, "memory_written.source_session_id"},
	} {
		written.MemoryWritten = &tc.body
		if err := written.Validate(); !errors.Is(err, ErrInvalidID) || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("written %+v: %v; want ErrInvalidID naming %s", tc.body, err, tc.want)
		}
	}
	written.MemoryWritten = &MemoryWritten{Entries: []WrittenEntry{{File: "202611/20261122.md", Content: "x"}}, MemoryIDs: []string{"m1"}, SourceSessionID: "s1"}
	if err := written.Validate(); err != nil {
		t.Fatalf("valid written: %v", err)
	}
	ended := New(TypeSessionEnded, "acme", "u1", "", "s1")
	if err := ended.Validate(); err != nil {
		t.Fatalf("session_ended without body: %v", err)
	}
	cons := New(TypeConsolidateRequested, "acme", "u1", "", "")
	if err := cons.Validate(); err != nil {
		t.Fatalf("consolidate_requested without body: %v", err)
	}
}

func TestDecodeDesignExamples(t *testing.T) {
	obs, err := Decode([]byte(exampleObservation))
	if err != nil {
		t.Fatal(err)
	}
	if obs.Observation.EffectiveKind() != KindMessage || obs.Observation.Meta["dia_id"] != "D1:3" || obs.AgentID != "excel-bot" {
		t.Fatalf("decoded observation lost fields: %+v", obs.Observation)
	}
	if s, _ := obs.Subject(); s != "mem.acme.obs.u1.s1" {
		t.Fatalf("subject %q", s)
	}
	ended, err := Decode([]byte(exampleEnded))
	if err != nil {
		t.Fatal(err)
	}
	if ended.Type != TypeSessionEnded || ended.SessionEnded != nil {
		t.Fatalf("decoded ended: %+v", ended)
	}
}

func TestDecodeErrors(t *testing.T) {
	withVersion := func(v string) string {
		return strings.Replace(exampleEnded, `"schema_version":1`, `"schema_version":`+v, 1)
	}
	for _, tc := range []struct {
		name  string
		input string
		want  error
		not   []error
	}{
		{"garbage", "not json", ErrMalformed, []error{ErrUnknownSchemaVersion}},
		{"empty", "", ErrMalformed, nil},
		{"array", `[1,2]`, ErrMalformed, nil},
		{"trailing data", exampleEnded + ` {}`, ErrMalformed, nil},
		{"future version", withVersion("2"), ErrUnknownSchemaVersion, []error{ErrMalformed, ErrInvalidEvent}},
		{"version zero", withVersion("0"), ErrUnknownSchemaVersion, nil},
		{"version as string", withVersion(`"1"`), ErrUnknownSchemaVersion, nil},
		{"version null", withVersion("null"), ErrUnknownSchemaVersion, nil},
		{"missing version", strings.Replace(exampleEnded, `"schema_version":1,`, "", 1), ErrUnknownSchemaVersion, nil},
		// The version is checked first: a future event with a new shape is "unknown version", not "malformed".
		{"future version, new shape", `{"schema_version":2,"ts":{"epoch":5}}`, ErrUnknownSchemaVersion, []error{ErrMalformed}},
		// Decode parses once; a shape it cannot decode before the version is read
		// must still report the version.
		{"future version after a new shape", `{"ts":{"epoch":5},"observation":[1],"schema_version":2}`, ErrUnknownSchemaVersion, []error{ErrMalformed}},
		{"future version with trailing data", withVersion("2") + ` {}`, ErrMalformed, []error{ErrUnknownSchemaVersion}},
		{"wrong field type after the version", strings.Replace(exampleEnded, `"session_id":"s1"`, `"session_id":7`, 1), ErrMalformed, []error{ErrUnknownSchemaVersion}},
		{"wrong field type", strings.Replace(exampleEnded, `"ts":"2026-11-22T10:30:00Z"`, `"ts":5`, 1), ErrMalformed, nil},
		{"bad time", strings.Replace(exampleEnded, `2026-11-22T10:30:00Z`, `yesterday`, 1), ErrMalformed, nil},
		{"invalid event", strings.Replace(exampleEnded, `"session_id":"s1"`, `"session_id":"s.1"`, 1), ErrInvalidEvent, []error{ErrMalformed}},
		{"wildcard tenant", strings.Replace(exampleEnded, `"tenant":"acme"`, `"tenant":"*"`, 1), ErrInvalidID, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode([]byte(tc.input))
			if !errors.Is(err, tc.want) {
				t.Fatalf("Decode error %v, want %v", err, tc.want)
			}
			for _, not := range tc.not {
				if errors.Is(err, not) {
					t.Fatalf("Decode error %v must not wrap %v", err, not)
				}
			}
		})
	}
}

// A version sent as the string "1" is refused saying that it is a string, not
// as if "1" and 1 were different versions.
func TestDecodeNamesAVersionSentAsAString(t *testing.T) {
	_, err := Decode([]byte(strings.Replace(exampleEnded, `"schema_version":1`, `"schema_version":"1"`, 1)))
	if want := `schema_version is the string "1"; this build reads the number 1`; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Decode error %v, want it to say %q", err, want)
	}
}

// Whitespace around the value is not trailing data, and a second Decode of the
// same bytes gives the same envelope.
func TestDecodeAcceptsSurroundingWhitespace(t *testing.T) {
	want, err := Decode([]byte(exampleObservation))
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode([]byte(" \n\t" + exampleObservation + " \r\n\t "))
	if err != nil {
		t.Fatalf("whitespace around the envelope rejected: %v", err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decoded %+v, want %+v", got, want)
	}
	if got.SchemaVersion != SchemaVersion {
		t.Fatalf("schema version %d, want %d", got.SchemaVersion, SchemaVersion)
	}
}

func TestDecodeKeepsUnknownFieldsOutAndMetaNumbersExact(t *testing.T) {
	input := strings.Replace(exampleObservation, `"meta":{"dia_id":"D1:3"}`,
		`"meta":{"dia_id":"D1:3","big":12345678901234567890,"nested":{"x":[1,"a"]}},"future_field":{"a":1}`, 1)
	input = strings.Replace(input, `"tenant":"acme"`, `"tenant":"acme","added_later":true`, 1)
	e, err := Decode([]byte(input))
	if err != nil {
		t.Fatalf("unknown fields must be accepted: %v", err)
	}
	if got := e.Observation.Meta["big"]; got != json.Number("12345678901234567890") {
		t.Fatalf("meta number changed: %#v", got)
	}
	want := map[string]any{"x": []any{json.Number("1"), "a"}}
	if !reflect.DeepEqual(e.Observation.Meta["nested"], want) {
		t.Fatalf("nested meta changed: %#v", e.Observation.Meta["nested"])
	}
}

func TestRecordOfEnvelope(t *testing.T) {
	e := validObservation()
	e.Observation.Meta = map[string]any{"dia_id": "D1:3"}
	r, err := e.Record()
	if err != nil {
		t.Fatal(err)
	}
	if r.EventID != e.ID || r.SessionKey != "acme.u1.s1" || r.Obs != e.Observation || r.Type != TypeObservation || !r.TS.Equal(e.TS) {
		t.Fatalf("Record = %+v", r)
	}
	if err := r.Validate(); err != nil {
		t.Fatalf("record of a valid envelope: %v", err)
	}
	hit := New(TypeMemoryHit, "acme", "u1", "", "")
	hit.MemoryHit = &MemoryHit{MemoryIDs: []string{"m1"}}
	if _, err := hit.Record(); !errors.Is(err, ErrInvalidEvent) {
		t.Fatalf("Record of a memory_hit: %v", err)
	}
}

// TestReadmeExamplesDecode keeps the documented examples valid: every ```json block
// of README.md must decode, and every type must have one.
func TestReadmeExamplesDecode(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```json\n(.*?)```").FindAllSubmatch(readme, -1)
	if len(blocks) < len(Types) {
		t.Fatalf("README has %d JSON examples, want at least one per type", len(blocks))
	}
	seen := map[Type]bool{}
	for _, b := range blocks {
		e, err := Decode(b[1])
		if err != nil {
			t.Errorf("README example does not decode: %v\n%s", err, b[1])
			continue
		}
		seen[e.Type] = true
	}
	for _, typ := range Types {
		if !seen[typ] {
			t.Errorf("README has no example of %s", typ)
		}
	}
}

func TestWriteValidation(t *testing.T) {
	env := New(TypeWrite, "acme", "u1", "", "")
	for _, c := range []struct {
		write Write
		want  string
	}{
		{Write{Op: "get", Request: json.RawMessage(`{"user_id":"u1","id":"m1"}`)}, "write.op"},
		{Write{Op: EndpointAppend}, "write.request is required"},
		{Write{Op: EndpointAppend, Request: json.RawMessage(`{"user_id":"u1"}`)}, "content"},
		{Write{Op: EndpointAppend, Request: json.RawMessage(`{"user_id":"u2","content":"x"}`)}, "write.request.user_id"},
		{Write{Op: EndpointAdd, Request: json.RawMessage(`{"user_id":"u1","text":"x"}`), MemoryIDs: []string{"a b"}}, "write.memory_ids[0]"},
		{Write{Op: EndpointImport, Request: json.RawMessage(`{"user_id":"u1","records":[{"id":"m1","memory_type":"semantic","text":"x"}]}`)}, "records[0] has no vector"},
	} {
		env.Write = &c.write
		if err := env.Validate(); !errors.Is(err, ErrInvalidEvent) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %s: %v, want ErrInvalidEvent naming %s", c.write.Op, c.write.Request, err, c.want)
		}
	}
	for _, w := range []Write{
		{Op: EndpointAppend, Request: json.RawMessage(`{"user_id":"u1","content":"Prefers tabs."}`)},
		{Op: EndpointImport, Request: json.RawMessage(`{"user_id":"u1","records":[{"id":"m1","memory_type":"semantic","text":"x","vector":[0.5]}],"embedder":{"model":"hash-v1","dimensions":1}}`)},
	} {
		env.Write = &w
		if err := env.Validate(); err != nil {
			t.Fatalf("%s: %v", w.Op, err)
		}
	}
}
