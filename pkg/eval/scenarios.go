package eval

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"
	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/app"
	"github.com/agentmem/agentmem/pkg/client"
)

// Scenario categories: what a scenario tests (testdata/scenarios/README.md).
const (
	ScenarioFilePattern   = "file_pattern"
	ScenarioUserPref      = "user_pref"
	ScenarioErrorSolution = "error_solution"
	ScenarioGeneral       = "general"
	ScenarioDistractor    = "distractor"
)

// ScenarioCategories lists the valid scenario categories.
var ScenarioCategories = []string{ScenarioFilePattern, ScenarioUserPref, ScenarioErrorSolution, ScenarioGeneral, ScenarioDistractor}

// Scenario is one short multi-session conversation of an agent with a user, and
// what a context pack must and must not say afterwards.
type Scenario struct {
	ID string `json:"id"`
	// Language is a BCP 47 tag of the conversation's language ("en", "zh", "de").
	Language string `json:"language"`
	// Category is what the scenario tests (ScenarioCategories).
	Category string `json:"category"`
	// Sessions are replayed in order, each ended with session_ended.
	Sessions [][]ScenarioMessage `json:"sessions"`
	Queries  []ScenarioQuery     `json:"queries"`
	// File is where the scenario was read from (not in the file itself).
	File string `json:"-"`
}

// ScenarioMessage is one message of a session.
type ScenarioMessage struct {
	// Role is user, assistant or tool.
	Role string `json:"role"`
	Text string `json:"text"`
}

// ScenarioQuery is a context request made after every session was replayed, and
// the strings its pack's prompt must and must not contain (compared after NFKC
// normalisation and case folding).
type ScenarioQuery struct {
	Query   string   `json:"query"`
	Must    []string `json:"must,omitempty"`
	MustNot []string `json:"must_not,omitempty"`
}

// ScenarioReport is the result of a scenario run. Percentages are of scenarios
// passed: a scenario passes when every one of its queries does.
type ScenarioReport struct {
	Scenarios   int                `json:"scenarios"`
	Passed      int                `json:"passed"`
	PassRate    float64            `json:"pass_rate"`
	PerCategory map[string]float64 `json:"per_category"`
	PerLanguage map[string]float64 `json:"per_language"`
	// Counts are the scenarios of each category and language.
	CategoryCounts map[string]int `json:"category_counts"`
	LanguageCounts map[string]int `json:"language_counts"`
	// PackTokensMean is the mean token_estimate of the packs.
	PackTokensMean float64 `json:"pack_tokens_mean"`
	// Failures name every failed check: "<id>: query <q>: missing <s>" or "... has <s>".
	Failures []string `json:"failures,omitempty"`
	Seconds  float64  `json:"seconds"`
}

// LoadScenarios reads every *.json file of dir: each holds one scenario or a list
// of them. Scenarios are checked (Validate) and returned in file order.
func LoadScenarios(dir string) ([]Scenario, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidData, err)
	}
	sort.Strings(files)
	var out []Scenario
	ids := map[string]string{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("eval: %w", err)
		}
		var list []Scenario
		if err := json.Unmarshal(data, &list); err != nil {
			var one Scenario
			if err1 := json.Unmarshal(data, &one); err1 != nil {
				return nil, fmt.Errorf("%w: %s: %w", ErrInvalidData, f, err)
			}
			list = []Scenario{one}
		}
		for _, s := range list {
			s.File = filepath.Base(f)
			if err := s.Validate(); err != nil {
				return nil, fmt.Errorf("%w: %s: %w", ErrInvalidData, f, err)
			}
			if prev, dup := ids[s.ID]; dup {
				return nil, fmt.Errorf("%w: %s: scenario id %q already used in %s", ErrInvalidData, f, s.ID, prev)
			}
			ids[s.ID] = s.File
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no scenario in %s", ErrInvalidData, dir)
	}
	return out, nil
}

