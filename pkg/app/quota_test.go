package app_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/app/apptest"
	"github.com/agentmem/agentmem/pkg/bus"
	"github.com/agentmem/agentmem/pkg/client"
	"github.com/agentmem/agentmem/pkg/docstore"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// Issue 32.6 through the whole stack: a noisy tenant sends observations far
// faster than its quotas.events_per_second beside a quiet tenant without a
// quota. Each of the noisy tenant's observations is either stored (in its
// session's state) or dead-lettered by ingest with class quota and a reason
// naming the key, never both, never neither; every one of the quiet tenant's
// is stored and none is dead-lettered.
func TestNoisyTenantOverItsRateIsDeadLetteredQuietTenantStored(t *testing.T) {
	const burst, noisyN, quietN = 5, 40, 20
	stack, _ := apptest.Up(t, fmt.Sprintf(`AGENTMEM_QUOTAS_TENANTS={"noisy":{"events_per_second":1,"events_burst":%d}}`, burst))
	noisy, quiet := apptest.Client(t, stack, "noisy"), apptest.Client(t, stack, "quiet")
	ctx := context.Background()
	var noisyIDs, quietIDs []string
	for i := range noisyN {
		id, err := noisy.Say(ctx, "u1", "s1", events.RoleUser, fmt.Sprintf("noisy message %d about spreadsheets", i), nil)
		if err != nil {
			t.Fatal(err)
		}
		noisyIDs = append(noisyIDs, id)
		if i%2 == 0 {
			id, err := quiet.Say(ctx, "u1", "s1", events.RoleUser, fmt.Sprintf("quiet message %d about charts", i), nil)
			if err != nil {
				t.Fatal(err)
			}
			quietIDs = append(quietIDs, id)
		}
	}
	apptest.WaitIdle(t, stack)

	rt := stack.Runtime()
	dls, err := bus.ListDeadLetters(ctx, rt.JS, bus.DefaultDLQStream, 1000)
	if err != nil {
		t.Fatal(err)
	}
	refused := map[string]int{} // event id → dead letters
	for _, dl := range dls {
		env, err := events.Decode(dl.Data)
		if err != nil {
			t.Fatalf("dead letter %d does not decode: %v", dl.Seq, err)
		}
		refused[env.ID]++
		if env.Tenant != "noisy" || dl.Worker != bus.WorkerIngest || dl.Class != bus.ClassQuota ||
			!strings.Contains(dl.Reason, "quotas.tenants.noisy.events_per_second") {
			t.Errorf("dead letter of %s's %s by %s: class %q, reason %q; want only noisy's, by ingest, class quota naming the key",
				env.Tenant, env.ID, dl.Worker, dl.Class, dl.Reason)
		}
	}
	applied := func(tenant string) map[string]bool {
		st, err := rt.Sessions.Get(ctx, tenant, "u1", "s1")
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for _, a := range st.Applied {
			id, _, _ := strings.Cut(a, " ")
			out[id] = true
		}
		return out
	}
	quietStored, noisyStored := applied("quiet"), applied("noisy")
	for _, id := range quietIDs {
		if !quietStored[id] || refused[id] > 0 {
			t.Errorf("quiet tenant's %s: stored %v, dead-lettered %d times; want stored only", id, quietStored[id], refused[id])
		}
	}
	nStored := 0
	for _, id := range noisyIDs {
		if noisyStored[id] == (refused[id] == 1) || refused[id] > 1 {
			t.Errorf("noisy tenant's %s: stored %v, dead-lettered %d times; want exactly one of them", id, noisyStored[id], refused[id])
		}
		if noisyStored[id] {
			nStored++
		}
	}
	// The bucket holds burst; publishing took well under the seconds that
	// would refill it for the rest.
	if nStored < burst || nStored > noisyN/2 {
		t.Errorf("noisy tenant: %d of %d stored, want at least the burst %d and far from all", nStored, noisyN, burst)
	}
}

