package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/agentmem/agentmem/pkg/docstore"
	"github.com/agentmem/agentmem/pkg/llm"
	"github.com/agentmem/agentmem/pkg/obs"
	"github.com/agentmem/agentmem/pkg/session"
)

// SessionSummarizer extends a session's summary (SPEC B2): previous is the
// summary so far ("" for none), msgs the messages since, oldest first; it
// returns the whole new summary.
type SessionSummarizer interface {
	SummarizeSession(ctx context.Context, previous string, msgs []session.Message) (string, error)
	// By names it in the stored summary: session.SummaryByLLM or SummaryByRules.
	By() string
}

// LLMSessionSummarizer asks a chat model (prompts/summarize.tmpl).
type LLMSessionSummarizer struct {
	Client *llm.Client
}

var summarizePrompt = llm.MustLoadPrompt(promptFS, "prompts", "summarize")

// By implements SessionSummarizer.
func (LLMSessionSummarizer) By() string { return session.SummaryByLLM }

func (s LLMSessionSummarizer) client() *llm.Client { return s.Client }

// SummarizeSession implements SessionSummarizer.
func (s LLMSessionSummarizer) SummarizeSession(ctx context.Context, previous string, msgs []session.Message) (string, error) {
	system, user, err := summarizePrompt.Render(struct {
		Previous string
		Messages []promptLine
	}{strings.TrimSpace(previous), promptLines(msgs)})
	if err != nil {
		return "", err
	}
	var reply struct {
		Summary string `json:"summary"`
	}
	if err := s.Client.CompleteJSON(llm.WithStep(ctx, StepSummarize), system, user, summarizePrompt.Schema, &reply); err != nil {
		return "", fmt.Errorf("lifecycle: summarize: %w", err)
	}
	out := strings.TrimSpace(reply.Summary)
	if out == "" {
		return "", fmt.Errorf("lifecycle: summarize: %w: the model returned an empty summary", llm.ErrBadReply)
	}
	return out, nil
}

// promptLine is a message as the prompts show it: one line, "[i] role: text".
type promptLine struct{ Role, Text string }

func promptLines(msgs []session.Message) []promptLine {
	out := make([]promptLine, len(msgs))
	for i, m := range msgs {
		out[i] = promptLine{string(m.Role), strings.Join(strings.Fields(m.Text), " ")}
	}
	return out
}

// DefaultSummaryMaxChars bounds the offline summary.
const DefaultSummaryMaxChars = 2000

// RuleSessionSummarizer is the offline summariser: extractive and deterministic.
// Of each new message it keeps the sentences with a name (not just a capitalised
// first word), number, date, file name or identifier (KeyTokens), a decision or
// an error, one line each ("user: ...", repeats dropped), appended to the
// previous summary's lines; past MaxChars (default DefaultSummaryMaxChars) the
// oldest lines go first.
type RuleSessionSummarizer struct {
	MaxChars int
}

// By implements SessionSummarizer.
func (RuleSessionSummarizer) By() string { return session.SummaryByRules }

var (
	sentenceEndRE  = regexp.MustCompile(`[.!?]+(?:\s+|$)|\n+`)
	decisionWordRE = regexp.MustCompile(`(?i)\b(?:decided|decide|agreed|agree|let'?s|we(?:'ll| will| should)|i(?:'ll| will)|going to|chose|chosen|settled|from now on|instead|must|never|always|prefer|prefers)\b`)
	errorWordRE    = regexp.MustCompile(`(?i)\b(?:error|errors|failed|fails|failure|exception|panic|crash|crashed|broken|bug|timeout|denied|refused|not found)\b`)
)

// SummarizeSession implements SessionSummarizer.
func (r RuleSessionSummarizer) SummarizeSession(_ context.Context, previous string, msgs []session.Message) (string, error) {
	return SummarizeExtractive(previous, msgs, r.MaxChars), nil
}

// SummarizeExtractive is RuleSessionSummarizer's function; maxChars <= 0 uses
// DefaultSummaryMaxChars.
func SummarizeExtractive(previous string, msgs []session.Message, maxChars int) string {
	return SummarizeExtractiveLines(previous, msgs, maxChars, KeyLines)
}

// KeyLines are the lines the offline summariser keeps of m: "role: sentence"
// for each of its key sentences, in order. The regular expressions behind it
// cost tens of microseconds a message, so the retriever, which digests on a
// request's path, keeps them per message.
func KeyLines(m session.Message) []string {
	var out []string
	for _, sent := range splitSentences(m.Text) {
		if keySentence(sent) {
			out = append(out, string(m.Role)+": "+sent)
		}
	}
	return out
}

