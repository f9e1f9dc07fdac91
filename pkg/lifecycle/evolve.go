package lifecycle

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/docstore"
	"github.com/agentmem/agentmem/pkg/llm"
	"github.com/agentmem/agentmem/pkg/obs"
	"github.com/agentmem/agentmem/pkg/policy"
	"github.com/agentmem/agentmem/pkg/session"
)

// SetPolicy merges values into the namespace's policy_overrides.json, validates
// the result over base as a whole (policy.Overlay: every key known, every value
// in its bounds) and only then writes it, after a snapshot of the overrides it
// replaces (docstore.SetPolicyOverrides); it returns the snapshot's name. It is
// the write of `agentmem policy set` and of an evolution proposal (SPEC B5).
func SetPolicy(ctx context.Context, docs *docstore.Store, ns docstore.Namespace, base policy.Policy, values map[string]json.RawMessage) (string, error) {
	merged, err := mergedOverrides(ctx, docs, ns, values)
	if err != nil {
		return "", err
	}
	data, err := json.MarshalIndent(merged, "", "  ")
	if err != nil {
		return "", err
	}
	if _, err := base.Overlay(data); err != nil {
		return "", err
	}
	return docs.SetPolicyOverrides(ctx, ns, append(data, '\n'))
}

// PolicyReply is the namespace's policy as a new session would get it: base
// overlaid with its overrides; snapshot names the snapshot a change just took.
func PolicyReply(ctx context.Context, docs *docstore.Store, ns docstore.Namespace, base policy.Policy, snapshot string) (events.PolicyReply, error) {
	data, ok, err := docs.PolicyOverrides(ctx, ns)
	if err != nil {
		return events.PolicyReply{}, err
	}
	p, err := base.Overlay(data)
	if err != nil {
		return events.PolicyReply{}, err
	}
	pj, err := json.Marshal(p)
	if err != nil {
		return events.PolicyReply{}, err
	}
	reply := events.PolicyReply{Policy: pj, Snapshot: snapshot}
	if ok {
		reply.Overrides = json.RawMessage(bytes.TrimSpace(data))
	}
	return reply, nil
}

// mergedOverrides is the namespace's overrides with values on top.
func mergedOverrides(ctx context.Context, docs *docstore.Store, ns docstore.Namespace, values map[string]json.RawMessage) (map[string]json.RawMessage, error) {
	cur, _, err := docs.PolicyOverrides(ctx, ns)
	if err != nil {
		return nil, err
	}
	merged := map[string]json.RawMessage{}
	if len(bytes.TrimSpace(cur)) > 0 {
		if err := json.Unmarshal(cur, &merged); err != nil {
			return nil, fmt.Errorf("%w: current overrides: %w", policy.ErrInvalidOverrides, err)
		}
	}
	maps.Copy(merged, values)
	return merged, nil
}

// Reflection is what a Reflector is shown: the namespace's current policy and
// the latest messages of a session with Messages messages so far.
type Reflection struct {
	Policy   policy.Policy
	Messages int
	Recent   []session.Message
}

// Proposal is a reflection's answer: parameter changes by policy key (JSON
// values) and why.
type Proposal struct {
	Changes map[string]json.RawMessage `json:"changes"`
	Reason  string                     `json:"reason,omitempty"`
}

// Reflector proposes policy changes from a session (SPEC B5).
type Reflector interface {
	Reflect(ctx context.Context, r Reflection) (Proposal, error)
}

// LLMReflector asks a chat model (prompts/reflect.tmpl, step reflect).
type LLMReflector struct {
	Client *llm.Client
}

var reflectPrompt = llm.MustLoadPrompt(promptFS, "prompts", "reflect")

func (l LLMReflector) client() *llm.Client { return l.Client }

// Reflect implements Reflector.
func (l LLMReflector) Reflect(ctx context.Context, r Reflection) (Proposal, error) {
	pol, err := json.Marshal(r.Policy)
	if err != nil {
		return Proposal{}, err
	}
	system, user, err := reflectPrompt.Render(struct {
		Policy   string
		Messages int
		Recent   []promptLine
	}{string(pol), r.Messages, promptLines(r.Recent)})
	if err != nil {
		return Proposal{}, err
	}
	var p Proposal
	if err := l.Client.CompleteJSON(llm.WithStep(ctx, StepReflect), system, user, reflectPrompt.Schema, &p); err != nil {
		return Proposal{}, fmt.Errorf("lifecycle: reflect: %w", err)
	}
	return p, nil
}

