package eval

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/client"
)

// Defaults of FleetConfig: the size issue 31 asks the fleet evaluation for.
const (
	DefaultFleetAgents   = 20
	DefaultFleetUsers    = 200
	DefaultFleetTenants  = 4
	DefaultFleetSessions = 3
	DefaultFleetSeed     = 31
)

// FleetConfig configures RunFleet. The stack, data directory, progress and
// idle timeout are as for RunScenarios (Prompts receives every pack's prompt).
type FleetConfig struct {
	ScenarioConfig
	// Seed makes the fleet: the same seed, the same agents, users and sessions.
	Seed uint64
	// Agents, Users and Tenants are the fleet's size: agents and users are
	// dealt to the tenants in turn; every tenant needs two agents, so a user can
	// be handed from one to another.
	Agents, Users, Tenants int
	// Sessions is how many sessions each user has, each held by another agent
	// of the tenant than the one before.
	Sessions int
}

func (c *FleetConfig) setDefaults() {
	if c.Seed == 0 {
		c.Seed = DefaultFleetSeed
	}
	for _, d := range []struct {
		v   *int
		def int
	}{{&c.Agents, DefaultFleetAgents}, {&c.Users, DefaultFleetUsers}, {&c.Tenants, DefaultFleetTenants}, {&c.Sessions, DefaultFleetSessions}} {
		if *d.v == 0 {
			*d.v = d.def
		}
	}
}

// Validate reports the first unusable size.
func (c FleetConfig) Validate() error {
	switch {
	case c.Tenants < 1:
		return fmt.Errorf("%w: Tenants is %d; at least 1", ErrInvalidConfig, c.Tenants)
	case c.Agents < 2*c.Tenants:
		return fmt.Errorf("%w: Agents is %d; every one of the %d tenants needs 2, so at least %d", ErrInvalidConfig, c.Agents, c.Tenants, 2*c.Tenants)
	case c.Users < c.Tenants:
		return fmt.Errorf("%w: Users is %d; every one of the %d tenants needs one", ErrInvalidConfig, c.Users, c.Tenants)
	case c.Sessions < 2:
		return fmt.Errorf("%w: Sessions is %d; a hand-over needs at least 2", ErrInvalidConfig, c.Sessions)
	}
	return nil
}

// FleetReport is the result of RunFleet. A recall is the fraction of the
// needed items found in the packs at the retriever's default budget.
type FleetReport struct {
	Seed     uint64 `json:"seed"`
	Agents   int    `json:"agents"`
	Users    int    `json:"users"`
	Tenants  int    `json:"tenants"`
	Sessions int    `json:"sessions"`
	// HandoverRecall: of each user's last session (held by another agent than
	// the one asking), its task and its open item found in the pack's hand-over.
	HandoverRecall float64 `json:"handover_recall"`
	// AgentKnowledgeRecall: of the procedures (error→fix) an agent learned in
	// a session with another user (memory.agent_learning), found in the
	// agent's pack for this user.
	AgentKnowledgeRecall float64 `json:"agent_knowledge_recall"`
	// TenantKnowledgeRecall: of the facts written to the tenant scope, found in
	// every pack of the tenant's users.
	TenantKnowledgeRecall float64 `json:"tenant_knowledge_recall"`
	// Leaks counts the personal items of a user found where they must not be:
	// in another user's pack, or in an agent's or a tenant's scope.
	Leaks int `json:"leaks"`
	// Misses and LeakList name the first few of each (for looking at them).
	Misses         []string `json:"misses,omitempty"`
	LeakList       []string `json:"leak_list,omitempty"`
	PackTokensMean float64  `json:"pack_tokens_mean"`
	Seconds        float64  `json:"seconds"`
}

// fleetListed is how many misses and leaks a report names.
const fleetListed = 20

// fleet is a generated fleet: its users, each with its sessions, the lesson
// each agent learns in the first session it holds, and each tenant's facts.
type fleet struct {
	users   []fleetUser
	owner   map[string]string // personal marker → "<tenant>/<user>"
	lessons map[string]fleetLesson
	facts   map[string][]string // by tenant
	agents  []string            // every agent, as "<tenant>/<agent>"
}

// fleetLesson is a procedure an agent learns: an error a tool reports and the
// fix the agent gives, which the user confirms; from is the user it was
// learned with.
type fleetLesson struct {
	from, err, fix string
}

