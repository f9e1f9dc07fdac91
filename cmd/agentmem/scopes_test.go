package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentmem/agentmem/events"
)

// append and add write the scope --scope names (--agent for the agent's),
// --user is needed for the user scope only, and context --agent composes the
// user's memory, that agent's and the tenant's.
func TestScopeFlags(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, url := upForCLI(t, ctx)
	base := []string{"--nats-url", url, "--tenant", "acme"}
	for _, args := range [][]string{
		{"append", "--user", "u1", "--content", "U1 sends reports on Mondays."},
		{"append", "--scope", "agent", "--agent", "reporter", "--content", "Reports export with the pdf flag."},
		{"add", "--scope", "tenant", "--type", "semantic", "--text", "Reports are archived for seven years."},
	} {
		if out, err := run(t, append(args, base...)...); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
	}
	for _, bad := range [][]string{
		{"append", "--content", "x"},                     // scope user without --user
		{"append", "--scope", "agent", "--content", "x"}, // no --agent
		{"add", "--scope", "team", "--text", "x"},        // no such scope
		{"append", "--scope", "agent", "--agent", "a.b", "--content", "x"},
	} {
		if out, err := run(t, append(bad, base...)...); err == nil {
			t.Errorf("%v was accepted:\n%s", bad, out)
		}
	}
	out, err := run(t, append([]string{"context", "--json", "--user", "u1", "--agent", "reporter", "--query", "how are reports sent, exported and archived"}, base...)...)
	var pack events.ContextPack
	if err != nil || json.Unmarshal([]byte(out), &pack) != nil {
		t.Fatalf("context: %v\n%s", err, out)
	}
	for _, want := range []struct {
		list []events.PackItem
		text string
	}{{pack.AgentItems, "pdf flag"}, {pack.TenantItems, "seven years"}} {
		found := false
		for _, it := range want.list {
			found = found || strings.Contains(it.Text, want.text)
		}
		if !found {
			t.Errorf("%q is not in its scope's list: agent %+v tenant %+v", want.text, pack.AgentItems, pack.TenantItems)
		}
	}
	if !strings.Contains(pack.Prompt, "Mondays") {
		t.Errorf("the user's memory is not in the pack:\n%s", pack.Prompt)
	}
}
