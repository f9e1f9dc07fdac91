package extract

import (
	"context"
	"strings"
	"time"

	"github.com/agentmem/agentmem/pkg/markdown"
)

// Message roles. Any other role is taken as a human speaker, like RoleUser (chat
// transcripts name their speakers).
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
	RoleSystem    = "system"
)

// Message is one message of a finished session's conversation.
type Message struct {
	Role    string // user | assistant | tool | system
	Text    string
	TS      time.Time
	EventID string
}

// Extracted is one entry worth remembering (SPEC A3).
type Extracted struct {
	Category markdown.Category
	Content  string
}

// Extractor turns a finished session's conversation into entries worth remembering.
// Implementations return entries with a valid category and non-empty content.
type Extractor interface {
	Extract(ctx context.Context, conversation []Message) ([]Extracted, error)
}

// ShouldExtract reports whether conv has anything to extract from: at least one
// non-system message with non-blank text. When it is false no model is called
// (SPEC A3).
func ShouldExtract(conv []Message) bool {
	for _, m := range conv {
		if m.Role != RoleSystem && strings.TrimSpace(m.Text) != "" {
			return true
		}
	}
	return false
}

// ValidCategory reports whether c is one of the categories of SPEC A3.
func ValidCategory(c markdown.Category) bool {
	switch c {
	case markdown.CategoryFilePattern, markdown.CategoryUserPref,
		markdown.CategoryErrorSolution, markdown.CategoryGeneral:
		return true
	}
	return false
}

// entrySet collects entries in order of first evidence and drops repeats: two
// contents that differ only in case or spacing are the same memory.
type entrySet struct {
	entries []Extracted
	seen    map[string]bool
}

func (s *entrySet) add(cat markdown.Category, content string) {
	content = strings.Join(strings.Fields(content), " ")
	if content == "" || !ValidCategory(cat) {
		return
	}
	key := strings.ToLower(content)
	if s.seen == nil {
		s.seen = make(map[string]bool)
	}
	if s.seen[key] {
		return
	}
	s.seen[key] = true
	s.entries = append(s.entries, Extracted{Category: cat, Content: content})
}

// list returns the entries, never nil, so that "nothing to remember" is an empty
// slice for callers that marshal it.
func (s *entrySet) list() []Extracted {
	if s.entries == nil {
		return []Extracted{}
	}
	return s.entries
}
