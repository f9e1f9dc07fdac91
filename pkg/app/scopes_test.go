package app_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"pgregory.net/rapid"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/app/apptest"
	"github.com/agentmem/agentmem/pkg/bus/bustest"
	"github.com/agentmem/agentmem/pkg/client"
	"github.com/agentmem/agentmem/pkg/natsauth"
)

// scopeTexts are every text of a pack with the scope it was filed under: the
// user's lists (memory items, core, chunks, notes, recalled memories), the
// agent's and the tenant's.
func scopeTexts(p events.ContextPack) map[events.MemoryScope][]string {
	out := map[events.MemoryScope][]string{}
	for _, list := range [][]events.MemoryItem{p.Persona, p.UserProfile, p.SessionItems} {
		for _, it := range list {
			out[events.MemoryScopeUser] = append(out[events.MemoryScopeUser], it.Content)
		}
	}
	user := append(append(append(append([]events.PackItem{}, p.Chunks...), p.DailyNotes...), p.EpisodicItems...), p.SemanticItems...)
	if p.Core != nil {
		user = append(user, *p.Core)
	}
	for _, list := range [][]events.PackItem{user, p.AgentItems, p.TenantItems} {
		for _, it := range list {
			out[it.Scope] = append(out[it.Scope], it.Text)
		}
	}
	return out
}

// holds reports whether one of texts contains s.
func holds(texts []string, s string) bool {
	for _, t := range texts {
		if strings.Contains(t, s) {
			return true
		}
	}
	return false
}

