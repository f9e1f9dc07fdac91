package extract

import (
	"context"

	"go.uber.org/zap"

	"github.com/agentmem/agentmem/pkg/markdown"
)

// Rules is the offline extractor: rules over the conversation (English; Chinese
// and German for files, preferences and errors), no model, deterministic. doc.go lists the rules and their limits.
type Rules struct {
	logger *zap.Logger
}

var _ Extractor = (*Rules)(nil)

// NewRules returns the rule-based extractor. A nil logger logs nothing.
func NewRules(logger *zap.Logger) *Rules {
	if logger == nil {
		logger = zap.NewNop()
	}
	return &Rules{logger: logger.Named("extract.rules")}
}

// Extract returns the entries the rules find, in order of first evidence. It never
// fails except when ctx has ended.
func (r *Rules) Extract(ctx context.Context, conversation []Message) ([]Extracted, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s := session{files: make(map[string]*fileFacts)}
	for _, m := range conversation {
		s.observe(m)
	}
	out := s.result()
	r.logger.Debug("rules extraction done", zap.Int("messages", len(conversation)), zap.Int("entries", len(out)))
	return out, nil
}

// slot is an entry in order of first evidence. A file's entry is rendered at the
// end, when everything the session said about the file is known.
type slot struct {
	category markdown.Category
	content  string
	file     *fileFacts
}

// session is the state of one pass of the rules over a conversation.
type session struct {
	slots   []slot
	files   map[string]*fileFacts // by subject key
	current subject               // the file in discussion
	errs    errorTracker
	// proposal: the last message was an assistant's suggestion or offer, which
	// the user's next message may turn down for an alternative.
	proposal bool
}

func (s *session) observe(m Message) {
	role := m.Role
	switch role {
	case RoleSystem:
		return
	case RoleAssistant, RoleTool:
	default:
		role = RoleUser // a named speaker of a transcript
	}
	if role == RoleAssistant && s.errs.pending != "" {
		s.errs.suggested = m.Text
	}
	proposal := s.proposal
	s.proposal = role == RoleAssistant && proposes(m.Text)
	for i, sent := range sentences(m.Text) {
		if i == 0 && role == RoleUser && proposal && !sent.code {
			s.observeRejection(sent.text)
		}
		s.observeErrors(role, sent.text)
		if role == RoleAssistant {
			continue // an assistant's echo of the user's facts is no new evidence
		}
		s.observeFiles(sent.text, role == RoleUser)
		if role == RoleUser && !sent.code {
			s.observeStatement(sent.text)
		}
	}
}

func (s *session) add(cat markdown.Category, content string) {
	s.slots = append(s.slots, slot{category: cat, content: content})
}

func (s *session) result() []Extracted {
	var set entrySet
	for _, sl := range s.slots {
		if sl.file != nil {
			set.add(markdown.CategoryFilePattern, sl.file.content())
			continue
		}
		set.add(sl.category, sl.content)
	}
	return set.list()
}