// leaks names every personal marker in pack (all of it, JSON) that is not u's.
func (f fleet) leaks(pack events.ContextPack, u fleetUser) []string {
	data, _ := json.Marshal(pack) // a pack always encodes: it came as JSON
	self := u.tenant + "/" + u.id
	var out []string
	for _, ref := range fleetRefPattern.FindAllString(string(data), -1) {
		if o, ok := f.owner[ref]; ok && o != self {
			out = append(out, fmt.Sprintf("%s of %s in the pack of %s", ref, o, self))
		}
	}
	return out
}

type fleetUser struct {
	tenant, id string
	// ref is the user's personal marker (in a sentence with a name and a phone
	// number); no other user's pack may hold it.
	ref      string
	sessions []fleetSession
	// asker is the agent of the tenant that asks for the user's context after
	// the last session: never the agent that held it.
	asker string
}

type fleetSession struct {
	id, agent string
	msgs      []ScenarioMessage
	// order is the session's task: the hand-over of the session must carry it
	// in its summary, and follow in the open item (a session goal).
	order, follow string
}

var (
	fleetFirst  = []string{"Dana", "Ravi", "Mei", "Jonas", "Amara", "Luca", "Sofia", "Kenji", "Nadia", "Omar", "Greta", "Tomas"}
	fleetLast   = []string{"Whitfield", "Okafor", "Lindqvist", "Moreau", "Tanaka", "Costa", "Novak", "Haddad", "Brennan", "Kowalski"}
	fleetIssues = []struct{ problem, action string }{
		{"the parcel arrived damaged", "ship a replacement"},
		{"I was charged twice", "refund the second charge"},
		{"the invoice shows the wrong VAT rate", "reissue the invoice"},
		{"the delivery is a week late", "escalate to the carrier"},
		{"the login link expired before I could use it", "send a new login link"},
		{"a size M came instead of a size L", "exchange the item"},
	}
	// fleetFacts are written to every tenant's scope, each with a word of its own.
	fleetFacts = []string{
		"Team convention: refunds above 200 EUR need a second approval in the %s queue.",
		"Shared fact: the warehouse hand-off for returns is the %s desk.",
	}
	fleetWords = []string{"amber", "birch", "cobalt", "delta", "ember", "fjord", "garnet", "harbor", "indigo", "juniper", "kestrel", "lumen", "marble", "nimbus", "onyx", "pewter", "quartz", "russet", "saffron", "tundra"}
	// fleetRefPattern finds personal markers in a pack.
	fleetRefPattern = regexp.MustCompile(`PR[0-9A-Z]{6}`)
)

// fleetWord is a two-word name not used before ("cobalt-fjord"): what makes a
// lesson or a fact the fleet's own, found only where it was written.
func fleetWord(rng *rand.Rand, seen map[string]bool) string {
	w := ""
	for try := 0; w == "" || seen[w]; try++ {
		w = fleetWords[rng.IntN(len(fleetWords))] + "-" + fleetWords[rng.IntN(len(fleetWords))]
		if try >= 20 { // a large fleet: the pairs run out
			w += "-" + strconv.Itoa(len(seen))
		}
	}
	seen[w] = true
	return w
}

