package mcpserver_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/app/apptest"
	"github.com/agentmem/agentmem/pkg/client"
	"github.com/agentmem/agentmem/pkg/mcpserver"
)

var allTools = []string{
	mcpserver.ToolContext, mcpserver.ToolSearch, mcpserver.ToolAppend, mcpserver.ToolReadTopic, mcpserver.ToolAdd,
	mcpserver.ToolGet, mcpserver.ToolUpdate, mcpserver.ToolDelete, mcpserver.ToolHistory, mcpserver.ToolEndSess,
}

// connect runs a server for user of cl's tenant over the SDK's in-memory transport.
func connect(t *testing.T, cl *client.Client, user string) *mcp.ClientSession {
	t.Helper()
	return connectWith(t, cl, mcpserver.Config{User: user})
}

// connectWith is connect with a Config of the test's own.
func connectWith(t *testing.T, cl *client.Client, cfg mcpserver.Config) *mcp.ClientSession {
	t.Helper()
	s, err := mcpserver.New(cfg, cl, nil)
	if err != nil {
		t.Fatal(err)
	}
	ct, st := mcp.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	ss, err := s.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close(); _ = ss.Wait(); cancel() })
	return cs
}

// call calls a tool and returns its text; wantErr says whether it must be a tool error.
func call(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any, wantErr bool) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error: %v", name, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	if res.IsError != wantErr {
		t.Fatalf("%s(%v): IsError=%v, want %v: %s", name, args, res.IsError, wantErr, b.String())
	}
	return b.String()
}

// CheckSchemas asserts the tool list: every tool, no tool that takes a tenant or a
// user, closed argument objects, and the OpenAI tools' own names and schemas.
func CheckSchemas(t *testing.T, cs *mcp.ClientSession) {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	openAI := map[string]json.RawMessage{}
	for _, def := range client.Tools() {
		openAI[def.Function.Name], _ = json.Marshal(def.Function.Parameters)
	}
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
		schema, _ := tool.InputSchema.(map[string]any)
		if schema["type"] != "object" || schema["additionalProperties"] != false {
			t.Errorf("%s: schema %v is not a closed object", tool.Name, schema)
		}
		props, _ := schema["properties"].(map[string]any)
		for p := range props {
			if l := strings.ToLower(p); strings.Contains(l, "tenant") || strings.Contains(l, "user") {
				t.Errorf("%s has argument %q: a model could pick whose memory it reads", tool.Name, p)
			}
		}
		if tool.Description == "" {
			t.Errorf("%s has no description", tool.Name)
		}
		if want, ok := openAI[tool.Name]; ok {
			var w, g any
			_ = json.Unmarshal(want, &w)
			got, _ := json.Marshal(schema)
			_ = json.Unmarshal(got, &g)
			if string(mustJSON(w)) != string(mustJSON(g)) {
				t.Errorf("%s: schema %s, want the OpenAI tool's %s", tool.Name, got, want)
			}
		}
	}
	slices.Sort(names)
	want := slices.Clone(allTools)
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Errorf("tools %v, want %v", names, want)
	}
}

func mustJSON(v any) []byte { b, _ := json.Marshal(v); return b }

func TestToolSchemasNameNoTenantOrUser(t *testing.T) {
	stack, _ := apptest.Up(t)
	CheckSchemas(t, connect(t, apptest.Client(t, stack, "acme"), "u1"))
}

