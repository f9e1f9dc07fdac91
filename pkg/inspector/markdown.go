package inspector

import (
	"github.com/agentmem/agentmem/events"
	"html/template"
	"strconv"
	"strings"
	"time"
)

// block is one rendered piece of a Markdown file. Its text is always escaped by the
// template: the inspector renders structure (headings, rules, lists, code), never
// HTML that came from memory.
type block struct {
	Kind  string // "h1".."h4", "hr", "li", "p", "pre"
	Text  string
	Lines []string
}

// renderMarkdown splits the Markdown agentmem writes (### headings, --- between
// entries, paragraphs, lists, fenced code) into blocks.
func renderMarkdown(doc string) []block {
	var (
		out  []block
		para []string
		code []string
		in   bool
	)
	flush := func() {
		if len(para) > 0 {
			out = append(out, block{Kind: "p", Lines: para})
			para = nil
		}
	}
	for _, line := range strings.Split(strings.ReplaceAll(doc, "\r\n", "\n"), "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "```") {
			if in {
				out = append(out, block{Kind: "pre", Text: strings.Join(code, "\n")})
				code, in = nil, false
			} else {
				flush()
				in = true
			}
			continue
		}
		if in {
			code = append(code, line)
			continue
		}
		switch {
		case trimmed == "":
			flush()
		case trimmed == "---" || trimmed == "***":
			flush()
			out = append(out, block{Kind: "hr"})
		case strings.HasPrefix(trimmed, "#"):
			flush()
			level := len(trimmed) - len(strings.TrimLeft(trimmed, "#"))
			out = append(out, block{Kind: "h" + string(rune('0'+min(level+1, 4))), Text: strings.TrimSpace(trimmed[level:])})
		case strings.HasPrefix(trimmed, "- ") || strings.HasPrefix(trimmed, "* "):
			flush()
			out = append(out, block{Kind: "li", Text: trimmed[2:]})
		default:
			para = append(para, line)
		}
	}
	if in {
		out = append(out, block{Kind: "pre", Text: strings.Join(code, "\n")})
	}
	flush()
	return out
}

var funcs = template.FuncMap{
	"time": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format("2006-01-02 15:04:05")
	},
	"score": func(f float64) string { return strconv.FormatFloat(f, 'f', 4, 64) },
	// scope names the shared memory scope an owner id in the user list holds
	// (agent, tenant); "" for a user.
	"scope": func(owner string) string {
		if sc := events.OwnerScope(owner); sc != events.MemoryScopeUser {
			return string(sc) + " scope"
		}
		return ""
	},
	"markdown": renderMarkdown,
}
