package llm

import (
	"bytes"
	"fmt"
	"io/fs"
	"text/template"
)

// Prompt is one step's prompt: a text/template with the blocks "system" and
// "user", and the JSON Schema its reply must match (CompleteJSON's schema).
type Prompt struct {
	Name   string
	Schema []byte
	tmpl   *template.Template
}

// MustLoadPrompt reads dir/<name>.tmpl and dir/<name>.schema.json from fsys, an
// embedded file system: they are compiled into the binary, so a failure is a
// build defect that any test catches, and it panics.
func MustLoadPrompt(fsys fs.FS, dir, name string) Prompt {
	schema, err := fs.ReadFile(fsys, dir+"/"+name+".schema.json")
	if err != nil {
		panic(fmt.Sprintf("llm: embedded schema %s: %v", name, err))
	}
	return Prompt{Name: name, Schema: schema, tmpl: template.Must(template.ParseFS(fsys, dir+"/"+name+".tmpl"))}
}

// Render executes the prompt's blocks on data.
func (p Prompt) Render(data any) (system, user string, err error) {
	var s, u bytes.Buffer
	if err := p.tmpl.ExecuteTemplate(&s, "system", data); err != nil {
		return "", "", fmt.Errorf("llm: %s prompt: %w", p.Name, err)
	}
	if err := p.tmpl.ExecuteTemplate(&u, "user", data); err != nil {
		return "", "", fmt.Errorf("llm: %s prompt: %w", p.Name, err)
	}
	return s.String(), u.String(), nil
}
