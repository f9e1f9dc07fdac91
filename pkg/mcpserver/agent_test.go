package mcpserver_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

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

// Issue 30: a tool the credential may not use (memory_delete offered to an
// agent's credential all the same) fails at once with the server's refusal,
// which the model reads, instead of after the client's timeout.
func TestRefusedToolFailsAtOnce(t *testing.T) {
	stack, _, auth := apptest.UpAuth(t)
	cl, _ := apptest.CredsClient(t, stack, apptest.Creds(t, auth, "acme", natsauth.RoleAgent), "acme")
	cs := connectWith(t, cl, mcpserver.Config{User: "u1"})
	start := time.Now()
	out := call(t, cs, mcpserver.ToolDelete, map[string]any{"ids": []string{"9b2c6f0e-1d2a-4c3b-8e7f-0a1b2c3d4e5f"}}, true)
	if took := time.Since(start); !strings.Contains(out, "permissions violation") || !strings.Contains(out, "memrpc.acme.delete") || took > 5*time.Second {
		t.Fatalf("memory_delete with an agent's credential after %s: %s", took, out)
	}
}