// Validate reports the first problem of s.
func (s Scenario) Validate() error {
	switch {
	case s.ID == "":
		return fmt.Errorf("a scenario has no id")
	case s.Language == "":
		return fmt.Errorf("scenario %s: no language", s.ID)
	case !slices.Contains(ScenarioCategories, s.Category):
		return fmt.Errorf("scenario %s: category %q is not one of %v", s.ID, s.Category, ScenarioCategories)
	case len(s.Sessions) == 0:
		return fmt.Errorf("scenario %s: no session", s.ID)
	case len(s.Queries) == 0:
		return fmt.Errorf("scenario %s: no query", s.ID)
	}
	for i, sess := range s.Sessions {
		if len(sess) == 0 {
			return fmt.Errorf("scenario %s: session %d is empty", s.ID, i+1)
		}
		for j, m := range sess {
			switch events.Role(m.Role) {
			case events.RoleUser, events.RoleAssistant, events.RoleTool:
			default:
				return fmt.Errorf("scenario %s: session %d message %d: role %q is not user, assistant or tool", s.ID, i+1, j+1, m.Role)
			}
			if strings.TrimSpace(m.Text) == "" {
				return fmt.Errorf("scenario %s: session %d message %d: no text", s.ID, i+1, j+1)
			}
		}
	}
	for i, q := range s.Queries {
		if strings.TrimSpace(q.Query) == "" || len(q.Must)+len(q.MustNot) == 0 {
			return fmt.Errorf("scenario %s: query %d needs a query and at least one must or must_not string", s.ID, i+1)
		}
	}
	return nil
}

// foldText is the form scenario strings and packs are compared in: NFKC, case
// folded.
func foldText(s string) string {
	return cases.Fold().String(norm.NFKC.String(s))
}

// CheckPack returns the failed checks of q against a pack's prompt.
func (q ScenarioQuery) CheckPack(prompt string) []string {
	p := foldText(prompt)
	var out []string
	for _, m := range q.Must {
		if !strings.Contains(p, foldText(m)) {
			out = append(out, fmt.Sprintf("missing %q", m))
		}
	}
	for _, m := range q.MustNot {
		if strings.Contains(p, foldText(m)) {
			out = append(out, fmt.Sprintf("has %q", m))
		}
	}
	return out
}

// ScenarioConfig configures RunScenarios.
type ScenarioConfig struct {
	// ConfigFile and Environ are the agentmem configuration, as in Config.
	ConfigFile string
	Environ    []string
	// DataDir keeps the stack's data; "" uses a temporary directory.
	DataDir string
	// Progress receives progress lines; nil: none.
	Progress io.Writer
	// IdleTimeout bounds each wait for the pipeline; default DefaultIdleTimeout.
	IdleTimeout time.Duration
	// Prompts, when set, receives every query's prompt (for looking at failures).
	Prompts io.Writer
}

