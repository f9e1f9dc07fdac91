package app_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/bus/bustest"
	"github.com/agentmem/agentmem/pkg/records"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

func (r rig) count(t *testing.T, user string, types ...vectorstore.MemoryType) int {
	t.Helper()
	n, err := r.stack.Runtime().Vectors.Count(context.Background(), vectorstore.Filter{Tenant: "acme", UserID: user, MemoryTypes: types})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func (r rig) observeAt(t *testing.T, user, session, text string, ts time.Time) {
	t.Helper()
	env := events.New(events.TypeObservation, "acme", user, "bot", session)
	env.TS = ts
	env.Observation = &events.Observation{Role: events.RoleUser, Text: text}
	if err := r.client.Publish(context.Background(), env); err != nil {
		t.Fatal(err)
	}
}

// Issue 4, through a real nats-server and every component: a personal "remember"
// becomes an episodic memory (chit-chat and knowledge questions do not); the same fact
// told in two chats within 7 days is merged by the consolidate RPC (count drops by
// exactly one, source_chat_ids holds both chats); a context request returns it and
// its hit_count becomes 1; reset leaves zero for that user and others untouched.
func TestEpisodicMemoryLifecycle(t *testing.T) {
	r := upStack(t)
	ctx := context.Background()
	t0 := time.Now().UTC().Add(-72 * time.Hour).Truncate(time.Second)
	r.observeAt(t, "u1", "c1", "Remember, I'm a student at Peking University", t0)
	r.observeAt(t, "u1", "c1", "hi!", t0.Add(time.Minute))
	r.observeAt(t, "u1", "c1", "what is the capital of France?", t0.Add(2*time.Minute))
	r.observeAt(t, "u1", "c2", "Remember, I'm a student at Peking University", t0.Add(48*time.Hour))
	r.observeAt(t, "u2", "c9", "Remember, I live in Lisbon", t0)
	r.waitIdle(t)

	if n := r.count(t, "u1", vectorstore.Episodic); n != 2 {
		t.Fatalf("episodic memories of u1 = %d, want 2 (one per chat; greeting and question not written)", n)
	}
	recs, _, err := r.stack.Runtime().Vectors.Scroll(ctx, vectorstore.Filter{Tenant: "acme", UserID: "u1", MemoryTypes: []vectorstore.MemoryType{vectorstore.Episodic}}, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range recs {
		if rec.Who != "user" {
			t.Fatalf("who = %q, want user", rec.Who)
		}
	}

	reply, err := r.client.Consolidate(ctx, events.ConsolidateRequest{UserID: "u1"})
	if err != nil {
		t.Fatal(err)
	}
	if reply.Merged != 1 || r.count(t, "u1", vectorstore.Episodic) != 1 {
		t.Fatalf("consolidate = %+v, episodic now %d; want exactly one merge leaving 1", reply, r.count(t, "u1", vectorstore.Episodic))
	}
	merged, _, err := r.stack.Runtime().Vectors.Scroll(ctx, vectorstore.Filter{Tenant: "acme", UserID: "u1", MemoryTypes: []vectorstore.MemoryType{vectorstore.Episodic}}, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	chats := fmt.Sprint(merged[0].Metadata[records.MetaSourceChatIDs])
	if chats != "[c1 c2]" || !merged[0].TS.Equal(t0) {
		t.Fatalf("merged record: source_chat_ids %s, ts %v; want [c1 c2] and the earliest time %v", chats, merged[0].TS, t0)
	}

	pack, err := r.client.Context(ctx, events.ContextRequest{UserID: "u1", SessionID: "c3", Query: "where do I study?"})
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, 0, len(pack.EpisodicItems))
	for _, it := range pack.EpisodicItems {
		ids = append(ids, it.ID)
	}
	if !slices.Contains(ids, merged[0].ID) {
		t.Fatalf("context pack episodic items %v lack the merged memory %s", ids, merged[0].ID)
	}
	bustest.Eventually(t, 20*time.Second, func() error {
		m, err := r.client.Get(ctx, events.GetRequest{UserID: "u1", ID: merged[0].ID})
		if err != nil {
			return err
		}
		if m.HitCount != 1 {
			return fmt.Errorf("hit_count = %d, want 1", m.HitCount)
		}
		return nil
	})
	r.waitIdle(t)
	if m, err := r.client.Get(ctx, events.GetRequest{UserID: "u1", ID: merged[0].ID}); err != nil || m.HitCount != 1 {
		t.Fatalf("after the pipeline drained: hit_count = %d, %v; want exactly 1", m.HitCount, err)
	}

	before := r.count(t, "u2")
	reset, err := r.client.Reset(ctx, events.ResetRequest{UserID: "u1"})
	if err != nil {
		t.Fatal(err)
	}
	if reset.Deleted < 1 || r.count(t, "u1") != 0 {
		t.Fatalf("reset deleted %d, %d left; want all of u1's memories gone", reset.Deleted, r.count(t, "u1"))
	}
	if before == 0 || r.count(t, "u2") != before {
		t.Fatalf("u2 had %d memories, now %d: reset must not touch other users", before, r.count(t, "u2"))
	}
}
