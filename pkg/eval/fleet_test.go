package eval

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentmem/agentmem/events"
)

// The fleet is the seed's: the same seed makes the same fleet, another seed
// another; every session is held by another agent of the user's tenant than
// the one before, and the agent asking afterwards did not hold the last.
func TestGenerateFleet(t *testing.T) {
	cfg := FleetConfig{Agents: 6, Users: 9, Tenants: 3, Sessions: 3, Seed: 7}
	f := generateFleet(cfg)
	if !reflect.DeepEqual(f, generateFleet(cfg)) {
		t.Fatal("the same seed made two fleets")
	}
	other := cfg
	other.Seed = 8
	if reflect.DeepEqual(f, generateFleet(other)) {
		t.Fatal("seeds 7 and 8 made the same fleet")
	}
	refs := map[string]bool{}
	for _, u := range f.users {
		if refs[u.ref] || !fleetRefPattern.MatchString(u.ref) {
			t.Fatalf("user %s: marker %q repeated or not found by the pattern", u.id, u.ref)
		}
		refs[u.ref] = true
		if len(u.sessions) != 3 || !strings.Contains(u.sessions[0].msgs[0].Text, u.ref) {
			t.Fatalf("user %s: sessions %+v", u.id, u.sessions)
		}
		tenant := u.tenant[len("fleet-t"):]
		prev := ""
		for _, s := range append(u.sessions, fleetSession{agent: u.asker}) {
			var n int
			if _, err := fmt.Sscanf(s.agent, "agent-%d", &n); err != nil || s.agent == prev || n%3 != int(tenant[0]-'0') {
				t.Fatalf("user %s of tenant %s: agent %q after %q", u.id, u.tenant, s.agent, prev)
			}
			prev = s.agent
		}
	}
}

// A personal marker of another user anywhere in a pack is a leak; the user's
// own is not.
func TestFleetLeaks(t *testing.T) {
	f := generateFleet(FleetConfig{Agents: 4, Users: 3, Tenants: 2, Sessions: 2, Seed: 1})
	u0, u1 := f.users[0], f.users[1]
	pack := events.ContextPack{UserID: u0.id, Prompt: "ref " + u0.ref}
	if l := f.leaks(pack, u0); len(l) != 0 {
		t.Fatalf("own marker reported: %v", l)
	}
	pack.Handover = &events.Handover{Summary: "customer reference is " + u1.ref}
	if l := f.leaks(pack, u0); len(l) != 1 || !strings.Contains(l[0], u1.ref) {
		t.Fatalf("leaks %v, want %s's marker", l, u1.id)
	}
}

func TestFleetConfigValidate(t *testing.T) {
	for name, cfg := range map[string]FleetConfig{
		"agents":   {Agents: 3, Users: 4, Tenants: 2, Sessions: 2},
		"users":    {Agents: 4, Users: 1, Tenants: 2, Sessions: 2},
		"sessions": {Agents: 4, Users: 4, Tenants: 2, Sessions: 1},
	} {
		if err := cfg.Validate(); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), strings.ToUpper(name[:1])+name[1:]) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// The fleet evaluation at a small size through the real pipeline meets issue
// 31's targets: each recall at least 0.9, no leak.
func TestRunFleetMeetsTargets(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole pipeline")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rep, err := RunFleet(ctx, FleetConfig{ScenarioConfig: ScenarioConfig{DataDir: t.TempDir(), IdleTimeout: 2 * time.Minute},
		Agents: 4, Users: 12, Tenants: 2, Sessions: 3}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.HandoverRecall < 0.9 || rep.AgentKnowledgeRecall < 0.9 || rep.TenantKnowledgeRecall < 0.9 || rep.Leaks != 0 || rep.Users != 12 {
		t.Fatalf("report %+v: want every recall >= 0.9 and no leak", rep)
	}
}
