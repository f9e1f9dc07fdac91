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

// LLMExtractor asks a model for the entries (SPEC A3); when the model's reply is
// unusable or the model is unavailable, the offline rules stand in (ExtractReport
// says so).
type LLMExtractor struct {
	client *llm.Client
	rules  *Rules
	logger *zap.Logger
}

var _ Extractor = (*LLMExtractor)(nil)

// NewLLM returns an extractor that calls client. A nil logger logs nothing.
func NewLLM(client *llm.Client, logger *zap.Logger) *LLMExtractor {
	if logger == nil {
		logger = zap.NewNop()
	}
	return &LLMExtractor{client: client, rules: NewRules(logger), logger: logger.Named("extract.llm")}
}

// ProcessedByRulesFallback marks an extraction the rules made in the model's
// place (Report.ProcessedBy, and "processed_by" in the session's record in KV
// agentmem_extractions), so that a later pass can find it and redo it with the
// model.
const ProcessedByRulesFallback = "rules_fallback"

// Report is an extraction and how it was made.
type Report struct {
	Entries []Extracted
	// ProcessedBy is ProcessedByRulesFallback when the rules stood in for the
	// model, "" otherwise; Reason then says why.
	ProcessedBy, Reason string
}

// Reporter is an Extractor that can say how it extracted; the worker records it.
type Reporter interface {
	ExtractReport(ctx context.Context, conversation []Message) (Report, error)
}

var _ Reporter = (*LLMExtractor)(nil)

// Extract implements Extractor: ExtractReport's entries.
func (x *LLMExtractor) Extract(ctx context.Context, conversation []Message) ([]Extracted, error) {
	r, err := x.ExtractReport(ctx, conversation)
	return r.Entries, err
}

type llmReply struct {
	Entries []struct {
		Category string `json:"category"`
		Content  string `json:"content"`
	} `json:"entries"`
}

// ExtractReport returns the model's entries with valid categories, without
// repeats. A conversation ShouldExtract rejects costs no call. When the reply is
// not usable JSON (llm.ErrBadReply) or the endpoint stays unavailable after its
// retries (llm.ErrUnavailable), the offline rules extract instead and the report
// says so (issue 22: an unusable reply no longer means "nothing to remember"). A
// refusing endpoint (llm.ErrRequest: wrong key, unknown model) is returned, for
// the caller to dead-letter: the rules would hide a configuration error.
func (x *LLMExtractor) ExtractReport(ctx context.Context, conversation []Message) (Report, error) {
	if x.client == nil {
		return Report{}, errors.New("extract: LLMExtractor has no llm client")
	}
	if !ShouldExtract(conversation) {
		return Report{Entries: []Extracted{}}, nil
	}
	system, user, err := renderPrompt(conversation)
	if err != nil {
		return Report{}, err
	}
	var reply llmReply
	err = x.client.CompleteJSON(llm.WithStep(ctx, StepExtract), system, user, replySchema, &reply)
	if (errors.Is(err, llm.ErrBadReply) || errors.Is(err, llm.ErrUnavailable)) && ctx.Err() == nil {
		entries, rerr := x.rules.Extract(ctx, conversation)
		if rerr != nil {
			return Report{}, rerr
		}
		// The worker logs it, naming the session.
		x.client.ObserveFallback(StepExtract)
		return Report{Entries: entries, ProcessedBy: ProcessedByRulesFallback, Reason: err.Error()}, nil
	}
	if err != nil {
		return Report{}, fmt.Errorf("extract: %w", err)
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
	return Report{Entries: set.list()}, nil
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