// RunScenarios replays every scenario through the real pipeline, over NATS, as
// Run does for LoCoMo: each scenario is its own tenant and user; its sessions are
// observations (messages with their roles, tool output as a tool message) and a
// session_ended each; the pipeline drains, each user is consolidated, the stack
// restarts with the retriever alone, and each query is a context request (with
// the retriever's default budget) whose prompt is checked.
func RunScenarios(ctx context.Context, cfg ScenarioConfig, scenarios []Scenario, logger *zap.Logger) (*ScenarioReport, error) {
	if len(scenarios) == 0 {
		return nil, fmt.Errorf("%w: no scenario", ErrInvalidData)
	}
	started := time.Now()
	run, err := startScenarioStack(ctx, &cfg, "agentmem-eval-scenarios", logger)
	if err != nil {
		return nil, err
	}
	defer run.close()
	st, nc, ev := run.stack, run.nc, run.ev

	users := scenarioUsers(scenarios)
	clients := make([]*client.Client, len(scenarios))
	for i, s := range scenarios {
		if clients[i], err = client.New(nc, client.Config{Tenant: users[i], AgentID: agentID, RequestTimeout: time.Minute}); err != nil {
			return nil, err
		}
		if err := replayScenario(ctx, clients[i], users[i], "", s, scenarioStart); err != nil {
			return nil, err
		}
	}
	fmt.Fprintf(cfg.Progress, "replayed %d scenarios; waiting for the pipeline...\n", len(scenarios))
	if err := ev.waitIdle(ctx, st); err != nil {
		return nil, err
	}
	for i := range scenarios {
		if _, err := clients[i].Consolidate(ctx, events.ConsolidateRequest{UserID: users[i]}); err != nil {
			return nil, fmt.Errorf("eval: consolidate %s: %w", scenarios[i].ID, err)
		}
	}
	if err := ev.waitIdle(ctx, st); err != nil {
		return nil, err
	}
	if err := st.Restart(ctx, []string{app.Retriever}); err != nil {
		return nil, err
	}

	rep := &ScenarioReport{Scenarios: len(scenarios), PerCategory: map[string]float64{}, PerLanguage: map[string]float64{},
		CategoryCounts: map[string]int{}, LanguageCounts: map[string]int{}}
	passCat, passLang := map[string]int{}, map[string]int{}
	packs := 0
	for i, s := range scenarios {
		ok := true
		for _, q := range s.Queries {
			pack, err := clients[i].Context(ctx, events.ContextRequest{UserID: users[i], Query: q.Query, RecordHits: events.NoHits()})
			if err != nil {
				return nil, fmt.Errorf("eval: %s: %w", s.ID, err)
			}
			packs++
			rep.PackTokensMean += float64(pack.TokenEstimate)
			if cfg.Prompts != nil {
				fmt.Fprintf(cfg.Prompts, "=== %s: %s\n%s\n\n", s.ID, q.Query, pack.Prompt)
			}
			for _, f := range q.CheckPack(pack.Prompt) {
				ok = false
				rep.Failures = append(rep.Failures, fmt.Sprintf("%s (%s, %s): query %q: %s", s.ID, s.Category, s.Language, q.Query, f))
			}
		}
		rep.CategoryCounts[s.Category]++
		rep.LanguageCounts[s.Language]++
		if ok {
			rep.Passed++
			passCat[s.Category]++
			passLang[s.Language]++
		}
	}
	for c, n := range rep.CategoryCounts {
		rep.PerCategory[c] = percent(passCat[c], n)
	}
	for l, n := range rep.LanguageCounts {
		rep.PerLanguage[l] = percent(passLang[l], n)
	}
	rep.PassRate = percent(rep.Passed, rep.Scenarios)
	if packs > 0 {
		rep.PackTokensMean = math.Round(rep.PackTokensMean/float64(packs)*10) / 10
	}
	rep.Seconds = time.Since(started).Seconds()
	return rep, nil
}

func percent(n, of int) float64 {
	if of == 0 {
		return 0
	}
	return math.Round(float64(n)/float64(of)*1000) / 10
}

// scenarioStart is when a scenario's first session starts.
var scenarioStart = time.Date(2026, time.March, 2, 9, 0, 0, 0, time.UTC)

// scenarioStack is a private stack of a scenario run and a connection to it.
type scenarioStack struct {
	stack *app.Stack
	nc    *nats.Conn
	ev    *Evaluator // for its waitIdle and replay
	close func()
}