// generateFleet makes cfg's fleet from its seed.
func generateFleet(cfg FleetConfig) fleet {
	rng := rand.New(rand.NewPCG(cfg.Seed, 31))
	code := func(prefix string, n int, seen map[string]bool) string {
		const alphabet = "0123456789ABCDEFGHJKLMNPQRSTUVWXYZ"
		for {
			b := []byte(prefix)
			for range n {
				b = append(b, alphabet[rng.IntN(len(alphabet))])
			}
			if s := string(b); !seen[s] {
				seen[s] = true
				return s
			}
		}
	}
	seen := map[string]bool{}
	f := fleet{owner: map[string]string{}, lessons: map[string]fleetLesson{}, facts: map[string][]string{}}
	agents := make([][]string, cfg.Tenants) // by tenant
	for a := range cfg.Agents {
		t := a % cfg.Tenants
		agents[t] = append(agents[t], fmt.Sprintf("agent-%02d", a))
		f.agents = append(f.agents, fmt.Sprintf("fleet-t%d/agent-%02d", t, a))
	}
	for t := range cfg.Tenants {
		tenant := fmt.Sprintf("fleet-t%d", t)
		for _, fact := range fleetFacts {
			f.facts[tenant] = append(f.facts[tenant], fmt.Sprintf(fact, fleetWord(rng, seen)))
		}
	}
	// other picks an agent of tenant t other than not.
	other := func(t int, not string) string {
		for {
			if a := agents[t][rng.IntN(len(agents[t]))]; a != not {
				return a
			}
		}
	}
	for u := range cfg.Users {
		t := u % cfg.Tenants
		user := fleetUser{tenant: fmt.Sprintf("fleet-t%d", t), id: fmt.Sprintf("u%03d", u), ref: code("PR", 6, seen)}
		personal := fmt.Sprintf("Hi, I'm %s %s; call me on +1-555-%04d, my customer reference is %s.",
			fleetFirst[rng.IntN(len(fleetFirst))], fleetLast[rng.IntN(len(fleetLast))], rng.IntN(10000), user.ref)
		agent := ""
		for s := range cfg.Sessions {
			agent = other(t, agent)
			issue := fleetIssues[rng.IntN(len(fleetIssues))]
			sess := fleetSession{id: fmt.Sprintf("s%d", s+1), agent: agent, order: code("ORD-", 6, seen)}
			sess.follow = fmt.Sprintf("%s for order %s", issue.action, sess.order)
			opening := "Hello again."
			if s == 0 {
				opening = personal
			}
			sess.msgs = []ScenarioMessage{
				{Role: "user", Text: opening},
				{Role: "user", Text: fmt.Sprintf("About order %s: %s.", sess.order, issue.problem)},
				{Role: "assistant", Text: fmt.Sprintf("I opened a case for order %s and will %s.", sess.order, issue.action)},
			}
			key := user.tenant + "/" + agent
			if _, learned := f.lessons[key]; !learned {
				// The agent's first session: it meets an error of its tool and
				// the fix that works, which holds for any user.
				word := fleetWord(rng, seen)
				l := fleetLesson{from: user.id,
					err: fmt.Sprintf("SyncError: the %s connector rejected the batch", word),
					fix: fmt.Sprintf("Restart the %s connector with the drain flag", word)}
				f.lessons[key] = l
				sess.msgs = append(sess.msgs,
					ScenarioMessage{Role: "tool", Text: l.err},
					ScenarioMessage{Role: "assistant", Text: l.fix + "."},
					ScenarioMessage{Role: "user", Text: "That worked."})
			}
			if s == 0 {
				// A fix that holds for this user alone: never the agent's to keep.
				sess.msgs = append(sess.msgs,
					ScenarioMessage{Role: "tool", Text: "LoginError: the portal locked the login of customer reference " + user.ref},
					ScenarioMessage{Role: "assistant", Text: "Unlock the login of " + user.ref + " in the admin console."},
					ScenarioMessage{Role: "user", Text: "That worked."})
			}
			user.sessions = append(user.sessions, sess)
		}
		user.asker = other(t, agent)
		f.users = append(f.users, user)
		f.owner[user.ref] = user.tenant + "/" + user.id
	}
	return f
}

