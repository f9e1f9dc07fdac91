package app_test

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	dto "github.com/prometheus/client_model/go"
	"pgregory.net/rapid"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/app"
	"github.com/agentmem/agentmem/pkg/app/apptest"
	"github.com/agentmem/agentmem/pkg/natsauth"
)

// The reply-subject injection of issue 30, through `up --auth` with real
// credentials: tenant B requests each endpoint of its own tenant with a reply
// subject aimed at tenant A (A's RPC subjects, A's stream subjects, A's session
// in KV, the JetStream API, A's inbox). The retriever refuses every such request
// (counted in agentmem_rpc_refused_replies_total) and A's memory, stream
// subjects, session state and inbox are unchanged; B's requests with its own
// inbox are still answered.
func TestRepliesNeverLeaveTheRequestersInbox(t *testing.T) {
	stack, _, auth := apptest.UpAuth(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	credsA := apptest.Creds(t, auth, "acme", natsauth.RoleAdmin)
	acme, ncA := apptest.CredsClient(t, stack, credsA, "acme")
	added, err := acme.Add(ctx, events.AddRequest{UserID: "u1", Text: "My sales.csv has columns date, product and qty.", MemoryType: events.MemorySemantic})
	if err != nil || len(added.MemoryIDs) == 0 {
		t.Fatalf("acme adds a memory: %v %v", added, err)
	}
	if _, err := acme.Say(ctx, "u1", "s1", events.RoleUser, "The quarterly report is due on Friday.", nil); err != nil {
		t.Fatal(err)
	}
	apptest.WaitIdle(t, stack)
	idA, err := natsauth.InspectFile(credsA)
	if err != nil {
		t.Fatal(err)
	}
	inboxA, err := ncA.SubscribeSync(idA.InboxPrefix + ".victim")
	if err != nil {
		t.Fatal(err)
	}
	sessionKey, err := events.SessionKey("acme", "u1", "s1")
	if err != nil {
		t.Fatal(err)
	}

	js := stack.Runtime().JS
	sessions, err := js.KeyValue(ctx, "agentmem_sessions")
	if err != nil {
		t.Fatal(err)
	}
	stream, err := js.Stream(ctx, "AGENTMEM")
	if err != nil {
		t.Fatal(err)
	}
	// acmeState is what B aims at: A's memories by id, the messages on each of
	// A's stream subjects, A's session state's revision.
	type acmeState struct {
		memories map[string]string
		subjects map[string]uint64
		session  uint64
	}
	snapshot := func(t rapid.TB) acmeState {
		st := acmeState{memories: map[string]string{}}
		for _, id := range added.MemoryIDs {
			m, err := acme.Get(ctx, events.GetRequest{UserID: "u1", ID: id})
			if err != nil {
				t.Fatalf("acme's memory %s: %v", id, err)
			}
			st.memories[id] = m.Text
		}
		info, err := stream.Info(ctx, jetstream.WithSubjectFilter("mem.acme.>"))
		if err != nil {
			t.Fatal(err)
		}
		st.subjects = info.State.Subjects
		e, err := sessions.Get(ctx, sessionKey)
		if err != nil {
			t.Fatalf("acme's session state: %v", err)
		}
		st.session = e.Revision()
		return st
	}
	before := snapshot(t)

	globex, ncB := apptest.CredsClient(t, stack, apptest.Creds(t, auth, "globex", natsauth.RoleAdmin), "globex")
	if _, err := globex.Search(ctx, events.SearchRequest{UserID: "u1", Query: "sales"}); err != nil {
		t.Fatalf("globex's own request on its own inbox: %v", err)
	}

	targets := []string{
		"mem.acme.obs.u1.s1", "mem.acme.ended.u1.s1", "mem.acme.write.u1",
		"$KV.agentmem_sessions." + sessionKey, "$JS.API.STREAM.PURGE.AGENTMEM", "$JS.API.STREAM.DELETE.AGENTMEM",
		inboxA.Subject,
	}
	for _, ep := range events.Endpoints {
		targets = append(targets, "memrpc.acme."+ep)
	}
	body := []byte(`{"user_id":"u1","session_id":"s1","query":"sales","text":"injected","id":"` + added.MemoryIDs[0] + `"}`)
	apptest.LimitChecks(t, 60)
	rapid.Check(t, func(t *rapid.T) {
		ep := rapid.SampledFrom(events.Endpoints).Draw(t, "endpoint")
		reply := rapid.SampledFrom(targets).Draw(t, "reply")
		was := refusedReplies(t, stack)
		if err := ncB.PublishMsg(&nats.Msg{Subject: "memrpc.globex." + ep, Reply: reply, Data: body}); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(10 * time.Second); refusedReplies(t, stack) == was; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the retriever did not refuse memrpc.globex.%s with reply %s", ep, reply)
			}
		}
		after := snapshot(t)
		if !maps.Equal(after.memories, before.memories) || !maps.Equal(after.subjects, before.subjects) || after.session != before.session {
			t.Fatalf("acme changed after globex's %s replying to %s:\nbefore %+v\nafter  %+v", ep, reply, before, after)
		}
		if m, err := inboxA.NextMsg(time.Millisecond); err == nil {
			t.Fatalf("acme's inbox got %q", m.Data)
		}
	})
}

// refusedReplies is agentmem_rpc_refused_replies_total summed over endpoints.
func refusedReplies(t rapid.TB, stack *app.Stack) float64 {
	families, err := stack.Runtime().Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(families, func(f *dto.MetricFamily) bool { return f.GetName() == "agentmem_rpc_refused_replies_total" })
	if i < 0 {
		return 0
	}
	var n float64
	for _, m := range families[i].GetMetric() {
		n += m.GetCounter().GetValue()
	}
	return n
}
