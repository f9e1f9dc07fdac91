package eval

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/app"
	"github.com/agentmem/agentmem/pkg/client"
	"github.com/agentmem/agentmem/pkg/records"
)

// Sentinel errors; every error of the package wraps one of them or a dependency's.
var (
	// ErrInvalidConfig reports a Config that cannot work; the message names the field.
	ErrInvalidConfig = errors.New("eval: invalid config")
	// ErrInvalidData reports a file that is not in LoCoMo format, or no conversation.
	ErrInvalidData = errors.New("eval: invalid data")
)

// MetaDiaID is the observation meta key carrying a turn's dia id; it travels into
// the provenance of every memory built from the turn.
const MetaDiaID = "dia_id"

// Defaults of Config.
var (
	DefaultKs = []int{5, 10, 25, 50}
	// DefaultTokenBudgets are the budgets of recall at equal tokens.
	DefaultTokenBudgets = []int{500, 1000, 2000, 4000}
)

const (
	// DefaultIdleTimeout bounds the wait for the pipeline to drain after the replay.
	DefaultIdleTimeout = 30 * time.Minute
	// agentID is put on every replayed event.
	agentID = "locomo-eval"
)

// Config configures an evaluation.
type Config struct {
	// Ks are the cut-offs of recall@k, ascending; default DefaultKs. The largest is
	// the vector K of the stack (vector.k_episodic and vector.k_semantic), so a pack
	// holds enough items; it is at most events.MaxLimit.
	Ks []int
	// ConfigFile and Environ are the agentmem configuration (a YAML file, AGENTMEM_*
	// variables) the stack is built from, e.g. to evaluate with an LLM or another
	// embedder; storage and listeners are always private to the run.
	ConfigFile string
	Environ    []string
	// DataDir keeps the stack's data; "" uses a temporary directory removed afterwards.
	DataDir string
	// Progress receives progress lines; nil: none.
	Progress io.Writer
	// IdleTimeout bounds the wait for the pipeline to drain; default DefaultIdleTimeout.
	IdleTimeout time.Duration
	// TokenBudgets are the budgets, ascending, at which every system's recall is
	// also measured at equal tokens (RecallAtTokens); default DefaultTokenBudgets.
	TokenBudgets []int
	// Questions, when set, receives one JSON line per question (QuestionTrace):
	// its evidence turns and the default pack's first items, for looking at misses.
	Questions io.Writer
}

