package processor

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"strings"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/agentmem/agentmem/pkg/llm"
	"github.com/agentmem/agentmem/pkg/records"
	"github.com/agentmem/agentmem/pkg/textnorm"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// Completer is the part of *llm.Client the LLM processors use.
type Completer interface {
	CompleteJSON(ctx context.Context, system, user string, schema []byte, out any) error
	// ObserveFallback counts a step answered by its rule-based twin in the
	// model's place (agentmem_llm_calls_total{outcome="fallback"}).
	ObserveFallback(step string)
}

// LLMConfig configures the LLM processors.
type LLMConfig struct {
	// Client answers with JSON validated against the processor's schema; usually
	// an *llm.Client.
	Client Completer
	// DecideBatchSize is how many observations LLMDecider.DecideBatch asks in
	// one request (default DefaultDecideBatchSize; 1 asks each alone).
	DecideBatchSize int
}

// DefaultDecideBatchSize is LLMConfig.DecideBatchSize's default: a 300 ms model
// answering 16 decisions a call keeps ~20 calls in flight for 1,000
// observations/s, and 16 short messages fit any model's context.
const DefaultDecideBatchSize = 16

// MaxDecideBatchSize bounds LLMConfig.DecideBatchSize: the request holds every
// message, each up to limits.max_text_bytes.
const MaxDecideBatchSize = 64

// Validate reports what is wrong with the configuration, if anything.
func (c LLMConfig) Validate() error {
	if c.Client == nil {
		return fmt.Errorf("%w: LLM client is nil", ErrInvalidConfig)
	}
	if c.DecideBatchSize < 0 || c.DecideBatchSize > MaxDecideBatchSize {
		return fmt.Errorf("%w: DecideBatchSize %d, want 0 (default) to %d", ErrInvalidConfig, c.DecideBatchSize, MaxDecideBatchSize)
	}
	return nil
}

//go:embed prompts
var promptFS embed.FS

var (
	decidePrompt        = llm.MustLoadPrompt(promptFS, "prompts", "decide")
	decideBatchPrompt   = llm.MustLoadPrompt(promptFS, "prompts", "decide_batch")
	semanticPrompt      = llm.MustLoadPrompt(promptFS, "prompts", "semantic")
	mergePrompt         = llm.MustLoadPrompt(promptFS, "prompts", "merge")
	separatePrompt      = llm.MustLoadPrompt(promptFS, "prompts", "separate")
	reconsolidatePrompt = llm.MustLoadPrompt(promptFS, "prompts", "reconsolidate")
)

// errUnusable marks a reply that matches the schema but cannot be used (e.g. a
// write with nothing to write); it is handled like llm.ErrBadReply.
var errUnusable = errors.New("reply is unusable")

// llmCaller holds what every LLM processor shares.
type llmCaller struct {
	client Completer
	logger *zap.Logger
}

