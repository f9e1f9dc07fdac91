package mcpserver_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/agentmem/agentmem/pkg/app/apptest"
	"github.com/agentmem/agentmem/pkg/mcpserver"
	"github.com/agentmem/agentmem/pkg/natsauth"
)

// Through `up --auth` with a tenant agent's credential: every tool but
// memory_delete is offered (the server refuses an agent the delete endpoint),
// and the agent's tools work.
func TestAgentCredentialGetsTheAgentTools(t *testing.T) {
	stack, _, auth := apptest.UpAuth(t)
	cl, _ := apptest.CredsClient(t, stack, apptest.Creds(t, auth, "acme", natsauth.RoleAgent), "acme")
	cs := connectWith(t, cl, mcpserver.Config{User: "u1", Agent: true})
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	want := slices.DeleteFunc(slices.Clone(allTools), func(n string) bool { return n == mcpserver.ToolDelete })
	slices.Sort(names)
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Fatalf("an agent's tools: %v, want %v", names, want)
	}
	call(t, cs, mcpserver.ToolAdd, map[string]any{"text": "The quarterly report goes to finance.", "memory_type": "semantic"}, false)
	if out := call(t, cs, mcpserver.ToolSearch, map[string]any{"query": "quarterly report"}, false); !strings.Contains(out, "finance") {
		t.Fatalf("search with an agent's credential: %s", out)
	}
}