// RunFleet runs a synthetic fleet (generateFleet) through the real pipeline,
// over NATS, as RunScenarios does, with memory.agent_learning on: each
// tenant's facts are appended to its tenant scope; every user's sessions are
// published, each as the agent that held it, each with a session goal saved
// as its open item, and ended (an agent's first session teaches it a fix);
// the pipeline drains; then for each user another agent of the tenant than
// the last one asks for the user's context in a new session (a preview, at
// the default budget), and the pack is checked: the hand-over must carry the
// last session's task and open item, the agent scope the asking agent's
// lesson (learned with another user), the tenant scope the tenant's facts,
// and no other user's personal marker may be anywhere in it. Last, every
// agent and tenant scope is read whole: no personal marker may be there.
func RunFleet(ctx context.Context, cfg FleetConfig, logger *zap.Logger) (*FleetReport, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	started := time.Now()
	// The agents learn: their lessons are what agent_knowledge_recall needs.
	cfg.Environ = append(slices.Clip(cfg.Environ), "AGENTMEM_MEMORY_AGENT_LEARNING=true")
	run, err := startScenarioStack(ctx, &cfg.ScenarioConfig, "agentmem-eval-fleet", logger)
	if err != nil {
		return nil, err
	}
	defer run.close()
	f := generateFleet(cfg)
	clients := map[string]*client.Client{}
	for _, u := range f.users {
		if clients[u.tenant] == nil {
			if clients[u.tenant], err = client.New(run.nc, client.Config{Tenant: u.tenant, RequestTimeout: time.Minute}); err != nil {
				return nil, err
			}
		}
	}
	for _, tenant := range slices.Sorted(maps.Keys(f.facts)) {
		for _, fact := range f.facts[tenant] {
			if _, err := clients[tenant].Append(ctx, events.AppendRequest{Scope: events.MemoryScopeTenant, Content: fact}); err != nil {
				return nil, fmt.Errorf("eval: fleet fact of %s: %w", tenant, err)
			}
		}
	}
	for _, u := range f.users {
		cl := clients[u.tenant]
		for si, s := range u.sessions {
			if err := publishSession(ctx, cl, u.id, s.agent, s.id, s.msgs, scenarioStart.Add(time.Duration(si)*24*time.Hour)); err != nil {
				return nil, fmt.Errorf("eval: fleet user %s/%s: %w", u.tenant, u.id, err)
			}
			if _, err := cl.SaveItem(ctx, events.ItemRequest{UserID: u.id, Item: events.MemoryItem{
				Scope: events.ScopeSession, SessionID: s.id, Kind: events.ItemGoal, Key: "follow-up", Content: s.follow, Confidence: 1,
			}}); err != nil {
				return nil, fmt.Errorf("eval: fleet user %s/%s: %w", u.tenant, u.id, err)
			}
		}
	}
	fmt.Fprintf(cfg.Progress, "fleet: %d users of %d tenants published; waiting for the pipeline...\n", len(f.users), cfg.Tenants)
	if err := run.ev.waitIdle(ctx, run.stack); err != nil {
		return nil, err
	}

	rep := &FleetReport{Seed: cfg.Seed, Agents: cfg.Agents, Users: cfg.Users, Tenants: cfg.Tenants, Sessions: cfg.Sessions}
	var handover, agent, tenant recallCount
	for _, u := range f.users {
		pack, err := clients[u.tenant].Context(ctx, events.ContextRequest{UserID: u.id, AgentID: u.asker, SessionID: "next", Query: "What is still open for this customer?", RecordHits: events.NoHits()})
		if err != nil {
			return nil, fmt.Errorf("eval: fleet context of %s/%s: %w", u.tenant, u.id, err)
		}
		rep.PackTokensMean += float64(pack.TokenEstimate)
		if cfg.Prompts != nil {
			fmt.Fprintf(cfg.Prompts, "=== %s/%s asked by %s\n%s\n\n", u.tenant, u.id, u.asker, pack.Prompt)
		}
		for _, c := range []struct {
			count *recallCount
			check func(events.ContextPack, fleetUser) (int, []string)
		}{{&handover, handoverMisses}, {&agent, f.agentMisses}, {&tenant, f.tenantMisses}} {
			needed, misses := c.check(pack, u)
			c.count.add(needed, misses)
			for _, miss := range misses {
				rep.Misses = appendListed(rep.Misses, fmt.Sprintf("%s/%s asked by %s: %s", u.tenant, u.id, u.asker, miss))
			}
		}
		for _, l := range f.leaks(pack, u) {
			rep.Leaks++
			rep.LeakList = appendListed(rep.LeakList, l)
		}
	}
	// The shared scopes hold no user's personal marker.
	for _, owner := range f.scopeOwners() {
		pack, err := clients[owner.tenant].Context(ctx, events.ContextRequest{UserID: owner.id, RecordHits: events.NoHits()})
		if err != nil {
			return nil, fmt.Errorf("eval: fleet scope %s/%s: %w", owner.tenant, owner.id, err)
		}
		for _, l := range f.leaks(pack, owner) {
			rep.Leaks++
			rep.LeakList = appendListed(rep.LeakList, l)
		}
	}
	rep.HandoverRecall, rep.AgentKnowledgeRecall, rep.TenantKnowledgeRecall = handover.ratio(), agent.ratio(), tenant.ratio()
	rep.PackTokensMean = math.Round(rep.PackTokensMean/float64(len(f.users))*10) / 10
	rep.Seconds = time.Since(started).Seconds()
	return rep, nil
}