// startScenarioStack sets cfg's defaults and starts its stack: the data under
// cfg.DataDir, or a temporary directory that close removes.
func startScenarioStack(ctx context.Context, cfg *ScenarioConfig, name string, logger *zap.Logger) (*scenarioStack, error) {
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.Progress == nil {
		cfg.Progress = io.Discard
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	var cleanup []func()
	closeAll := func() {
		for i := len(cleanup) - 1; i >= 0; i-- {
			cleanup[i]()
		}
	}
	dir := cfg.DataDir
	if dir == "" {
		tmp, err := os.MkdirTemp("", name+"-")
		if err != nil {
			return nil, fmt.Errorf("eval: %w", err)
		}
		cleanup = append(cleanup, func() { _ = os.RemoveAll(tmp) })
		dir = tmp
	}
	scfg, err := scenarioStackConfig(cfg.ConfigFile, cfg.Environ, dir)
	if err != nil {
		closeAll()
		return nil, err
	}
	st, err := app.Up(ctx, scfg, app.UpOptions{}, logger)
	if err != nil {
		closeAll()
		return nil, err
	}
	cleanup = append(cleanup, func() { _ = st.Close() })
	nc, err := st.Runtime().Dial(name)
	if err != nil {
		closeAll()
		return nil, err
	}
	cleanup = append(cleanup, nc.Close)
	ev := &Evaluator{cfg: Config{IdleTimeout: cfg.IdleTimeout, Progress: cfg.Progress}, logger: logger}
	return &scenarioStack{stack: st, nc: nc, ev: ev, close: closeAll}, nil
}

// scenarioUsers derives a tenant (and user) id per scenario from its id.
func scenarioUsers(scenarios []Scenario) []string {
	convs := make([]Conversation, len(scenarios))
	for i, s := range scenarios {
		convs[i].SampleID = s.ID
	}
	return tenantIDs(convs)
}

// replayScenario publishes s's sessions ("s1", … after prefix); messages are a
// minute apart, sessions a day apart, starting at base.
func replayScenario(ctx context.Context, cl *client.Client, user, prefix string, s Scenario, base time.Time) error {
	for si, sess := range s.Sessions {
		sessionID := fmt.Sprintf("%ss%d", prefix, si+1)
		if err := publishSession(ctx, cl, user, agentID, sessionID, sess, base.Add(time.Duration(si)*24*time.Hour)); err != nil {
			return fmt.Errorf("eval: %s: %w", s.ID, err)
		}
	}
	return nil
}

// publishSession publishes msgs as the agent's observations of the session, a
// minute apart after start, then session_ended a minute after the last.
func publishSession(ctx context.Context, cl *client.Client, user, agent, sessionID string, msgs []ScenarioMessage, start time.Time) error {
	ts := start
	for _, m := range msgs {
		ts = ts.Add(time.Minute)
		env := events.New(events.TypeObservation, cl.Tenant(), user, agent, sessionID)
		env.TS = ts
		env.Observation = &events.Observation{Kind: events.KindMessage, Role: events.Role(m.Role), Text: m.Text}
		if err := cl.Publish(ctx, env); err != nil {
			return err
		}
	}
	end := events.New(events.TypeSessionEnded, cl.Tenant(), user, agent, sessionID)
	end.TS = ts.Add(time.Minute)
	if err := cl.Publish(ctx, end); err != nil {
		return fmt.Errorf("end of %s: %w", sessionID, err)
	}
	return nil
}

// WriteTable prints the report as text.
func (r *ScenarioReport) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "scenarios: %d, passed %d (%.1f%%), pack tokens mean %.0f, %.1fs\n\n", r.Scenarios, r.Passed, r.PassRate, r.PackTokensMean, r.Seconds)
	for _, group := range []struct {
		name   string
		rates  map[string]float64
		counts map[string]int
	}{{"category", r.PerCategory, r.CategoryCounts}, {"language", r.PerLanguage, r.LanguageCounts}} {
		keys := make([]string, 0, len(group.rates))
		for k := range group.rates {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(w, "%-9s %-15s %5.1f%%  (%d)\n", group.name, k, group.rates[k], group.counts[k])
		}
		fmt.Fprintln(w)
	}
	for _, f := range r.Failures {
		fmt.Fprintln(w, "FAIL", f)
	}
	return nil
}