// SummarizeExtractiveLines is SummarizeExtractive with each message's lines
// from lines: KeyLines, or a cache of it.
func SummarizeExtractiveLines(previous string, msgs []session.Message, maxChars int, keyLines func(session.Message) []string) string {
	if maxChars <= 0 {
		maxChars = DefaultSummaryMaxChars
	}
	var lines []string
	seen := map[string]bool{}
	for l := range strings.Lines(previous) {
		if l = strings.TrimSpace(l); l != "" && !seen[strings.ToLower(l)] {
			seen[strings.ToLower(l)] = true
			lines = append(lines, l)
		}
	}
	for _, m := range msgs {
		for _, l := range keyLines(m) {
			if k := strings.ToLower(l); !seen[k] {
				seen[k] = true
				lines = append(lines, l)
			}
		}
	}
	total := 0
	for _, l := range lines {
		total += utf8.RuneCountInString(l) + 1
	}
	for len(lines) > 1 && total > maxChars {
		total -= utf8.RuneCountInString(lines[0]) + 1
		lines = lines[1:]
	}
	out := strings.Join(lines, "\n")
	if utf8.RuneCountInString(out) > maxChars {
		out = string([]rune(out)[:maxChars-1]) + "…"
	}
	return out
}

func splitSentences(text string) []string {
	var out []string
	rest := text
	for rest != "" {
		loc := sentenceEndRE.FindStringIndex(rest)
		end, next := len(rest), len(rest)
		if loc != nil {
			end, next = loc[1], loc[1]
			if loc[0] == loc[1] { // cannot happen with these patterns; guards the loop
				end, next = len(rest), len(rest)
			}
		}
		if s := strings.Join(strings.Fields(rest[:end]), " "); s != "" {
			out = append(out, s)
		}
		rest = rest[next:]
	}
	return out
}

// keySentence reports whether a sentence is worth keeping in the offline summary:
// a key token (KeyTokens) other than its capitalised first word, which is as
// often an interjection ("Wow", "Hey") as a name, a decision or an error.
func keySentence(s string) bool {
	if decisionWordRE.MatchString(s) || errorWordRE.MatchString(s) {
		return true
	}
	first, _, _ := strings.Cut(s, " ")
	first = strings.TrimRight(first, ",.!?:;")
	for tok := range KeyTokens(s) {
		if tok != first || !isWord(tok) {
			return true
		}
	}
	return false
}

// isWord reports whether s is letters only.
func isWord(s string) bool {
	return s != "" && strings.IndexFunc(s, func(r rune) bool { return !unicode.IsLetter(r) }) < 0
}

// SessionSummaryConfig configures SessionSummaries.
type SessionSummaryConfig struct {
	// KeepCount is how many of the latest messages stay verbatim (default 4).
	KeepCount int
	// ContextWindowTokens is the agents' context window (default 8192): when
	// summarising fails and the unsummarised messages with the summary exceed it,
	// the emergency path drops the oldest half of them.
	ContextWindowTokens int
	// Policies, when set, gives each session's keep count
	// (session_summary_keep_count of its policy) in place of KeepCount.
	Policies *Policies
}

func (c *SessionSummaryConfig) setDefaults() {
	if c.KeepCount == 0 {
		c.KeepCount = 4
	}
	if c.ContextWindowTokens == 0 {
		c.ContextWindowTokens = 8192
	}
}

// Validate reports configuration errors.
func (c SessionSummaryConfig) Validate() error {
	if c.KeepCount < 1 || c.ContextWindowTokens < 1 {
		return fmt.Errorf("%w: session summary KeepCount %d and ContextWindowTokens %d must be at least 1", ErrInvalidConfig, c.KeepCount, c.ContextWindowTokens)
	}
	return nil
}

// SessionSummaries keeps sessions' running summaries (SPEC B2); the extractor
// runs it on each summary_due event.
type SessionSummaries struct {
	cfg     SessionSummaryConfig
	store   *session.Store
	model   SessionSummarizer
	metrics *Metrics
	logger  *zap.Logger
	now     func() time.Time
}

