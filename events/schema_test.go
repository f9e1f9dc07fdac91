package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"pgregory.net/rapid"
)

// compileSchemas loads every embedded schema file and compiles one schema per type,
// with format assertions on so "ts" must really be a date-time.
func compileSchemas(t *testing.T) map[Type]*jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	err := fs.WalkDir(Schemas(), ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(Schemas(), name)
		if err != nil {
			return err
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
		if err != nil {
			return err
		}
		return c.AddResource(SchemaBaseURI+name, doc)
	})
	if err != nil {
		t.Fatalf("loading schemas: %v", err)
	}
	schemas := make(map[Type]*jsonschema.Schema, len(Types))
	for _, typ := range Types {
		sch, err := c.Compile(SchemaBaseURI + SchemaFileFor(typ))
		if err != nil {
			t.Fatalf("compiling the %s schema: %v", typ, err)
		}
		schemas[typ] = sch
	}
	return schemas
}

// acceptingSchemas lists the types whose schema accepts the JSON document.
func acceptingSchemas(t *rapid.T, schemas map[Type]*jsonschema.Schema, data []byte) []Type {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("marshalled envelope is not JSON: %v", err)
	}
	var accepted []Type
	for _, typ := range Types {
		if schemas[typ].Validate(doc) == nil {
			accepted = append(accepted, typ)
		}
	}
	return accepted
}

func TestEveryTypeHasASchemaFile(t *testing.T) {
	names := map[string]bool{EnvelopeSchemaFile: true}
	for _, typ := range Types {
		data, err := SchemaFor(typ)
		if err != nil {
			t.Fatalf("SchemaFor(%s): %v", typ, err)
		}
		var doc struct {
			Schema string `json:"$schema"`
			ID     string `json:"$id"`
		}
		if err := json.Unmarshal(data, &doc); err != nil {
			t.Fatalf("%s schema is not JSON: %v", typ, err)
		}
		if doc.Schema != "https://json-schema.org/draft/2020-12/schema" || doc.ID != SchemaBaseURI+SchemaFileFor(typ) {
			t.Fatalf("%s schema has $schema %q and $id %q", typ, doc.Schema, doc.ID)
		}
		names[SchemaFileFor(typ)] = true
	}
	entries, err := fs.ReadDir(Schemas(), ".")
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(names) {
		t.Fatalf("schema directory holds %d files, want exactly %d (one per type plus %s)", len(entries), len(names), EnvelopeSchemaFile)
	}
	for _, e := range entries {
		if !names[e.Name()] {
			t.Errorf("stray schema file %s", e.Name())
		}
	}
	if _, err := SchemaFor("gossip"); !errors.Is(err, ErrInvalidEvent) {
		t.Fatalf("SchemaFor(unknown type): %v", err)
	}
	compileSchemas(t) // every file compiles and every $ref resolves
}

func TestValidEnvelopesMatchTheirSchemaOnly(t *testing.T) {
	schemas := compileSchemas(t)
	rapid.Check(t, func(t *rapid.T) {
		e := genEnvelope().Draw(t, "envelope")
		if err := e.Validate(); err != nil {
			t.Fatalf("generator made an invalid envelope: %v", err)
		}
		data, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		accepted := acceptingSchemas(t, schemas, data)
		if len(accepted) != 1 || accepted[0] != e.Type {
			doc, _ := jsonschema.UnmarshalJSON(bytes.NewReader(data))
			t.Fatalf("a valid %s event is accepted by the schemas of %v, want only its own\n%s\n%v", e.Type, accepted, data, schemas[e.Type].Validate(doc))
		}
	})
}

// mutation breaks a valid envelope in one way that both Validate and the schemas must
// catch; applies says which envelopes it can break.
type mutation struct {
	name    string
	applies func(Envelope) bool
	apply   func(*rapid.T, *Envelope)
}

func anyType(Envelope) bool { return true }

func isType(types ...Type) func(Envelope) bool {
	return func(e Envelope) bool { return oneOf(e.Type, types) }
}