func newCaller(cfg LLMConfig, logger *zap.Logger) (llmCaller, error) {
	if err := cfg.Validate(); err != nil {
		return llmCaller{}, err
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	return llmCaller{client: cfg.Client, logger: logger}, nil
}

// ask renders p with data and decodes the reply into out. It returns
// fallback=true, with the reason logged, when the reply is bad: the processor then
// uses its safe default. Any other failure (endpoint unavailable, request
// rejected, context ended) is returned for the caller to retry or give up.
func (c llmCaller) ask(ctx context.Context, p llm.Prompt, data, out any) (fallback bool, err error) {
	system, user, err := p.Render(data)
	if err != nil {
		return false, fmt.Errorf("processor: %w", err)
	}
	err = c.client.CompleteJSON(llm.WithStep(ctx, p.Name), system, user, p.Schema, out)
	if errors.Is(err, llm.ErrBadReply) {
		c.badReply(p, err)
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("processor: %s: %w", p.Name, err)
	}
	return false, nil
}

// badReply logs and counts, once, that the processor of p uses its rule-based
// twin because the model's reply was unusable (err); its result is marked
// records.ProcessedByRulesFallback where it has room for it.
func (c llmCaller) badReply(p llm.Prompt, err error) {
	c.logger.Warn("LLM reply unusable, using the rule-based default",
		zap.String("processor", p.Name), zap.String("processed_by", records.ProcessedByRulesFallback), zap.Error(err))
	c.client.ObserveFallback(p.Name)
}

// promptRecord is the view of a record a prompt shows.
type promptRecord struct {
	ID, Time, ChatID, Who, Text string
}

func viewRecord(r vectorstore.Record) promptRecord {
	return promptRecord{ID: r.ID, Time: records.FormatTime(r.TS), ChatID: r.ChatID, Who: r.Who, Text: recordText(r)}
}

// LLMDecider is the write decision by a model (SPEC C3). An explicit remember
// request with personal information is always written, whatever the model says;
// on a bad reply the rule-based decision is the safe default.
type LLMDecider struct {
	c     llmCaller
	rules RuleDecider
	batch int
}

// NewLLMDecider returns a model-backed write decider.
func NewLLMDecider(cfg LLMConfig, logger *zap.Logger) (*LLMDecider, error) {
	c, err := newCaller(cfg, logger)
	if err != nil {
		return nil, err
	}
	batch := cfg.DecideBatchSize
	if batch == 0 {
		batch = DefaultDecideBatchSize
	}
	return &LLMDecider{c: c, batch: batch}, nil
}

// decideView is an observation as the decide prompts show it; N numbers it in
// a batched request.
type decideView struct {
	N                             int
	Role, Who, ChatID, Time, Text string
}

func viewObservation(n int, obs records.Observation) decideView {
	return decideView{N: n, Role: obs.Role, Who: obs.Who, ChatID: obs.ChatID, Time: records.FormatTime(obs.TS), Text: obs.Text}
}

// decideReply is the model's decision of one message.
type decideReply struct {
	Write   bool   `json:"write"`
	Thing   string `json:"thing"`
	Context string `json:"context"`
	Reason  string `json:"reason"`
}

// Decide asks the model; speaker and time always come from obs, never the model.
func (d *LLMDecider) Decide(ctx context.Context, obs records.Observation) (records.Episode, error) {
	ruled, _ := d.rules.Decide(ctx, obs)
	if strings.TrimSpace(obs.Text) == "" {
		return ruled, nil
	}
	var reply decideReply
	fallback, err := d.c.ask(ctx, decidePrompt, viewObservation(1, obs), &reply)
	if err != nil {
		return records.Episode{}, err
	}
	return d.episode(decidePrompt, obs, ruled, reply, fallback), nil
}

// DecideBatch implements BatchDecider: the observations are asked DecideBatchSize
// to a request, the requests at once (the model client bounds the calls in
// flight). Each decision is the one Decide makes of its observation alone, given
// the same answer: a message the reply leaves out, or a bad reply, gets the
// rule-based default. The first failed request fails the batch.
func (d *LLMDecider) DecideBatch(ctx context.Context, obs []records.Observation) ([]records.Episode, error) {
	out := make([]records.Episode, len(obs))
	g, gctx := errgroup.WithContext(ctx)
	for start := 0; start < len(obs); start += d.batch {
		end := min(start+d.batch, len(obs))
		g.Go(func() error { return d.decideChunk(gctx, obs[start:end], out[start:end]) })
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}

// decideChunk decides obs with one request, into out.
func (d *LLMDecider) decideChunk(ctx context.Context, obs []records.Observation, out []records.Episode) error {
	if len(obs) == 1 {
		ep, err := d.Decide(ctx, obs[0])
		out[0] = ep
		return err
	}
	var (
		ruled = make([]records.Episode, len(obs))
		asked []int // indices in obs of the messages in the request, by number-1
		data  struct{ Messages []decideView }
	)
	for i, o := range obs {
		ruled[i], _ = d.rules.Decide(ctx, o)
		out[i] = ruled[i]
		if strings.TrimSpace(o.Text) != "" {
			asked = append(asked, i)
			data.Messages = append(data.Messages, viewObservation(len(asked), o))
		}
	}
	if len(asked) == 0 {
		return nil
	}
	var reply struct {
		Decisions []struct {
			Index int `json:"index"`
			decideReply
		} `json:"decisions"`
	}
	fallback, err := d.c.ask(ctx, decideBatchPrompt, data, &reply)
	if err != nil {
		return err
	}
	byNumber := make(map[int]decideReply, len(asked))
	for _, r := range reply.Decisions {
		if _, dup := byNumber[r.Index]; !dup && r.Index >= 1 && r.Index <= len(asked) {
			byNumber[r.Index] = r.decideReply
		}
	}
	for n, i := range asked {
		r, ok := byNumber[n+1]
		if !ok && !fallback {
			d.c.badReply(decideBatchPrompt, fmt.Errorf("%w: no decision for message %d of %d", errUnusable, n+1, len(asked)))
		}
		out[i] = d.episode(decideBatchPrompt, obs[i], ruled[i], r, fallback || !ok)
	}
	return nil
}

// episode is the decision of obs given the model's reply, the rule-based one
// (ruled) when the reply is unusable (fallback) or would drop an explicit
// remember request.
func (d *LLMDecider) episode(p llm.Prompt, obs records.Observation, ruled records.Episode, reply decideReply, fallback bool) records.Episode {
	if !fallback && reply.Write && strings.TrimSpace(reply.Thing) == "" {
		d.c.badReply(p, fmt.Errorf("%w: write without a thing", errUnusable))
		fallback = true
	}
	if fallback {
		ruled.ProcessedBy = records.ProcessedByRulesFallback
		return ruled
	}
	if ruled.Reason == ReasonRemember && !reply.Write {
		return ruled
	}
	ep := records.Episode{Write: reply.Write, Who: ruled.Who, Time: obs.TS, Reason: "model: " + reply.Reason}
	if ep.Write {
		ep.Thing = strings.TrimSpace(reply.Thing)
		ep.Context = strings.TrimSpace(reply.Context)
		if ep.Context == "" {
			ep.Context = describe("statement", ep.Who, obs.ChatID)
		}
	}
	return ep
}

// LLMSemanticWriter finds stable facts with a model (SPEC C8). Each fact names the
// episode it comes from, which gives its chat and first-seen time; duplicates of
// known facts and within the reply are dropped (normalised comparison), whatever
// the model returns. On a bad reply the rule-based facts are the safe default.
type LLMSemanticWriter struct {
	c     llmCaller
	rules RuleSemanticWriter
}

// NewLLMSemanticWriter returns a model-backed semantic writer.
func NewLLMSemanticWriter(cfg LLMConfig, logger *zap.Logger) (*LLMSemanticWriter, error) {
	c, err := newCaller(cfg, logger)
	if err != nil {
		return nil, err
	}
	return &LLMSemanticWriter{c: c}, nil
}

// Facts asks the model; no episodes means no call and no facts.
func (w *LLMSemanticWriter) Facts(ctx context.Context, episodes []vectorstore.Record, known []vectorstore.Record) ([]records.Fact, error) {
	if len(episodes) == 0 {
		return nil, nil
	}
	byID := make(map[string]vectorstore.Record, len(episodes))
	data := struct {
		Known    []string
		Episodes []promptRecord
	}{}
	for _, k := range known {
		data.Known = append(data.Known, recordText(k))
	}
	for _, ep := range episodes {
		byID[ep.ID] = ep
		data.Episodes = append(data.Episodes, viewRecord(ep))
	}
	var reply struct {
		Facts []struct {
			Fact      string `json:"fact"`
			EpisodeID string `json:"episode_id"`
		} `json:"facts"`
	}
	fallback, err := w.c.ask(ctx, semanticPrompt, data, &reply)
	if err != nil {
		return nil, err
	}
	if fallback {
		return w.ruledFacts(ctx, episodes, known)
	}
	seen := knownFacts(known)
	var out []records.Fact
	for _, f := range reply.Facts {
		ep, ok := byID[f.EpisodeID]
		if !ok {
			w.c.badReply(semanticPrompt, fmt.Errorf("%w: fact %q names unknown episode %q", errUnusable, f.Fact, f.EpisodeID))
			return w.ruledFacts(ctx, episodes, known)
		}
		if n := textnorm.Normalize(f.Fact); n != "" && !seen[n] {
			seen[n] = true
			out = append(out, records.Fact{Fact: cleanStatement(f.Fact), SourceChatID: ep.ChatID, FirstSeen: ep.TS})
		}
	}
	return out, nil
}

// ruledFacts are the rule-based facts, marked as standing in for the model's.
func (w *LLMSemanticWriter) ruledFacts(ctx context.Context, episodes, known []vectorstore.Record) ([]records.Fact, error) {
	facts, err := w.rules.Facts(ctx, episodes, known)
	for i := range facts {
		facts[i].ProcessedBy = records.ProcessedByRulesFallback
	}
	return facts, err
}

// LLMMerger merges with a model; on a bad reply the rule-based merge (which keeps
// every distinct sentence of both) is the safe default.
type LLMMerger struct {
	c     llmCaller
	rules RuleMerger
}

// NewLLMMerger returns a model-backed merger.
func NewLLMMerger(cfg LLMConfig, logger *zap.Logger) (*LLMMerger, error) {
	c, err := newCaller(cfg, logger)
	if err != nil {
		return nil, err
	}
	return &LLMMerger{c: c}, nil
}

// Merge asks the model for the merged text.
func (m *LLMMerger) Merge(ctx context.Context, a, b vectorstore.Record) (Rewrite, error) {
	return m.c.askText(ctx, mergePrompt, struct{ A, B promptRecord }{viewRecord(a), viewRecord(b)},
		func() (Rewrite, error) { return m.rules.Merge(ctx, a, b) })
}

// askText asks p for a text ({"text": ...}, trimmed). On a bad reply, or an
// empty text (logged and counted as a bad reply), rules writes it instead,
// marked as standing in for the model.
func (c llmCaller) askText(ctx context.Context, p llm.Prompt, data any, rules func() (Rewrite, error)) (Rewrite, error) {
	var reply struct {
		Text string `json:"text"`
	}
	fallback, err := c.ask(ctx, p, data, &reply)
	if err != nil {
		return Rewrite{}, err
	}
	text := strings.TrimSpace(reply.Text)
	if !fallback && text == "" {
		c.badReply(p, fmt.Errorf("%w: empty text", errUnusable))
		fallback = true
	}
	if fallback {
		rw, err := rules()
		return fellBack(rw), err
	}
	return Rewrite{Text: text}, nil
}

// fellBack marks r, a rule-based twin's rewrite, as standing in for the model's.
func fellBack(r Rewrite) Rewrite {
	r.ProcessedBy = records.ProcessedByRulesFallback
	return r
}

// LLMSeparator separates with a model; on a bad reply, or two rewrites that are
// still equal, the rule-based time-and-chat prefixes are the safe default.
type LLMSeparator struct {
	c     llmCaller
	rules RuleSeparator
}

// NewLLMSeparator returns a model-backed separator.
func NewLLMSeparator(cfg LLMConfig, logger *zap.Logger) (*LLMSeparator, error) {
	c, err := newCaller(cfg, logger)
	if err != nil {
		return nil, err
	}
	return &LLMSeparator{c: c}, nil
}

// Separate asks the model for two distinct rewrites.
func (s *LLMSeparator) Separate(ctx context.Context, a, b vectorstore.Record) (Rewrite, Rewrite, error) {
	var reply struct {
		A string `json:"a"`
		B string `json:"b"`
	}
	fallback, err := s.c.ask(ctx, separatePrompt, struct{ A, B promptRecord }{viewRecord(a), viewRecord(b)}, &reply)
	if err != nil {
		return Rewrite{}, Rewrite{}, err
	}
	ta, tb := strings.TrimSpace(reply.A), strings.TrimSpace(reply.B)
	if !fallback && textnorm.Normalize(ta) == textnorm.Normalize(tb) {
		s.c.badReply(separatePrompt, fmt.Errorf("%w: both rewrites say the same", errUnusable))
		fallback = true
	}
	if fallback {
		ra, rb, err := s.rules.Separate(ctx, a, b)
		return fellBack(ra), fellBack(rb), err
	}
	return Rewrite{Text: ta}, Rewrite{Text: tb}, nil
}

// LLMReconsolidator rewrites a recalled memory with a model; on a bad reply the
// text stays as it is (the rule-based reconsolidator).
type LLMReconsolidator struct {
	c     llmCaller
	rules RuleReconsolidator
}

// NewLLMReconsolidator returns a model-backed reconsolidator.
func NewLLMReconsolidator(cfg LLMConfig, logger *zap.Logger) (*LLMReconsolidator, error) {
	c, err := newCaller(cfg, logger)
	if err != nil {
		return nil, err
	}
	return &LLMReconsolidator{c: c}, nil
}

// Reconsolidate asks the model for the rewritten text only: the caller keeps time,
// chat and speaker.
func (r *LLMReconsolidator) Reconsolidate(ctx context.Context, m vectorstore.Record, newContext string) (Rewrite, error) {
	data := struct {
		Memory  promptRecord
		Context string
	}{viewRecord(m), newContext}
	return r.c.askText(ctx, reconsolidatePrompt, data,
		func() (Rewrite, error) { return r.rules.Reconsolidate(ctx, m, newContext) })
}
