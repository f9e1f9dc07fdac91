package events

import (
	"embed"
	"fmt"
	"io/fs"
)

// SchemaBaseURI is the base of every schema's $id; the per-type schemas refer to
// envelope.json relative to it, so a validator must be given all files of Schemas.
const SchemaBaseURI = "https://github.com/agentmem/agentmem/events/schema/"

// EnvelopeSchemaFile holds the fields and body definitions shared by all types.
const EnvelopeSchemaFile = "envelope.json"

//go:embed schema/*.json
var schemaFiles embed.FS

// SchemaFor returns the JSON Schema (draft 2020-12) of events of type t; it refers
// to EnvelopeSchemaFile.
func SchemaFor(t Type) ([]byte, error) {
	if !oneOf(t, Types) {
		return nil, wrap(ErrInvalidEvent, enumError("type", t, Types))
	}
	return fs.ReadFile(schemaFiles, "schema/"+SchemaFileFor(t))
}

// SchemaFileFor is the name of t's schema file inside Schemas ("observation.json").
func SchemaFileFor(t Type) string {
	return string(t) + ".json"
}

// Schemas is every schema file by name, for loading all of them into a validator.
func Schemas() fs.FS {
	sub, err := fs.Sub(schemaFiles, "schema")
	if err != nil {
		// fs.Sub fails only for an invalid directory name, and "schema" is valid.
		panic(fmt.Sprintf("events: embedded schema directory: %v", err))
	}
	return sub
}