// NewSessionSummaries returns the summariser over store; model nil is the
// offline RuleSessionSummarizer.
func NewSessionSummaries(cfg SessionSummaryConfig, store *session.Store, model SessionSummarizer, metrics *Metrics, logger *zap.Logger) (*SessionSummaries, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if store == nil {
		return nil, fmt.Errorf("%w: no session store", ErrInvalidConfig)
	}
	if model == nil {
		model = RuleSessionSummarizer{}
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	return &SessionSummaries{cfg: cfg, store: store, model: model, metrics: metrics, logger: logger, now: time.Now}, nil
}

// SummaryOutcome is what Summarize did.
type SummaryOutcome string

// Outcomes of Summarize.
const (
	SummaryUnchanged  SummaryOutcome = "unchanged" // nothing new to summarise: written nothing
	SummaryWritten    SummaryOutcome = "summarized"
	SummaryEmergency  SummaryOutcome = "emergency"
	summaryFailedStat                = "failed"
)

// Summarize extends the session's summary with its messages since the last
// one, all but the latest KeepCount, for the summary_due event dueID ("" when
// none). It is idempotent: a session whose summary already covers them, or was
// written for dueID, writes nothing (a redelivered summary_due). The write is a
// compare-and-set on the summary's own key; losing it to another handler is an
// error, retried. When the model fails and the summary with the unsummarised
// messages exceed the context window, the emergency path drops the oldest half
// of those messages (logged, counted) instead of failing.
func (s *SessionSummaries) Summarize(ctx context.Context, tenant, user, sessionID, dueID string) (SummaryOutcome, error) {
	st, err := s.store.Get(ctx, tenant, user, sessionID)
	if errors.Is(err, session.ErrNotFound) {
		return SummaryUnchanged, nil
	}
	if err != nil {
		return "", err
	}
	sum, rev, err := s.store.GetSummary(ctx, tenant, user, sessionID)
	if err != nil && !errors.Is(err, session.ErrNotFound) {
		return "", err
	}
	if dueID != "" && sum.DueID == dueID {
		return SummaryUnchanged, nil
	}
	keep := s.cfg.KeepCount
	if s.cfg.Policies != nil {
		keep = s.cfg.Policies.For(ctx, docstore.Namespace{Tenant: tenant, User: user}, sessionID).SessionSummaryKeepCount
	}
	pending := sum.After(st.Recent)
	if len(pending) <= keep {
		return SummaryUnchanged, nil
	}
	todo := pending[:len(pending)-keep]
	log := s.logger.With(obs.Tenant(tenant), obs.User(user), obs.Session(sessionID))
	text, err := s.model.SummarizeSession(ctx, sum.Text, todo)
	by := s.model.By()
	if errors.Is(err, llm.ErrBadReply) && ctx.Err() == nil {
		// SPEC C9: an unusable reply falls back to the offline summary, never
		// to a dead letter. (An unavailable model is retried: the event is
		// redelivered, and the emergency path below bounds the session.)
		fallenBack(s.model, StepSummarize, log, err)
		text, err, by = SummarizeExtractive(sum.Text, todo, 0), nil, session.SummaryByRulesFallback
	}
	if err != nil {
		tokens := session.EstimateTokens(sum.Text)
		for _, m := range pending {
			tokens += session.EstimateTokens(m.Text)
		}
		if tokens <= s.cfg.ContextWindowTokens {
			s.metrics.summary(summaryFailedStat)
			return "", fmt.Errorf("lifecycle: summarise session %s: %w", sessionID, err)
		}
		todo = pending[:max(1, len(pending)/2)]
		text, by = sum.Text, session.SummaryByEmergency
		log.Warn("session summary failed and the session is over the context window; dropping its oldest half",
			zap.Int("dropped", len(todo)), zap.Int("tokens", tokens), zap.Int("context_window_tokens", s.cfg.ContextWindowTokens), zap.Error(err))
	}
	next := sum
	next.Text = text
	if next.FirstEventID == "" {
		next.FirstEventID = todo[0].EventID
	}
	last := todo[len(todo)-1]
	next.LastEventID, next.ThroughTS = last.EventID, last.TS
	next.Messages += len(todo)
	if by == session.SummaryByEmergency {
		next.Dropped += len(todo)
	}
	next.By, next.UpdatedAt, next.DueID = by, s.now().UTC(), dueID
	if _, err := s.store.PutSummary(ctx, tenant, user, sessionID, next, rev); err != nil {
		return "", err
	}
	if by == session.SummaryByEmergency {
		s.metrics.summary(string(SummaryEmergency))
		return SummaryEmergency, nil
	}
	s.metrics.summary(string(SummaryWritten))
	log.Info("session summarised", zap.Int("messages", len(todo)), zap.Int("covered", next.Messages), zap.String("by", by))
	return SummaryWritten, nil
}