var mutations = []mutation{
	{"bad id", anyType, func(t *rapid.T, e *Envelope) { e.ID = genBadID().Draw(t, "bad") }},
	{"bad tenant", anyType, func(t *rapid.T, e *Envelope) { e.Tenant = genBadID().Draw(t, "bad") }},
	{"bad user", anyType, func(t *rapid.T, e *Envelope) { e.UserID = genBadID().Draw(t, "bad") }},
	{"bad agent", anyType, func(t *rapid.T, e *Envelope) {
		e.AgentID = rapid.Map(genBadID(), func(s string) string { return s + "." }).Draw(t, "bad")
	}},
	{"bad session", anyType, func(t *rapid.T, e *Envelope) {
		e.SessionID = rapid.Map(genBadID(), func(s string) string { return "*" + s }).Draw(t, "bad")
	}},
	{"missing session", isType(TypeObservation, TypeSessionEnded, TypeSummaryDue), func(_ *rapid.T, e *Envelope) { e.SessionID = "" }},
	{"scope owner in a session", isType(TypeObservation, TypeSessionEnded, TypeSummaryDue), func(t *rapid.T, e *Envelope) {
		e.UserID = rapid.SampledFrom([]string{TenantOwner, AgentOwner("bot"), ReservedUserPrefix + "x"}).Draw(t, "owner")
	}},
	{"zero ts", anyType, func(_ *rapid.T, e *Envelope) { e.TS = time.Time{} }},
	{"unknown type", anyType, func(_ *rapid.T, e *Envelope) { e.Type = "gossip" }},
	{"schema version", anyType, func(t *rapid.T, e *Envelope) {
		e.SchemaVersion = rapid.SampledFrom([]int{0, 2, -1}).Draw(t, "version")
	}},
	{"foreign body", anyType, func(_ *rapid.T, e *Envelope) {
		if e.Type == TypeMemoryHit {
			e.ConsolidateRequested = &ConsolidateRequested{}
		} else {
			e.MemoryHit = &MemoryHit{MemoryIDs: []string{"m1"}}
		}
	}},
	{"missing body", isType(TypeObservation, TypeMemoryHit, TypeMemoryWritten, TypeSummaryDue), func(_ *rapid.T, e *Envelope) {
		e.Observation, e.MemoryHit, e.MemoryWritten, e.SummaryDue = nil, nil, nil, nil
	}},
	{"bad role", isType(TypeObservation), func(t *rapid.T, e *Envelope) {
		e.Observation.Role = Role(rapid.SampledFrom([]string{"", "robot", "User"}).Draw(t, "role"))
	}},
	{"bad kind", isType(TypeObservation), func(_ *rapid.T, e *Envelope) { e.Observation.Kind = "thought" }},
	{"message without text", isType(TypeObservation), func(t *rapid.T, e *Envelope) {
		e.Observation.Kind = rapid.SampledFrom([]ObservationKind{"", KindMessage}).Draw(t, "kind")
		e.Observation.Text = ""
	}},
	{"message of white space only", isType(TypeObservation), func(t *rapid.T, e *Envelope) {
		e.Observation.Kind = rapid.SampledFrom([]ObservationKind{"", KindMessage}).Draw(t, "kind")
		e.Observation.Text = rapid.SampledFrom([]string{" ", "\n", " \t\r\n  "}).Draw(t, "blank")
	}},
	{"tool call without name", isType(TypeObservation), func(_ *rapid.T, e *Envelope) {
		e.Observation.Kind, e.Observation.ToolCall = KindToolCall, &ToolCall{ID: "c1"}
	}},
	{"turn without turn", isType(TypeObservation), func(t *rapid.T, e *Envelope) {
		e.Observation.Kind = rapid.SampledFrom([]ObservationKind{KindTurnStarted, KindTurnFinished}).Draw(t, "kind")
		e.Observation.Turn = nil
	}},
	{"hit without ids", isType(TypeMemoryHit), func(_ *rapid.T, e *Envelope) { e.MemoryHit.MemoryIDs = nil }},
	{"hit with bad id", isType(TypeMemoryHit), func(t *rapid.T, e *Envelope) {
		e.MemoryHit.MemoryIDs = append(e.MemoryHit.MemoryIDs, genBadID().Draw(t, "bad"))
	}},
	{"written escaping the directory", isType(TypeMemoryWritten), func(t *rapid.T, e *Envelope) {
		file := rapid.SampledFrom([]string{"../MEMORY.md", "/etc/passwd", "a/../../b.md", "notes.txt", ""}).Draw(t, "file")
		e.MemoryWritten.Entries = append(e.MemoryWritten.Entries, WrittenEntry{File: file, Content: "x"})
	}},
}

func TestInvalidEnvelopesRejectedBySchemaAndValidate(t *testing.T) {
	schemas := compileSchemas(t)
	rapid.Check(t, func(t *rapid.T) {
		e := genEnvelope().Draw(t, "envelope")
		var applicable []mutation
		for _, m := range mutations {
			if m.applies(e) {
				applicable = append(applicable, m)
			}
		}
		m := rapid.SampledFrom(applicable).Draw(t, "mutation")
		m.apply(t, &e)
		err := e.Validate()
		if !errors.Is(err, ErrInvalidEvent) {
			t.Fatalf("%s: Validate() = %v, want ErrInvalidEvent", m.name, err)
		}
		data, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		if accepted := acceptingSchemas(t, schemas, data); len(accepted) != 0 {
			t.Fatalf("%s: schemas of %v accept the invalid event that Validate rejects (%v)\n%s", m.name, accepted, e.Validate(), data)
		}
		if _, err := Decode(data); err == nil {
			t.Fatalf("%s: Decode accepted %s", m.name, data)
		}
	})
}
