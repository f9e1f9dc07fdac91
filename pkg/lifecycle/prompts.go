package lifecycle

import (
	"bytes"
	"embed"
	"fmt"
	"text/template"
)

//go:embed prompts
var promptFS embed.FS

// prompt is one step's template (blocks "system" and "user") and reply schema.
type prompt struct {
	name   string
	tmpl   *template.Template
	schema []byte
}

// loadPrompt reads prompts/<name>.tmpl and prompts/<name>.schema.json, compiled
// into the binary: a failure is a build defect any test catches.
func loadPrompt(name string) prompt {
	schema, err := promptFS.ReadFile("prompts/" + name + ".schema.json")
	if err != nil {
		panic(fmt.Sprintf("lifecycle: embedded schema %s: %v", name, err))
	}
	return prompt{name: name, tmpl: template.Must(template.ParseFS(promptFS, "prompts/"+name+".tmpl")), schema: schema}
}

func (p prompt) render(data any) (system, user string, err error) {
	var s, u bytes.Buffer
	if err := p.tmpl.ExecuteTemplate(&s, "system", data); err != nil {
		return "", "", fmt.Errorf("lifecycle: %s prompt: %w", p.name, err)
	}
	if err := p.tmpl.ExecuteTemplate(&u, "user", data); err != nil {
		return "", "", fmt.Errorf("lifecycle: %s prompt: %w", p.name, err)
	}
	return s.String(), u.String(), nil
}

var compressPrompt = loadPrompt("compress")
