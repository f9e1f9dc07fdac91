package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/client"
	"github.com/agentmem/agentmem/pkg/clock"
)

// DefaultAgents is the fleet phase's agents of `agentmem bench` (issue 31);
// FleetMaxUsers the users they serve at most (fewer when Config.Users is).
// DefaultAgentTurn how often each of them takes a turn: 100 agents every 2 s
// offer 50 observations and 50 context requests a second.
const (
	DefaultAgents    = 100
	FleetMaxUsers    = 1_000
	DefaultAgentTurn = 2 * time.Second
)

// fleetAgent names the a-th agent of the fleet phase.
func fleetAgent(a int) string { return fmt.Sprintf("fleet-agent-%03d", a) }

// fleetUsers are the users agent a of agents serves among users: every
// agents-th one from a, or, when there are more agents than users, one shared.
func fleetUsers(a, agents, users int) []string {
	var out []string
	for u := a; u < users; u += agents {
		out = append(out, userID(u))
	}
	if len(out) == 0 {
		out = append(out, userID(a%users))
	}
	return out
}

// fleet is the fleet phase: Config.Agents agents, each a goroutine on its own
// connection, over min(Users, FleetMaxUsers) users of the loaded tenant. First,
// untimed, every agent holds a session with each of its users; then every user
// moves to the next agent (a hand-over), and all agents at once, Requests/Agents
// turns each, one every AgentTurn (their starts spread over the first turn),
// publish an observation into their session with the user and time a context
// request naming their agent_id. fleet_handovers counts the packs that
// carried the previous agent's session: the requests were really the fleet's.
func (b *bencher) fleet(ctx context.Context, res *Result) error {
	agents := b.cfg.Agents
	if agents == 0 {
		return nil
	}
	users := min(b.cfg.Users, FleetMaxUsers)
	perAgent := max(1, b.cfg.Requests/agents)
	fmt.Fprintf(b.cfg.Progress, "== fleet: %d agents over %d users, %d observations and context requests each, one every %s, all at once\n", agents, users, perAgent, b.cfg.AgentTurn)
	conns := make([]*nats.Conn, agents)
	defer func() {
		for _, nc := range conns {
			if nc != nil {
				nc.Close()
			}
		}
	}()
	clients := make([]*client.Client, agents)
	for a := range agents {
		nc, err := nats.Connect(b.stack.ClientURL(), nats.Name(fleetAgent(a)))
		if err != nil {
			return fmt.Errorf("bench: fleet agent connect: %w", err)
		}
		conns[a] = nc
		if clients[a], err = client.New(nc, client.Config{Tenant: tenantLoad, AgentID: fleetAgent(a)}); err != nil {
			return err
		}
	}
	// Each agent's first session with its users, for the next agent to take over.
	gen := newTexts(11)
	for a := range agents {
		for _, u := range fleetUsers(a, agents, users) {
			text := fmt.Sprintf("Ticket T-%04d: the %s report export failed with error E42; retry once the fix is deployed.", a, pick(gen, reports))
			if _, err := clients[a].Say(ctx, u, fleetSession(a, 0), events.RoleUser, text, nil); err != nil {
				return fmt.Errorf("bench: fleet first sessions: %w", err)
			}
		}
	}
	if err := b.idle(ctx); err != nil {
		return err
	}
	ctxSubject, err := events.RPCSubject(tenantLoad, events.EndpointContext)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	run := &fleetRun{subject: ctxSubject, users: users, perAgent: perAgent, turn: b.cfg.AgentTurn, start: time.Now(), conns: conns, clients: clients,
		lat: make([]time.Duration, 0, agents*perAgent), prog: newProgress(b.cfg.Progress, "fleet context requests", agents*perAgent)}
	gctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, agents)
	for a := range agents {
		wg.Go(func() {
			if errs[a] = run.agent(gctx, a); errs[a] != nil {
				cancel() // the others' figures would be meaningless
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	run.prog.finish(len(run.lat))
	res.FleetAgents, res.FleetUsers, res.FleetRequests, res.FleetHandovers = agents, users, len(run.lat), run.handovers
	res.FleetTurnMs, res.FleetSeconds = float64(b.cfg.AgentTurn)/float64(time.Millisecond), time.Since(run.start).Seconds()
	res.FleetCtxP50us, res.FleetCtxP99us = micros(percentile(run.lat, 0.50)), micros(percentile(run.lat, 0.99))
	return nil
}

// fleetRun is the timed part of the fleet phase, shared by its agents.
type fleetRun struct {
	subject         string
	users, perAgent int
	turn            time.Duration
	start           time.Time
	conns           []*nats.Conn
	clients         []*client.Client

	mu        sync.Mutex
	lat       []time.Duration
	handovers int
	prog      *progress
}

// agent is agent a's timed requests: the users of the next agent, handed over
// to it, each an observation published, then a context request timed.
func (r *fleetRun) agent(ctx context.Context, a int) error {
	agents := len(r.conns)
	mine := fleetUsers((a+1)%agents, agents, r.users)
	texts := newTexts(uint64(100 + a))
	for i := range r.perAgent {
		// Turn i of agent a is due at start + (a/agents + i) turns; a late turn
		// goes at once (its latency is measured from when it is sent).
		due := r.start.Add(r.turn*time.Duration(i) + r.turn*time.Duration(a)/time.Duration(agents))
		if err := clock.Sleep(ctx, time.Until(due)); err != nil {
			return err
		}
		u := mine[i%len(mine)]
		if _, err := r.clients[a].Say(ctx, u, fleetSession(a, 1), events.RoleUser, texts.chat(events.RoleUser), nil); err != nil {
			return fmt.Errorf("%w: fleet observation: %w", ErrMeasurement, err)
		}
		data, err := json.Marshal(events.ContextRequest{UserID: u, AgentID: fleetAgent(a), SessionID: fleetSession(a, 1), Query: texts.query()})
		if err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		t0 := time.Now()
		reply, err := r.conns[a].RequestWithContext(ctx, r.subject, data)
		took := time.Since(t0)
		if err != nil {
			return fmt.Errorf("%w: fleet context request: %w", ErrMeasurement, err)
		}
		pack, err := decodePack(reply)
		if err != nil {
			return fmt.Errorf("%w: fleet context request: %w", ErrMeasurement, err)
		}
		r.mu.Lock()
		r.lat = append(r.lat, took)
		if pack.Handover != nil && pack.Handover.AgentID != fleetAgent(a) {
			r.handovers++
		}
		r.prog.update(len(r.lat))
		r.mu.Unlock()
	}
	return nil
}

// fleetSession is agent a's n-th session with a user.
func fleetSession(a, n int) string { return fmt.Sprintf("fleet-%03d-%d", a, n) }