// olderSessionRE finds a user referring to an earlier conversation.
var olderSessionRE = regexp.MustCompile(`(?i)\b(?:last (?:time|week|month)|yesterday|the other day|(?:a few|two|three|several) days ago|(?:previous|earlier|last|other) (?:session|conversation|chat)|we (?:talked|spoke|discussed)|i (?:told|mentioned to) you|remember when|as i said before)\b`)

// RuleReflector is the offline reflection: deterministic rules over what the
// session shows.
//
//   - The user referred to earlier conversations in at least two of the latest
//     messages ("last week", "as I said before", ...): recent_days doubles (at
//     least +1), up to 30.
//   - The session has at least three times session_summary_message_threshold
//     messages: the threshold drops by a quarter, not below 10 nor to the keep
//     count.
type RuleReflector struct{}

// Reflect implements Reflector.
func (RuleReflector) Reflect(_ context.Context, r Reflection) (Proposal, error) {
	var (
		p       = Proposal{Changes: map[string]json.RawMessage{}}
		reasons []string
		older   int
	)
	for _, m := range r.Recent {
		if m.Role != "assistant" && olderSessionRE.MatchString(m.Text) {
			older++
		}
	}
	if d := r.Policy.RecentDays; older >= 2 && d < 30 {
		p.Changes["recent_days"] = json.RawMessage(strconv.Itoa(min(30, max(2*d, d+1))))
		reasons = append(reasons, fmt.Sprintf("the user referred to earlier conversations %d times", older))
	}
	if t := r.Policy.SessionSummaryMessageThreshold; r.Messages >= 3*t && t > 10 {
		if nt := max(10, r.Policy.SessionSummaryKeepCount+1, t*3/4); nt < t {
			p.Changes["session_summary_message_threshold"] = json.RawMessage(strconv.Itoa(nt))
			reasons = append(reasons, fmt.Sprintf("the session has %d messages, over three times the summary threshold", r.Messages))
		}
	}
	p.Reason = strings.Join(reasons, "; ")
	return p, nil
}

// ErrNotEvolvable marks a proposal that touches a key reflection may not change.
var ErrNotEvolvable = errors.New("lifecycle: key not open to evolution")

// notEvolvable are the policy keys a proposal may not change: reflection never
// switches itself on or off.
var notEvolvable = []string{"evolution_enabled"}

// Proposal outcomes, as agentmem_policy_proposals_total counts them.
const (
	ProposalApplied  = "applied"
	ProposalRejected = "rejected"
	ProposalEmpty    = "empty"
)

// ApplyProposal validates a proposal and writes it (SetPolicy: snapshot first).
// Any bad value, unknown key or key not open to evolution rejects the whole
// proposal with the reason (an error wrapping ErrRejected) and writes nothing; a
// proposal that changes nothing is ProposalEmpty. Counted in m.
func ApplyProposal(ctx context.Context, docs *docstore.Store, ns docstore.Namespace, base policy.Policy, p Proposal, m *Metrics) (outcome, snapshot string, err error) {
	defer func() { m.proposal(outcome) }()
	for _, k := range notEvolvable {
		if _, ok := p.Changes[k]; ok {
			return ProposalRejected, "", fmt.Errorf("%w: %w: %s", ErrRejected, ErrNotEvolvable, k)
		}
	}
	merged, err := mergedOverrides(ctx, docs, ns, nil)
	if err != nil {
		return "", "", err
	}
	curDoc, _ := json.Marshal(merged)
	cur, err := base.Overlay(curDoc)
	if err != nil {
		return "", "", err
	}
	maps.Copy(merged, p.Changes)
	nextDoc, _ := json.Marshal(merged)
	next, err := base.Overlay(nextDoc)
	if err != nil {
		return ProposalRejected, "", fmt.Errorf("%w: %w", ErrRejected, err)
	}
	if next == cur {
		return ProposalEmpty, "", nil
	}
	snapshot, err = SetPolicy(ctx, docs, ns, base, p.Changes)
	if err != nil {
		return "", "", err
	}
	return ProposalApplied, snapshot, nil
}

// EvolverConfig configures an Evolver.
type EvolverConfig struct {
	// Base is the configured policy the namespaces' overrides are overlaid on.
	Base policy.Policy
	// Every is how many session messages apart reflections are (default 20).
	Every int
	// Recent is how many of the session's latest messages reflection sees (default 20).
	Recent int
}

// Evolver runs policy evolution (SPEC B5) for namespaces whose policy has
// evolution_enabled.
type Evolver struct {
	cfg      EvolverConfig
	docs     *docstore.Store
	sessions *session.Store
	model    Reflector
	metrics  *Metrics
	logger   *zap.Logger
}