// Through `up --auth`: agents write their users' memory and their own agent
// scope (each with a credential bound to it), only the admin the tenant scope; a context pack composes the user's
// memory, the asking agent's scope and the tenant's, each entry under its
// scope, and never another user's or another agent's memory; search ranks
// the three together; forgetting a user leaves the shared scopes alone.
func TestScopesThroughTheStack(t *testing.T) {
	stack, _, auth := apptest.UpAuth(t)
	ctx := context.Background()
	_, agentNC := apptest.CredsClient(t, stack, apptest.AgentCreds(t, auth, "acme", "agent-a"), "acme")
	_, agentBNC := apptest.CredsClient(t, stack, apptest.AgentCreds(t, auth, "acme", "agent-b"), "acme")
	_, adminNC := apptest.CredsClient(t, stack, apptest.Creds(t, auth, "acme", natsauth.RoleAdmin), "acme")
	newClient := func(nc *nats.Conn, agent string, timeout time.Duration) *client.Client {
		cl, err := client.New(nc, client.Config{Tenant: "acme", AgentID: agent, RequestTimeout: timeout})
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	agentA, agentB := newClient(agentNC, "agent-a", 0), newClient(agentBNC, "agent-b", 0)
	admin, anonymous := newClient(adminNC, "admin-cli", 0), newClient(adminNC, "", 0)

	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	appendTo := func(cl *client.Client, req events.AppendRequest) {
		t.Helper()
		_, err := cl.Append(ctx, req)
		must(fmt.Sprintf("append %+v", req), err)
	}
	appendTo(agentA, events.AppendRequest{UserID: "alice", Content: "Alice keeps her invoices in the blue folder."})
	appendTo(agentB, events.AppendRequest{UserID: "bob", Content: "Bob keeps his invoices in the red folder."})
	appendTo(agentA, events.AppendRequest{Scope: events.MemoryScopeAgent, Content: "To export invoices run the exporter with the utf8 flag."})
	appendTo(agentB, events.AppendRequest{Scope: events.MemoryScopeAgent, Content: "Invoices from the old portal need the legacy parser."})
	_, err := agentA.Add(ctx, events.AddRequest{UserID: "alice", Scope: events.MemoryScopeAgent, Text: "The invoice API rejects dates without a timezone.", MemoryType: events.MemorySemantic})
	must("agent add", err)
	appendTo(admin, events.AppendRequest{Scope: events.MemoryScopeTenant, Content: "Team convention: invoices are archived after ninety days."})
	_, err = admin.SaveItem(ctx, events.ItemRequest{Scope: events.MemoryScopeTenant,
		Item: events.MemoryItem{Scope: events.ScopeUser, Kind: events.ItemFact, Key: "fiscal-year", Content: "The fiscal year starts in April.", Confidence: 1}})
	must("tenant item", err)

	// An agent credential cannot write the tenant scope: the server drops
	// the request on tenant.append, and append refuses the scope.
	short := newClient(agentNC, "agent-a", 300*time.Millisecond)
	if _, err := short.Append(ctx, events.AppendRequest{Scope: events.MemoryScopeTenant, Content: "Agents may rewrite the team rules."}); err == nil {
		t.Fatal("an agent credential wrote the tenant scope")
	}
	rep, err := agentNC.Request("memrpc.acme.append", []byte(`{"scope":"tenant","content":"Agents may rewrite the team rules."}`), 10*time.Second)
	must("raw append", err)
	if code, msg := rep.Header.Get(micro.ErrorCodeHeader), rep.Header.Get(micro.ErrorHeader); code != events.RPCCodeBadRequest || !strings.Contains(msg, events.EndpointTenantAppend) {
		t.Fatalf("append of scope tenant: %s %s", code, msg)
	}
	// The tenant endpoints write the tenant scope only.
	rep, err = adminNC.Request("memrpc.acme.tenant.append", []byte(`{"scope":"agent","agent_id":"agent-a","content":"Agents may rewrite the team rules."}`), 10*time.Second)
	must("raw tenant.append", err)
	if code := rep.Header.Get(micro.ErrorCodeHeader); code != events.RPCCodeBadRequest {
		t.Fatalf("tenant.append of scope agent: %q %s", code, rep.Data)
	}
	// Nor reach a shared scope through its owner id, nor name an unknown scope.
	for _, bad := range []func() error{
		func() error {
			_, err := agentA.Append(ctx, events.AppendRequest{UserID: events.TenantOwner, Content: "Agents may rewrite the team rules."})
			return err
		},
		func() error {
			_, err := agentA.Update(ctx, events.UpdateRequest{UserID: events.AgentOwner("agent-b"), ID: "m1", Text: "Agents may rewrite the team rules."})
			return err
		},
		func() error {
			_, err := agentA.Add(ctx, events.AddRequest{UserID: "alice", Scope: "team", Text: "Agents may rewrite the team rules."})
			return err
		},
	} {
		if err := bad(); !errors.Is(err, client.ErrBadRequest) {
			t.Errorf("want a bad request, got %v", err)
		}
	}

	query := "where are the invoices kept, how are they exported and archived, when does the fiscal year start"
	pack, err := agentA.Context(ctx, events.ContextRequest{UserID: "alice", Query: query, RecordHits: events.NoHits()})
	must("alice's context", err)
	must("alice's pack is valid", pack.Validate())
	got := scopeTexts(pack)
	for scope, want := range map[events.MemoryScope][]string{
		events.MemoryScopeUser:   {"blue folder"},
		events.MemoryScopeAgent:  {"utf8 flag", "timezone"},
		events.MemoryScopeTenant: {"ninety days", "April"},
	} {
		for _, w := range want {
			if !holds(got[scope], w) {
				t.Errorf("alice's pack through agent-a: %q is not in scope %s: %q", w, scope, got[scope])
			}
		}
	}
	for _, leak := range []string{"red folder", "legacy parser", "rewrite the team rules"} {
		if strings.Contains(pack.Prompt, leak) {
			t.Errorf("alice's pack through agent-a holds %q:\n%s", leak, pack.Prompt)
		}
	}
	for _, heading := range []string{"## Agent knowledge", "## Tenant knowledge"} {
		if !strings.Contains(pack.Prompt, heading) {
			t.Errorf("prompt has no %q section:\n%s", heading, pack.Prompt)
		}
	}

	// Without an agent id: the user's memory and the tenant's.
	pack, err = anonymous.Context(ctx, events.ContextRequest{UserID: "bob", Query: query, RecordHits: events.NoHits()})
	must("bob's context", err)
	got = scopeTexts(pack)
	if len(pack.AgentItems) != 0 || !holds(got[events.MemoryScopeUser], "red folder") || !holds(got[events.MemoryScopeTenant], "ninety days") {
		t.Errorf("bob's pack without an agent: %q", got)
	}
	if strings.Contains(pack.Prompt, "blue folder") {
		t.Errorf("bob's pack holds alice's memory:\n%s", pack.Prompt)
	}

	found, err := agentA.Search(ctx, events.SearchRequest{UserID: "alice", Query: "invoices"})
	must("search", err)
	byScope := map[events.MemoryScope][]string{}
	for _, r := range found.Results {
		byScope[r.Scope] = append(byScope[r.Scope], r.Text)
	}
	if !holds(byScope[events.MemoryScopeUser], "blue folder") || !holds(byScope[events.MemoryScopeAgent], "utf8 flag") ||
		!holds(byScope[events.MemoryScopeTenant], "ninety days") || holds(byScope[events.MemoryScopeUser], "red folder") ||
		holds(byScope[events.MemoryScopeAgent], "legacy parser") {
		t.Errorf("alice's search through agent-a by scope: %q", byScope)
	}

	// A tenant export holds the shared scopes, under their owner ids.
	info, err := admin.Export(ctx, events.ExportRequest{Part: events.ExportInfo})
	must("export info", err)
	for _, owner := range []string{"alice", "bob", events.AgentOwner("agent-a"), events.AgentOwner("agent-b"), events.TenantOwner} {
		if !slices.Contains(info.Users, owner) {
			t.Errorf("export lists %q, not %s", info.Users, owner)
		}
	}

	// Forgetting alice erases her memory, not what she shares with others.
	_, err = admin.Forget(ctx, "alice")
	must("forget alice", err)
	pack, err = agentA.Context(ctx, events.ContextRequest{UserID: "alice", Query: query, RecordHits: events.NoHits()})
	must("context after forget", err)
	got = scopeTexts(pack)
	if holds(got[events.MemoryScopeUser], "blue folder") || !holds(got[events.MemoryScopeAgent], "utf8 flag") || !holds(got[events.MemoryScopeTenant], "ninety days") {
		t.Errorf("after forgetting alice: %q", got)
	}
}

// A user's fact and a tenant fact that say the same stay two records: adding
// one does not decline the other as known, and consolidating the user merges
// nothing across scopes.
func TestConsolidationKeepsScopesApart(t *testing.T) {
	stack, _ := apptest.Up(t)
	ctx := context.Background()
	cl := apptest.Client(t, stack, "acme")
	const fact = "The office closes at six on Fridays."
	user, err := cl.Add(ctx, events.AddRequest{UserID: "carol", Text: fact, MemoryType: events.MemoryEpisodic})
	if err != nil || len(user.MemoryIDs) != 1 {
		t.Fatalf("user add: %v %v", user, err)
	}
	shared, err := cl.Add(ctx, events.AddRequest{UserID: "carol", Scope: events.MemoryScopeTenant, Text: fact, MemoryType: events.MemoryEpisodic})
	if err != nil || len(shared.MemoryIDs) != 1 {
		t.Fatalf("tenant add of the same fact: %v %v", shared, err)
	}
	if _, err := cl.Consolidate(ctx, events.ConsolidateRequest{UserID: "carol"}); err != nil {
		t.Fatal(err)
	}
	apptest.WaitIdle(t, stack)
	found, err := cl.Search(ctx, events.SearchRequest{UserID: "carol", Query: "when does the office close on Fridays", MemoryTypes: []events.MemoryType{events.MemoryEpisodic}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]events.MemoryScope{}
	for _, r := range found.Results {
		if r.Text == fact {
			got[r.ID] = r.Scope
		}
	}
	want := map[string]events.MemoryScope{user.MemoryIDs[0]: events.MemoryScopeUser, shared.MemoryIDs[0]: events.MemoryScopeTenant}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("records of the fact after consolidation: %v, want %v", got, want)
	}
}

// Many agents appending to one user's memory at once, each also to its own
// agent scope, through the retriever's write log: every note is in the
// user's MEMORY.md exactly once, and each agent's scope holds its own
// procedure and no other agent's.
func TestConcurrentAgentsLoseNothing(t *testing.T) {
	apptest.LimitChecks(t, 3)
	stack, _ := apptest.Up(t)
	nc, err := nats.Connect(stack.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	ctx := context.Background()
	round := 0
	rapid.Check(t, func(rt *rapid.T) {
		round++
		user := fmt.Sprintf("user-%d", round)
		n := rapid.IntRange(50, 64).Draw(rt, "writers")
		words := rapid.SliceOfN(rapid.StringMatching(`[a-z]{3,8}`), n, n).Draw(rt, "words")
		clients := make([]*client.Client, n)
		for i := range clients {
			if clients[i], err = client.New(nc, client.Config{Tenant: "acme", AgentID: fmt.Sprintf("writer-%d", i)}); err != nil {
				rt.Fatal(err)
			}
		}
		note := func(i int) string { return fmt.Sprintf("note %d of round %d says %s.", i, round, words[i]) }
		procedure := func(i int) string { return fmt.Sprintf("procedure of writer %d in round %d.", i, round) }
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i, cl := range clients {
			wg.Go(func() {
				if _, err := cl.Append(ctx, events.AppendRequest{UserID: user, Content: note(i)}); err != nil {
					errs[i] = err
					return
				}
				_, errs[i] = cl.Append(ctx, events.AppendRequest{Scope: events.MemoryScopeAgent, Content: procedure(i)})
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			rt.Fatal(err)
		}
		pack, err := clients[0].Context(ctx, events.ContextRequest{UserID: user, RecordHits: events.NoHits()})
		if err != nil || pack.Core == nil {
			rt.Fatalf("context: %v", err)
		}
		for i := range n {
			if c := strings.Count(pack.Core.Text, note(i)); c != 1 {
				rt.Fatalf("%q is %d times in %s's MEMORY.md:\n%s", note(i), c, user, pack.Core.Text)
			}
		}
		i := rapid.IntRange(0, n-1).Draw(rt, "agent read")
		pack, err = clients[i].Context(ctx, events.ContextRequest{UserID: user, RecordHits: events.NoHits()})
		if err != nil {
			rt.Fatal(err)
		}
		own := scopeTexts(pack)[events.MemoryScopeAgent]
		if !holds(own, procedure(i)) {
			rt.Fatalf("writer %d's scope lacks its procedure: %q", i, own)
		}
		for j := range n {
			if j != i && holds(own, procedure(j)) {
				rt.Fatalf("writer %d's scope holds writer %d's procedure: %q", i, j, own)
			}
		}
	})
}

// The inspector lists the shared scopes beside the users, labelled, and its
// context page shows an agent's and the tenant's entries in sections of their
// own and every search result's scope.
func TestInspectorShowsScopes(t *testing.T) {
	addr := bustest.FreeAddr(t)
	stack, _ := apptest.Up(t, "AGENTMEM_HTTP_LISTEN="+addr, "AGENTMEM_HTTP_UI=true")
	ctx := context.Background()
	cl := apptest.Client(t, stack, "acme")
	for _, req := range []events.AppendRequest{
		{UserID: "u1", Content: "U1 files invoices by quarter."},
		{Scope: events.MemoryScopeAgent, AgentID: "billing", Content: "Billing exports invoices as UTF-8 CSV."},
		{Scope: events.MemoryScopeTenant, Content: "Invoices are archived after ninety days."},
	} {
		if _, err := cl.Append(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	get := func(path string) string {
		t.Helper()
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, body)
		}
		return string(body)
	}
	page := get("/ui/t/acme/")
	for _, want := range []string{">__agent_billing</a> <small class=\"scope\">(agent scope)</small>", ">__tenant</a> <small class=\"scope\">(tenant scope)</small>", ">u1</a><"} {
		if !strings.Contains(page, want) {
			t.Errorf("tenant page lacks %q:\n%s", want, page)
		}
	}
	page = get("/ui/t/acme/u/u1/search?q=invoices&agent=billing")
	for _, want := range []string{"agent scope <small>", "tenant scope <small>", `<td class="scope">agent</td>`, `<td class="scope">tenant</td>`, `<td class="scope">user</td>`, "UTF-8 CSV", "ninety days"} {
		if !strings.Contains(page, want) {
			t.Errorf("context page lacks %q:\n%s", want, page)
		}
	}
}