// Issue 32.6: a tenant at its memories or markdown_bytes quota is refused
// writes that grow them with 429 naming the key, through the retriever (add,
// item.save, append) and through ingest (its observations' episodes are
// dead-lettered with class quota), while another tenant writes as before and
// a delete still makes room.
func TestTenantAtItsHeldQuotasIsRefused(t *testing.T) {
	stack, _ := apptest.Up(t, `AGENTMEM_QUOTAS_TENANTS={"small":{"memories":2,"markdown_bytes":100}}`, "AGENTMEM_NATS_STREAM_DLQ_MAX_AGE=168h")
	small, other := apptest.Client(t, stack, "small"), apptest.Client(t, stack, "other")
	ctx := context.Background()
	over := func(what, key string, err error) {
		t.Helper()
		var ce *client.Error
		if !errors.Is(err, client.ErrQuota) || !errors.As(err, &ce) || ce.Code != events.RPCCodeQuota || !strings.Contains(ce.Message, key) {
			t.Errorf("%s: %v, want 429 naming %s", what, err, key)
		}
	}
	var ids []string
	for _, text := range []string{"I keep invoices in invoices.xlsx", "My manager is Dana"} {
		reply, err := small.Add(ctx, events.AddRequest{UserID: "u1", Text: text})
		if err != nil {
			t.Fatalf("add within quota: %v", err)
		}
		ids = append(ids, reply.MemoryIDs...)
	}
	// A retry of the add that reached the quota is answered as the retry it is.
	if reply, err := small.Add(ctx, events.AddRequest{UserID: "u1", Text: "My manager is Dana"}); err != nil || !slices.Equal(reply.MemoryIDs, ids[1:]) {
		t.Errorf("retried add at the quota: %v %v, want the first answer %v", reply.MemoryIDs, err, ids[1:])
	}
	_, err := small.Add(ctx, events.AddRequest{UserID: "u2", Text: "I prefer pie charts"})
	over("third add (another user, same tenant)", "quotas.tenants.small.memories", err)
	_, err = small.SaveItem(ctx, events.ItemRequest{UserID: "u1", Item: events.MemoryItem{Scope: events.ScopeUser, Kind: events.ItemNote, Key: "k", Content: "x", Confidence: 1}})
	over("item.save", "quotas.tenants.small.memories", err)
	if _, err := other.Add(ctx, events.AddRequest{UserID: "u1", Text: "I prefer pie charts"}); err != nil {
		t.Errorf("another tenant's add: %v", err)
	}

	if _, err := small.Append(ctx, events.AppendRequest{UserID: "u1", Content: strings.Repeat("a", 60)}); err != nil {
		t.Fatalf("append within quota: %v", err)
	}
	_, err = small.Append(ctx, events.AppendRequest{UserID: "u1", Content: strings.Repeat("b", 60)})
	over("append past markdown_bytes", "quotas.tenants.small.markdown_bytes", err)
	if _, err := other.Append(ctx, events.AppendRequest{UserID: "u1", Content: strings.Repeat("b", 600)}); err != nil {
		t.Errorf("another tenant's append: %v", err)
	}

	// Ingest: an episode the small tenant would keep is refused; the other's stored.
	smallID, err := small.Say(ctx, "u1", "s1", events.RoleUser, "Remember: my vault is in room 12.", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Say(ctx, "u1", "s1", events.RoleUser, "Remember: my vault is in room 12.", nil); err != nil {
		t.Fatal(err)
	}
	apptest.WaitIdle(t, stack)
	dls, err := bus.ListDeadLetters(ctx, stack.Runtime().JS, bus.DefaultDLQStream, 100)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, dl := range dls {
		env, _ := events.Decode(dl.Data)
		got = append(got, fmt.Sprintf("%s %s %s %s", env.Tenant, env.ID, dl.Worker, dl.Class))
		if !strings.Contains(dl.Reason, "quotas.tenants.small.memories") {
			t.Errorf("dead letter reason %q does not name the key", dl.Reason)
		}
	}
	if want := []string{"small " + smallID + " ingest quota"}; !slices.Equal(got, want) {
		t.Errorf("dead letters %q, want %q", got, want)
	}

	// Retention: the dead letters of a flood are not kept forever when so set.
	dlq, err := stack.Runtime().JS.Stream(ctx, bus.DefaultDLQStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := dlq.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Config.MaxAge != 168*time.Hour {
		t.Errorf("dead-letter stream max age %s, want nats.stream.dlq_max_age 168h", info.Config.MaxAge)
	}

	// A delete makes room again: the refused observation, replayed from the
	// dead letters (dlq replay --reason quota), takes it, and the next add is
	// refused once more.
	if _, err := small.Delete(ctx, events.DeleteRequest{UserID: "u1", IDs: ids[:1]}); err != nil {
		t.Fatal(err)
	}
	for _, dl := range bus.SelectDeadLetters(dls, bus.ClassQuota) {
		if err := bus.ReplayDeadLetter(ctx, stack.Runtime().JS, dl); err != nil {
			t.Fatal(err)
		}
	}
	apptest.WaitIdle(t, stack)
	texts := memoryTexts(t, stack.Runtime().Vectors, "small", "u1")
	if len(texts) != 2 || texts[0] != "My manager is Dana" || !strings.Contains(texts[1], "vault is in room 12") {
		t.Errorf("small's memories after the delete and the replay: %q, want Dana's and the replayed vault episode", texts)
	}
	if left, err := bus.ListDeadLetters(ctx, stack.Runtime().JS, bus.DefaultDLQStream, 100); err != nil || len(left) != 0 {
		t.Errorf("dead letters after the replay: %d (%v), want none", len(left), err)
	}
	_, err = small.Add(ctx, events.AddRequest{UserID: "u1", Text: "I prefer pie charts"})
	over("add once the replay took the room", "quotas.tenants.small.memories", err)
}

// Issue 32.6: import and session.restore grow a tenant's memories and
// Markdown bytes like add and append do, and are refused the same way: 429
// naming the key, nothing of the refused page or archive stored (no record,
// no file, no item, no republished event), while another tenant's identical
// requests are applied; once a delete makes room the restore is applied.
func TestImportAndSessionRestoreAreQuotaChecked(t *testing.T) {
	stack, _ := apptest.Up(t, `AGENTMEM_QUOTAS_TENANTS={"small":{"memories":2,"markdown_bytes":100}}`)
	rt := stack.Runtime()
	small, other := apptest.Client(t, stack, "small"), apptest.Client(t, stack, "other")
	ctx := context.Background()
	over := func(what, key string, err error) {
		t.Helper()
		var ce *client.Error
		if !errors.As(err, &ce) || ce.Code != events.RPCCodeQuota || !strings.Contains(ce.Message, key) {
			t.Errorf("%s: %v, want 429 naming %s", what, err, key)
		}
	}
	texts := func(tenant, user string) []string { return memoryTexts(t, rt.Vectors, tenant, user) }
	record := func(n int, text string) events.Record {
		return events.Record{ID: fmt.Sprintf("00000000-0000-4000-8000-%012d", n), MemoryType: events.MemorySemantic, Text: text, TS: time.Now().UTC()}
	}
	added, err := small.Add(ctx, events.AddRequest{UserID: "u1", Text: "My manager is Dana"})
	if err != nil {
		t.Fatal(err)
	}

	// Import: two records where one fits is refused whole; so is a file past
	// markdown_bytes; a page within both is applied.
	twoRecords := events.ImportRequest{UserID: "u2", Reembed: true, Records: []events.Record{record(1, "I keep invoices in invoices.xlsx"), record(2, "I prefer pie charts")}}
	_, err = small.Import(ctx, twoRecords)
	over("import of two records with room for one", "quotas.tenants.small.memories", err)
	bigFile := events.ImportRequest{UserID: "u2", Files: []events.FileChunk{{Name: "MEMORY.md", Data: []byte(strings.Repeat("m", 150))}}}
	_, err = small.Import(ctx, bigFile)
	over("import of a file past markdown_bytes", "quotas.tenants.small.markdown_bytes", err)
	if got := texts("small", "u2"); len(got) != 0 {
		t.Errorf("small's u2 after the refused imports: %q, want nothing", got)
	}
	if data, err := rt.Docs.ReadFile(ctx, docstore.Namespace{Tenant: "small", User: "u2"}, "MEMORY.md"); err == nil {
		t.Errorf("small's u2 MEMORY.md after the refused import: %q, want none", data)
	}
	fits := events.ImportRequest{UserID: "u2", Reembed: true, Records: []events.Record{record(3, "My desk is on floor 4")},
		Files: []events.FileChunk{{Name: "MEMORY.md", Data: []byte("# Memory\n- desk on floor 4\n")}}}
	if _, err := small.Import(ctx, fits); err != nil {
		t.Fatalf("import within the quotas: %v", err)
	}
	if got := texts("small", "u2"); !slices.Equal(got, []string{"My desk is on floor 4"}) {
		t.Errorf("small's u2 after the import within quota: %q", got)
	}
	for _, req := range []events.ImportRequest{twoRecords, bigFile} {
		if _, err := other.Import(ctx, req); err != nil {
			t.Errorf("another tenant's import: %v", err)
		}
	}
	if got := texts("other", "u2"); !slices.Equal(got, []string{"I keep invoices in invoices.xlsx", "I prefer pie charts"}) {
		t.Errorf("other's u2 after its imports: %q", got)
	}

	// session.restore: an archive whose item does not fit is refused before
	// its events are republished.
	archive := func(tenant string) events.SessionArchive {
		env := events.New(events.TypeObservation, tenant, "u3", "", "s9")
		env.Observation = &events.Observation{Kind: events.KindMessage, Role: events.RoleUser, Text: "Let us plan the offsite"}
		return events.SessionArchive{SchemaVersion: events.SchemaVersion, Tenant: tenant, UserID: "u3", SessionID: "s9", ArchivedTS: time.Now().UTC(),
			Events: []events.Envelope{env},
			Items:  []events.MemoryItem{{Scope: events.ScopeSession, SessionID: "s9", Kind: events.ItemGoal, Key: "offsite", Content: "plan the offsite", Confidence: 0.9}}}
	}
	restored := func(cl *client.Client, tenant string) (items []string, evs int) {
		t.Helper()
		list, err := cl.ListItems(ctx, events.ItemScopeRequest{UserID: "u3", Scope: events.ScopeSession, SessionID: "s9"})
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range list.Items {
			items = append(items, it.Content)
		}
		n, err := rt.Events.CountSession(ctx, tenant, "u3", "s9")
		if err != nil {
			t.Fatal(err)
		}
		return items, n
	}
	smallArchive := archive("small")
	_, err = small.RestoreSession(ctx, smallArchive)
	over("session.restore of an item past memories", "quotas.tenants.small.memories", err)
	if items, n := restored(small, "small"); len(items) != 0 || n != 0 {
		t.Errorf("small's session after the refused restore: items %q, %d events; want none", items, n)
	}
	if _, err := other.RestoreSession(ctx, archive("other")); err != nil {
		t.Errorf("another tenant's restore: %v", err)
	}
	if items, n := restored(other, "other"); !slices.Equal(items, []string{"plan the offsite"}) || n != 1 {
		t.Errorf("other's session after its restore: items %q, %d events; want the item and the event", items, n)
	}
	if _, err := small.Delete(ctx, events.DeleteRequest{UserID: "u1", IDs: added.MemoryIDs}); err != nil {
		t.Fatal(err)
	}
	if _, err := small.RestoreSession(ctx, smallArchive); err != nil {
		t.Fatalf("restore once a delete made room: %v", err)
	}
	if items, n := restored(small, "small"); !slices.Equal(items, []string{"plan the offsite"}) || n != 1 {
		t.Errorf("small's session after the restore with room: items %q, %d events; want the item and the event", items, n)
	}
}

// memoryTexts are the texts of the user's vector memories, sorted.
func memoryTexts(t *testing.T, vectors vectorstore.Store, tenant, user string) []string {
	t.Helper()
	recs, _, err := vectors.Scroll(context.Background(), vectorstore.Filter{Tenant: tenant, UserID: user, IncludeExpired: true}, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range recs {
		out = append(out, r.Text)
	}
	slices.Sort(out)
	return out
}