// Every tool and resource round trip through the real stack; another user's
// server sees none of it.
func TestEveryToolRoundTrip(t *testing.T) {
	stack, _ := apptest.Up(t)
	cl := apptest.Client(t, stack, "acme")
	cs := connect(t, cl, "u1")
	ctx := context.Background()

	for _, text := range []string{"Remember: my sales.csv has columns date, product and qty.", "I prefer bar charts for monthly sales."} {
		if _, err := cl.Say(ctx, "u1", "s1", events.RoleUser, text, nil); err != nil {
			t.Fatal(err)
		}
	}
	if out := call(t, cs, mcpserver.ToolEndSess, map[string]any{"session_id": "s1"}, false); !strings.Contains(out, "s1") {
		t.Errorf("session_end: %s", out)
	}
	call(t, cs, mcpserver.ToolEndSess, map[string]any{"session_id": "s 1"}, true)
	if out := call(t, cs, mcpserver.ToolAppend, map[string]any{"content": "Quarterly reports go to finance."}, false); !strings.Contains(out, "MEMORY.md") {
		t.Errorf("memory_append: %s", out)
	}
	apptest.WaitIdle(t, stack)

	if out := call(t, cs, mcpserver.ToolContext, map[string]any{"query": "which columns does my sales file have?"}, false); !strings.Contains(out, "qty") || !strings.Contains(out, "finance") {
		t.Errorf("memory_context: %s", out)
	}
	if out := call(t, cs, mcpserver.ToolSearch, map[string]any{"query": "sales columns", "limit": 5}, false); !strings.Contains(out, "qty") {
		t.Errorf("memory_search: %s", out)
	}
	call(t, cs, mcpserver.ToolSearch, map[string]any{"query": "x", "user_id": "u2"}, true)
	if out := call(t, cs, mcpserver.ToolReadTopic, map[string]any{"topic": "user_prefs"}, false); !strings.Contains(out, "bar chart") {
		t.Errorf("memory_read_topic: %s", out)
	}
	call(t, cs, mcpserver.ToolReadTopic, map[string]any{"topic": "secrets"}, true)

	out := call(t, cs, mcpserver.ToolAdd, map[string]any{"text": "The finance team's deadline is the 5th of each month.", "memory_type": "semantic"}, false)
	var added events.AddReply
	if err := json.Unmarshal([]byte(out), &added); err != nil || len(added.MemoryIDs) == 0 {
		t.Fatalf("memory_add: %v %s", err, out)
	}
	// memory_search gives the id that memory_get, memory_update and
	// memory_delete take.
	type hit struct {
		ID   string `json:"id"`
		Text string `json:"text"`
	}
	var found struct {
		Results []hit `json:"results"`
	}
	out = call(t, cs, mcpserver.ToolSearch, map[string]any{"query": "finance team deadline", "limit": 3}, false)
	if err := json.Unmarshal([]byte(out), &found); err != nil || len(found.Results) == 0 {
		t.Fatalf("memory_search: %v %s", err, out)
	}
	i := slices.IndexFunc(found.Results, func(h hit) bool { return strings.Contains(h.Text, "5th of each month") })
	if i < 0 || found.Results[i].ID != added.MemoryIDs[0] {
		t.Fatalf("memory_search hits %s; want the added memory with its id %s", out, added.MemoryIDs[0])
	}
	id := found.Results[i].ID
	if out := call(t, cs, mcpserver.ToolGet, map[string]any{"id": id}, false); !strings.Contains(out, "5th of each month") {
		t.Errorf("memory_get: %s", out)
	}
	if out := call(t, cs, mcpserver.ToolUpdate, map[string]any{"id": id, "text": "The finance deadline is the 7th of each month."}, false); !strings.Contains(out, "7th") {
		t.Errorf("memory_update: %s", out)
	}
	if out := call(t, cs, mcpserver.ToolHistory, map[string]any{"id": id}, false); !strings.Contains(out, "7th") || !strings.Contains(out, "5th") {
		t.Errorf("memory_history: %s", out)
	}

	// Another user of the same tenant cannot read, change or delete it.
	other := connect(t, cl, "u2")
	if out := call(t, other, mcpserver.ToolGet, map[string]any{"id": id}, true); !strings.Contains(out, "not found") {
		t.Errorf("u2 memory_get of u1's memory: %s", out)
	}
	if out := call(t, other, mcpserver.ToolDelete, map[string]any{"ids": []string{id}}, false); !strings.Contains(out, `"deleted": 0`) {
		t.Errorf("u2 memory_delete of u1's memory: %s", out)
	}

	if out := call(t, cs, mcpserver.ToolDelete, map[string]any{"ids": []string{id}}, false); !strings.Contains(out, `"deleted": 1`) {
		t.Errorf("memory_delete: %s", out)
	}
	if out := call(t, cs, mcpserver.ToolGet, map[string]any{"id": id}, true); !strings.Contains(out, "memory_get: not found") {
		t.Errorf("memory_get after delete: %s", out)
	}

	for uri, want := range map[string]string{"MEMORY.md": "finance", "user_prefs.md": "bar chart", "file_patterns.md": ""} {
		res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: mcpserver.ResourceScheme + uri})
		if err != nil {
			t.Fatalf("read %s: %v", uri, err)
		}
		if len(res.Contents) != 1 || !strings.Contains(res.Contents[0].Text, want) {
			t.Errorf("%s: %+v", uri, res.Contents)
		}
	}
	res, err := cs.ListResources(ctx, nil)
	if err != nil || len(res.Resources) != 3 {
		t.Errorf("resources: %v %+v", err, res)
	}
}

// Over HTTP the bearer token decides the tenant and user; no token, no MCP.
func TestHTTPTokens(t *testing.T) {
	stack, _ := apptest.Up(t)
	cl := apptest.Client(t, stack, "acme")
	tokens, err := mcpserver.ParseTokens(strings.NewReader("# comment\ntok-u1-0123456789abcdef acme u1\ntok-u2-0123456789abcdef acme u2\n"))
	if err != nil {
		t.Fatal(err)
	}
	h, err := mcpserver.Handler(mcpserver.HTTPConfig{Tokens: tokens, NewClient: func(string) (*client.Client, error) { return cl, nil }}, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()

	resp, err := http.Post(srv.URL, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("no token: %d, want 401", resp.StatusCode)
	}

	session := func(token string) *mcp.ClientSession {
		hc := &http.Client{Transport: bearer{token: token}}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(),
			&mcp.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: hc, DisableStandaloneSSE: true}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cs.Close() })
		return cs
	}
	u1, u2 := session("tok-u1-0123456789abcdef"), session("tok-u2-0123456789abcdef")
	call(t, u1, mcpserver.ToolAppend, map[string]any{"content": "u1 likes tea."}, false)
	if out := call(t, u1, mcpserver.ToolContext, map[string]any{"lightweight": true}, false); !strings.Contains(out, "tea") {
		t.Errorf("u1 context: %s", out)
	}
	if out := call(t, u2, mcpserver.ToolContext, map[string]any{"lightweight": true}, false); strings.Contains(out, "tea") {
		t.Errorf("u2 sees u1's memory: %s", out)
	}

	if _, err := mcpserver.ParseTokens(strings.NewReader("xyzzy acme u1\n")); err == nil || strings.Contains(err.Error(), "xyzzy") {
		t.Errorf("short token: %v (and the error must not show the token)", err)
	}
}

type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}
