package extract

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strings"
	"text/template"

	"go.uber.org/zap"

	"github.com/agentmem/agentmem/pkg/llm"
	"github.com/agentmem/agentmem/pkg/markdown"
)

var (
	//go:embed prompt.tmpl
	promptText string
	//go:embed schema.json
	replySchema []byte

	prompts = template.Must(template.New("prompt").Parse(promptText))
)

// maxMessageRunes bounds each message in the prompt: tool outputs can be whole files,
// and their head carries the structure worth remembering.
const maxMessageRunes = 2000

// StepExtract names the extractor's model calls (llm.WithStep).
const StepExtract = "extract"

// LLMExtractor asks a model for the entries (SPEC A3).
type LLMExtractor struct {
	client *llm.Client
	logger *zap.Logger
}

var _ Extractor = (*LLMExtractor)(nil)

// NewLLM returns an extractor that calls client. A nil logger logs nothing.
func NewLLM(client *llm.Client, logger *zap.Logger) *LLMExtractor {
	if logger == nil {
		logger = zap.NewNop()
	}
	return &LLMExtractor{client: client, logger: logger.Named("extract.llm")}
}

type llmReply struct {
	Entries []struct {
		Category string `json:"category"`
		Content  string `json:"content"`
	} `json:"entries"`
}

// Extract returns the model's entries with valid categories, without repeats.
// A conversation ShouldExtract rejects costs no call. A reply that is not usable
// JSON is logged and yields no entries (SPEC C9's safe default); an unreachable or
// refusing endpoint is returned as an error wrapping llm.ErrUnavailable or
// llm.ErrRequest, for the caller to retry or dead-letter.
func (x *LLMExtractor) Extract(ctx context.Context, conversation []Message) ([]Extracted, error) {
	if x.client == nil {
		return nil, errors.New("extract: LLMExtractor has no llm client")
	}
	if !ShouldExtract(conversation) {
		return []Extracted{}, nil
	}
	system, user, err := renderPrompt(conversation)
	if err != nil {
		return nil, err
	}
	var reply llmReply
	err = x.client.CompleteJSON(llm.WithStep(ctx, StepExtract), system, user, replySchema, &reply)
	if errors.Is(err, llm.ErrBadReply) {
		x.logger.Warn("extraction reply unusable, nothing extracted", zap.Error(err))
		return []Extracted{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("extract: %w", err)
	}
	var set entrySet
	for _, e := range reply.Entries {
		cat := markdown.Category(strings.ToLower(strings.TrimSpace(e.Category)))
		if !ValidCategory(cat) {
			x.logger.Warn("extraction entry with unknown category dropped", zap.String("category", e.Category))
			continue
		}
		set.add(cat, e.Content)
	}
	return set.list(), nil
}

func renderPrompt(conv []Message) (system, user string, err error) {
	shown := make([]Message, 0, len(conv))
	for _, m := range conv {
		// System prompts are the agent's instructions, not facts about the user.
		if m.Role == RoleSystem || strings.TrimSpace(m.Text) == "" {
			continue
		}
		m.Text = strings.TrimSpace(m.Text)
		if r := []rune(m.Text); len(r) > maxMessageRunes {
			m.Text = string(r[:maxMessageRunes]) + " …"
		}
		shown = append(shown, m)
	}
	var sb, ub bytes.Buffer
	if err := prompts.ExecuteTemplate(&sb, "system", nil); err != nil {
		return "", "", fmt.Errorf("extract: render prompt: %w", err)
	}
	if err := prompts.ExecuteTemplate(&ub, "user", shown); err != nil {
		return "", "", fmt.Errorf("extract: render prompt: %w", err)
	}
	return sb.String(), ub.String(), nil
}