// recallCount counts needed items and those missed.
type recallCount struct{ needed, missed int }

func (c *recallCount) add(needed int, misses []string) {
	c.needed += needed
	c.missed += len(misses)
}

func (c recallCount) ratio() float64 { return ratio(c.needed-c.missed, c.needed) }

// handoverMisses names what the pack's hand-over lacks of u's last session,
// of the 2 items needed: its task in the summary, its open item (both missed
// when there is no hand-over from the agent that held it).
func handoverMisses(pack events.ContextPack, u fleetUser) (int, []string) {
	last := u.sessions[len(u.sessions)-1]
	h := pack.Handover
	if h == nil || h.AgentID != last.agent || h.SessionID != last.id {
		return 2, []string{fmt.Sprintf("no hand-over of %s from %s (got %+v)", last.id, last.agent, h), "no open item"}
	}
	var out []string
	if !strings.Contains(h.Summary, last.order) {
		out = append(out, "hand-over summary lacks "+last.order)
	}
	if !slices.ContainsFunc(h.OpenItems, func(it events.MemoryItem) bool { return it.Content == last.follow }) {
		out = append(out, "hand-over lacks the open item "+last.follow)
	}
	return 2, out
}

// agentMisses: the lesson the asking agent learned with another user than u
// is needed in the pack's agent scope (1 item); none is needed when it
// learned it with u, or learned none.
func (f fleet) agentMisses(pack events.ContextPack, u fleetUser) (int, []string) {
	l, ok := f.lessons[u.tenant+"/"+u.asker]
	if !ok || l.from == u.id {
		return 0, nil
	}
	if !slices.ContainsFunc(pack.AgentItems, func(it events.PackItem) bool { return strings.Contains(it.Text, l.fix) }) {
		return 1, []string{"agent scope lacks " + l.fix}
	}
	return 1, nil
}

// tenantMisses: every fact of u's tenant is needed in the pack's tenant scope.
func (f fleet) tenantMisses(pack events.ContextPack, u fleetUser) (int, []string) {
	var out []string
	for _, fact := range f.facts[u.tenant] {
		if !slices.ContainsFunc(pack.TenantItems, func(it events.PackItem) bool { return strings.Contains(it.Text, fact) }) {
			out = append(out, "tenant scope lacks "+fact)
		}
	}
	return len(f.facts[u.tenant]), out
}

// scopeOwners are the agent and tenant scopes of the fleet, as the owners a
// context request names to read them whole.
func (f fleet) scopeOwners() []fleetUser {
	var out []fleetUser
	for _, tenant := range slices.Sorted(maps.Keys(f.facts)) {
		out = append(out, fleetUser{tenant: tenant, id: events.TenantOwner})
	}
	for _, a := range f.agents {
		tenant, agent, _ := strings.Cut(a, "/")
		out = append(out, fleetUser{tenant: tenant, id: events.AgentOwner(agent)})
	}
	return out
}

func appendListed(list []string, s string) []string {
	if len(list) < fleetListed {
		list = append(list, s)
	}
	return list
}

// ratio is n/of rounded to three decimals; 0 of 0 is 1 (nothing was needed).
func ratio(n, of int) float64 {
	if of == 0 {
		return 1
	}
	return math.Round(float64(n)/float64(of)*1000) / 1000
}

// WriteTable prints the report as text.
func (r *FleetReport) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "fleet: %d agents, %d users, %d tenants, %d sessions a user (seed %d), %.1fs\n\n", r.Agents, r.Users, r.Tenants, r.Sessions, r.Seed, r.Seconds)
	fmt.Fprintf(w, "handover_recall          %.3f\n", r.HandoverRecall)
	fmt.Fprintf(w, "agent_knowledge_recall   %.3f\n", r.AgentKnowledgeRecall)
	fmt.Fprintf(w, "tenant_knowledge_recall  %.3f\n", r.TenantKnowledgeRecall)
	fmt.Fprintf(w, "leaks                    %d\n", r.Leaks)
	fmt.Fprintf(w, "pack tokens mean         %.0f\n", r.PackTokensMean)
	for _, m := range r.Misses {
		fmt.Fprintln(w, "MISS", m)
	}
	for _, l := range r.LeakList {
		fmt.Fprintln(w, "LEAK", l)
	}
	return nil
}