// NewEvolver returns an Evolver; model nil is the offline RuleReflector.
func NewEvolver(cfg EvolverConfig, docs *docstore.Store, sessions *session.Store, model Reflector, metrics *Metrics, logger *zap.Logger) (*Evolver, error) {
	if cfg.Every == 0 {
		cfg.Every = 20
	}
	if cfg.Recent == 0 {
		cfg.Recent = 20
	}
	if cfg.Every < 1 || cfg.Recent < 1 || docs == nil || sessions == nil {
		return nil, fmt.Errorf("%w: evolver: Every %d and Recent %d must be at least 1, docs and sessions set", ErrInvalidConfig, cfg.Every, cfg.Recent)
	}
	if err := cfg.Base.Validate(); err != nil {
		return nil, fmt.Errorf("%w: evolver base policy: %w", ErrInvalidConfig, err)
	}
	if model == nil {
		model = RuleReflector{}
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	return &Evolver{cfg: cfg, docs: docs, sessions: sessions, model: model, metrics: metrics, logger: logger}, nil
}

// Evolution outcomes besides the proposal outcomes.
const (
	EvolutionOff    = "off"     // the namespace's policy has evolution_enabled false
	EvolutionNotDue = "not_due" // no new multiple of Every messages, or reflected on already
)

// Reflect runs the session's reflection when it is due: once per Every
// messages (the session's n-th reflection is claimed in the session store
// before the model is asked, so a redelivery never reflects twice), with
// evolution enabled in the namespace's policy. It returns the outcome: a
// proposal outcome, EvolutionOff or EvolutionNotDue; a rejected proposal is an
// outcome, logged with its reason, not an error. A model reply that cannot be
// used gives way to the RuleReflector's proposal; a reflection that fails
// otherwise (the model unavailable, writing the proposal) gives its claim back
// before returning the error, so that the event's redelivery runs it again.
func (e *Evolver) Reflect(ctx context.Context, tenant, user, sessionID string) (outcome string, err error) {
	ns := docstore.Namespace{Tenant: tenant, User: user}
	data, _, err := e.docs.PolicyOverrides(ctx, ns)
	if err != nil {
		return "", err
	}
	pol, err := e.cfg.Base.Overlay(data)
	if err != nil {
		pol = e.cfg.Base // a bad overrides file: the base decides whether to evolve
	}
	if !pol.EvolutionEnabled {
		return EvolutionOff, nil
	}
	st, err := e.sessions.Get(ctx, tenant, user, sessionID)
	if errors.Is(err, session.ErrNotFound) {
		return EvolutionNotDue, nil
	}
	if err != nil {
		return "", err
	}
	n := st.Messages / e.cfg.Every
	if n == 0 {
		return EvolutionNotDue, nil
	}
	claimed, err := e.sessions.ClaimReflection(ctx, tenant, user, sessionID, n)
	if err != nil || !claimed {
		return EvolutionNotDue, err
	}
	log := e.logger.With(obs.Tenant(tenant), obs.User(user), obs.Session(sessionID), zap.Int("reflection", n))
	defer func() {
		if err == nil {
			return
		}
		log.Warn("policy reflection failed; its redelivery retries it", zap.Error(err))
		// A detached context: the claim must go back even when ctx ended the reflection.
		if rerr := e.sessions.ReleaseReflection(context.WithoutCancel(ctx), tenant, user, sessionID, n); rerr != nil {
			log.Warn("policy reflection claim not released; this reflection is skipped", zap.Error(rerr))
		}
	}()
	r := Reflection{Policy: pol, Messages: st.Messages, Recent: st.Recent[max(0, len(st.Recent)-e.cfg.Recent):]}
	p, err := e.model.Reflect(ctx, r)
	if errors.Is(err, llm.ErrBadReply) && ctx.Err() == nil {
		// The model answered, unusably: asking again would likely be as bad.
		fallenBack(e.model, StepReflect, log, err)
		p, err = RuleReflector{}.Reflect(ctx, r)
	}
	if err != nil {
		return "", err
	}
	outcome, snapshot, err := ApplyProposal(ctx, e.docs, ns, e.cfg.Base, p, e.metrics)
	keys := slices.Sorted(maps.Keys(p.Changes))
	switch {
	case errors.Is(err, ErrRejected):
		log.Warn("policy proposal rejected", zap.Strings("keys", keys), zap.String("reason", p.Reason), zap.Error(err))
		return outcome, nil
	case err != nil:
		return "", err
	case outcome == ProposalApplied:
		log.Info("policy evolved", zap.Strings("keys", keys), zap.String("reason", p.Reason), zap.String("snapshot", snapshot))
	}
	return outcome, nil
}