func (c *Config) setDefaults() {
	if len(c.Ks) == 0 {
		c.Ks = slices.Clone(DefaultKs)
	}
	if len(c.TokenBudgets) == 0 {
		c.TokenBudgets = slices.Clone(DefaultTokenBudgets)
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
}

// Validate reports the first unusable field of c (after defaults).
func (c Config) Validate() error {
	for i, k := range c.Ks {
		switch {
		case k < 1 || k > events.MaxLimit:
			return fmt.Errorf("%w: Ks[%d] is %d; it must be between 1 and %d", ErrInvalidConfig, i, k, events.MaxLimit)
		case i > 0 && k <= c.Ks[i-1]:
			return fmt.Errorf("%w: Ks must be ascending without repeats; %d follows %d", ErrInvalidConfig, k, c.Ks[i-1])
		}
	}
	for i, b := range c.TokenBudgets {
		if b < 1 || i > 0 && b <= c.TokenBudgets[i-1] {
			return fmt.Errorf("%w: TokenBudgets[%d] is %d; budgets must be positive and ascending", ErrInvalidConfig, i, b)
		}
	}
	if c.IdleTimeout < 0 {
		return fmt.Errorf("%w: IdleTimeout is %s; it must not be negative", ErrInvalidConfig, c.IdleTimeout)
	}
	return nil
}

// Evaluator runs the LoCoMo evaluation.
type Evaluator struct {
	cfg    Config
	logger *zap.Logger
}

// New returns an evaluator for cfg.
func New(cfg Config, logger *zap.Logger) (*Evaluator, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	return &Evaluator{cfg: cfg, logger: logger}, nil
}

// Run evaluates agentmem and the baselines on convs:
//
//  1. every conversation is its own tenant and user; each session is replayed as
//     observation events (role user, the speaker in meta "speaker", the turn's dia id
//     in meta "dia_id", event time the session's date plus one minute per turn), then
//     session_ended;
//  2. the pipeline is left to drain (app.WaitIdle), then the consolidate RPC runs
//     once per user; then each user's MEMORY.md is compressed in a dry run
//     (Compression) and each session's context pack weighed (SessionSummaries);
//  3. the memory is frozen — the stack is restarted with the retriever alone, so the
//     memory_hit events of the questions do not make the consolidator rewrite the
//     memories being measured, and each question is a preview (record_hits false)
//     that counts no hit — and every question is asked twice: with the default
//     budget (the pack an agent gets: context tokens and share, DefaultPack) and
//     with a budget that holds every item (recall@k for every k, context at k);
//     each pack is scored with PackItems; the baselines answer the same questions.
func (e *Evaluator) Run(ctx context.Context, convs []Conversation) (*Report, error) {
	if len(convs) == 0 {
		return nil, fmt.Errorf("%w: no conversation", ErrInvalidData)
	}
	dir := e.cfg.DataDir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "agentmem-eval-")
		if err != nil {
			return nil, fmt.Errorf("eval: %w", err)
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	maxK := e.cfg.Ks[len(e.cfg.Ks)-1]
	scfg, err := stackConfig(e.cfg.ConfigFile, e.cfg.Environ, dir, maxK)
	if err != nil {
		return nil, err
	}
	started := time.Now()
	st, err := app.Up(ctx, scfg, app.UpOptions{}, e.logger)
	if err != nil {
		return nil, err
	}
	defer func() { _ = st.Close() }()
	nc, err := st.Runtime().Dial("agentmem-eval")
	if err != nil {
		return nil, err
	}
	defer nc.Close()

	tenants := tenantIDs(convs)
	clients := make([]*client.Client, len(convs))
	for i := range convs {
		if clients[i], err = client.New(nc, client.Config{Tenant: tenants[i], AgentID: agentID, RequestTimeout: time.Minute}); err != nil {
			return nil, err
		}
	}
	rep := newReport(e.cfg.Ks, e.cfg.TokenBudgets, convs)
	rep.DefaultBudgetTokens = scfg.Memory.ContextBudget()
	rep.Embedder, rep.Fusion = st.Runtime().Embedder.Name(), scfg.Vector.Fusion
	if scfg.Embed.Lexical() {
		rep.Fusion = "keyword only"
	}
	for i, c := range convs {
		if err := e.replay(ctx, clients[i], tenants[i], "", c, fmt.Sprintf("[%d/%d] %s", i+1, len(convs), c.SampleID)); err != nil {
			return nil, err
		}
	}
	fmt.Fprintf(e.cfg.Progress, "waiting for ingest, extractor and consolidator to drain...\n")
	if err := e.waitIdle(ctx, st); err != nil {
		return nil, err
	}
	for i := range convs {
		if _, err := clients[i].Consolidate(ctx, events.ConsolidateRequest{UserID: tenants[i]}); err != nil {
			return nil, fmt.Errorf("eval: consolidate %s: %w", convs[i].SampleID, err)
		}
	}
	if err := e.waitIdle(ctx, st); err != nil {
		return nil, err
	}
	for i, c := range convs {
		if err := measureCompression(ctx, clients[i], tenants[i], &rep.Compression); err != nil {
			return nil, err
		}
		if err := measureSummaries(ctx, clients[i], tenants[i], c, &rep.SessionSummaries); err != nil {
			return nil, err
		}
	}
	if err := st.Restart(ctx, []string{app.Retriever}); err != nil {
		return nil, err
	}
	rep.ReplaySeconds = time.Since(started).Seconds()
	fmt.Fprintf(e.cfg.Progress, "replayed and consolidated in %.1fs\n", rep.ReplaySeconds)

	asked := time.Now()
	for i, c := range convs {
		stored, err := storedDiaIDs(ctx, st.Runtime().Vectors, tenants[i], tenants[i])
		if err != nil {
			return nil, err
		}
		if err := e.ask(ctx, clients[i], tenants[i], c, stored, rep, fmt.Sprintf("[%d/%d] %s", i+1, len(convs), c.SampleID)); err != nil {
			return nil, err
		}
	}
	rep.QuestionSeconds = time.Since(asked).Seconds()
	rep.finish()
	return rep, nil
}

func (e *Evaluator) waitIdle(ctx context.Context, st *app.Stack) error {
	wctx, cancel := context.WithTimeout(ctx, e.cfg.IdleTimeout)
	defer cancel()
	return app.WaitIdle(wctx, st.Runtime().JS, 50*time.Millisecond)
}

// replay publishes c's sessions, named sessionName(prefix, …); see Run.
func (e *Evaluator) replay(ctx context.Context, cl *client.Client, user, prefix string, c Conversation, label string) error {
	turns := 0
	for si, s := range c.Sessions {
		sessionID := sessionName(prefix, s)
		ts := s.Start
		for _, t := range s.Turns {
			ts = ts.Add(time.Minute)
			if t.Text == "" {
				continue // nothing was said; an observation must have text
			}
			env := events.New(events.TypeObservation, cl.Tenant(), user, agentID, sessionID)
			env.TS = ts
			env.Observation = &events.Observation{Kind: events.KindMessage, Role: events.RoleUser, Text: t.Text,
				Meta: map[string]any{records.SpeakerMetaKey: t.Speaker, MetaDiaID: t.DiaID}}
			if err := cl.Publish(ctx, env); err != nil {
				return fmt.Errorf("eval: %s %s: %w", c.SampleID, t.DiaID, err)
			}
			turns++
		}
		end := events.New(events.TypeSessionEnded, cl.Tenant(), user, agentID, sessionID)
		end.TS = ts.Add(time.Minute)
		if err := cl.Publish(ctx, end); err != nil {
			return fmt.Errorf("eval: %s end of %s: %w", c.SampleID, sessionID, err)
		}
		fmt.Fprintf(e.cfg.Progress, "\r%s: replaying session %d/%d (%d turns)", label, si+1, len(c.Sessions), turns)
	}
	fmt.Fprintln(e.cfg.Progress)
	return nil
}

// ask puts every question of c to agentmem and the baselines and scores them.
// stored are the dia ids agentmem's memories came from (storedDiaIDs).
func (e *Evaluator) ask(ctx context.Context, cl *client.Client, user string, c Conversation, stored map[string]bool, rep *Report, label string) error {
	known := map[string]bool{}
	var lines []string
	for _, t := range c.Turns() {
		known[t.DiaID] = true
		lines = append(lines, t.Line())
		if stored[t.DiaID] {
			rep.storedTurns++
		}
	}
	convTokens := estimateTokens(strings.Join(lines, "\n"))
	baselines := []Retriever{NewTurnsBM25(c), NewMemoryFileChunks(c)}
	maxK := e.cfg.Ks[len(e.cfg.Ks)-1]
	for qi, q := range c.Questions {
		evidence, st := ParseEvidence(q.Evidence, func(id string) bool { return known[id] })
		pack, err := cl.Context(ctx, events.ContextRequest{UserID: user, Query: q.Text, MaxTokens: unbudgeted, RecordHits: events.NoHits()})
		if err != nil {
			return fmt.Errorf("eval: %s question %d: %w", c.SampleID, qi+1, err)
		}
		byDefault, err := cl.Context(ctx, events.ContextRequest{UserID: user, Query: q.Text, RecordHits: events.NoHits()})
		if err != nil {
			return fmt.Errorf("eval: %s question %d (default budget): %w", c.SampleID, qi+1, err)
		}
		results := [][]Item{PackItems(pack)}
		long := [][]Item{results[0]} // for recall at equal tokens: enough items for the largest budget
		for _, b := range baselines {
			results = append(results, b.Retrieve(q.Text, maxK))
			long = append(long, b.Retrieve(q.Text, budgetItems))
		}
		rep.add(c.SampleID, q, evidence, st, results, pack.TokenEstimate, convTokens)
		rep.addBudgeted(q.Category, evidence, PackItems(byDefault), byDefault.TokenEstimate, convTokens, long)
		rep.addCoverage(q.Category, evidence, stored)
		if e.cfg.Questions != nil {
			if err := writeTrace(e.cfg.Questions, c, q, evidence, byDefault, pack); err != nil {
				return err
			}
		}
		if (qi+1)%25 == 0 || qi+1 == len(c.Questions) {
			fmt.Fprintf(e.cfg.Progress, "\r%s: %d/%d questions", label, qi+1, len(c.Questions))
		}
	}
	fmt.Fprintln(e.cfg.Progress)
	return nil
}

const (
	// unbudgeted is the max_tokens of the questions scored at every k: more than
	// any pack of the run holds, so the retriever's budget leaves every item in.
	unbudgeted = 1 << 20
	// budgetItems is how many items a baseline returns for recall at equal
	// tokens: more than the largest budget holds (a turn is ~37 tokens).
	budgetItems = 1000
)

// tenantIDs derives a valid, distinct tenant (and user) id from each sample id.
func tenantIDs(convs []Conversation) []string {
	out := make([]string, len(convs))
	seen := map[string]bool{}
	for i, c := range convs {
		id := strings.Map(func(r rune) rune {
			if r < 128 && events.ValidateID("id", string(r)) == nil {
				return r
			}
			return '-'
		}, c.SampleID)
		if len(id) > 100 {
			id = id[:100]
		}
		if id == "" || seen[id] {
			id = fmt.Sprintf("%s-%d", id, i+1)
			id = strings.TrimPrefix(id, "-")
		}
		seen[id] = true
		out[i] = id
	}
	return out
}
