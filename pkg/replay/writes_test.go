package replay_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"pgregory.net/rapid"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/app"
	"github.com/agentmem/agentmem/pkg/app/apptest"
	"github.com/agentmem/agentmem/pkg/bus"
	"github.com/agentmem/agentmem/pkg/client"
	"github.com/agentmem/agentmem/pkg/diff"
	"github.com/agentmem/agentmem/pkg/docstore"
	"github.com/agentmem/agentmem/pkg/eventstore"
	"github.com/agentmem/agentmem/pkg/replay"
	"github.com/agentmem/agentmem/pkg/transfer"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// clientFor is a client of tenant on the live stack.
func (l *live) clientFor(t testing.TB, tenant string) *client.Client {
	t.Helper()
	cl, err := client.New(l.rt.Conn, client.Config{Tenant: tenant, AgentID: "bot"})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// idle waits until the live workers are done.
func (l *live) idle(t testing.TB, ctx context.Context) {
	t.Helper()
	if err := app.WaitIdle(ctx, l.rt.JS, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
}

func snapshot(t testing.TB, ctx context.Context, rt *app.Runtime, tenant, user string) diff.Snapshot {
	t.Helper()
	s, err := diff.Take(ctx, rt.Docs, rt.Vectors, tenant, user)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// replaysAsLive replays u1 of the live tenant into the shadow name with the live
// configuration, fails the test (saying what) unless its namespace equals before,
// and returns the replay's manifest.
func (l *live) replaysAsLive(t *testing.T, ctx context.Context, name string, before diff.Snapshot, what string) replay.Manifest {
	t.Helper()
	m, err := replay.Run(ctx, replay.Config{Root: l.root, Name: name, Tenant: tenant, User: "u1"}, l.rt.Events, nil)
	must(t, err)
	mustEmpty(t, diff.Compare("live", before, name, shadow(t, ctx, l.root, name, "u1", nil)), what)
	return m
}

func mustEmpty(t testing.TB, r diff.Result, what string) {
	t.Helper()
	if !r.Empty() {
		var b strings.Builder
		_ = r.Write(&b)
		t.Fatalf("%s:\n%s", what, b.String())
	}
}

// Issue 17 item 6: a replay of a namespace that used append, add and items
// reproduces them (before the writes were events, it reproduced only what the
// workers made of the conversation).
func TestReplayReproducesWrites(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	l := newLive(t, ctx)
	cl := l.clientFor(t, tenant)
	l.session(t, ctx, "u1", "s1", conversation...)
	_, err := cl.Append(ctx, events.AppendRequest{UserID: "u1", Content: "Quarter ends are busy: keep answers short.", Slot: events.SlotToday})
	must(t, err)
	_, err = cl.Append(ctx, events.AppendRequest{UserID: "u1", Content: "Reports go to finance@example.com."})
	must(t, err)
	added, err := cl.Add(ctx, events.AddRequest{UserID: "u1", Text: "The user's manager is Ana."})
	must(t, err)
	_, err = cl.Add(ctx, events.AddRequest{UserID: "u1", Text: "Invoices are due on the 5th.", MemoryType: events.MemorySemantic})
	must(t, err)
	_, err = cl.SaveItem(ctx, events.ItemRequest{UserID: "u1", Item: events.MemoryItem{Scope: events.ScopeUser, Kind: events.ItemPreference, Key: "tone", Content: "terse", Confidence: 0.9}})
	must(t, err)
	l.session(t, ctx, "u1", "s2", "I always export charts as PNG.", "PNG exports, noted.")
	before := snapshot(t, ctx, l.rt, tenant, "u1")
	if !strings.Contains(before.Files[docstore.MemoryFile], "finance@example.com") || !hasMemory(before, added.MemoryIDs[0]) {
		t.Fatalf("live namespace lacks the writes: %+v", before)
	}

	m := l.replaysAsLive(t, ctx, "writes", before, "a replay of a namespace that used append, add and items differs")
	if m.WritesApplied != 5 || m.WritesFailed != 0 {
		t.Fatalf("replay applied %d writes (%d failed), want 5", m.WritesApplied, m.WritesFailed)
	}
}

func hasMemory(s diff.Snapshot, id string) bool {
	for _, m := range s.Memories {
		if m.ID == id {
			return true
		}
	}
	return false
}

// A retried request (the same request as the previous write, inside the
// duplicate window) is one write event and is applied once, while the same
// request after another write is a write of its own; a write event that is in the stream twice (a
// producer's republish under another Nats-Msg-Id, a redelivery) is applied once
// by a replay; a write event that does not decode is dead-lettered by ingest with
// its reason, and neither the stack nor a replay stops on it.
func TestWriteEventsApplyOnceAndBadOnesAreDeadLettered(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	l := newLive(t, ctx)
	cl := l.clientFor(t, tenant)
	req := events.AppendRequest{UserID: "u1", Content: "Always cite the source sheet."}
	for range 2 {
		_, err := cl.Append(ctx, req)
		must(t, err)
	}
	writes, err := l.rt.Events.List(ctx, eventstore.Query{Tenant: tenant, User: "u1"}, 0, 0)
	must(t, err)
	if len(writes) != 1 || writes[0].Envelope.Type != events.TypeWrite {
		t.Fatalf("a retried append made %d events, want one write: %+v", len(writes), writes)
	}
	doc, err := l.rt.Docs.ReadFile(ctx, docstore.Namespace{Tenant: tenant, User: "u1"}, docstore.MemoryFile)
	must(t, err)
	if n := strings.Count(string(doc), req.Content); n != 1 {
		t.Fatalf("a retried append is in MEMORY.md %d times, want once:\n%s", n, doc)
	}

	// The same event again under another Nats-Msg-Id: the stream keeps both.
	msg, err := eventstore.Msg(writes[0].Envelope)
	must(t, err)
	msg.Header.Set(events.HeaderMsgID, "republished")
	_, err = l.rt.JS.PublishMsg(ctx, msg)
	must(t, err)
	// And one that does not decode, on a write subject.
	bad := nats.NewMsg("mem." + tenant + ".write.u1")
	bad.Data = []byte(`{"id":"x1","type":"write","schema_version":1,"ts":"2026-11-22T12:00:00Z","tenant":"acme","user_id":"u1","write":{"op":"append","request":{"user_id":"u2"}}}`)
	_, err = l.rt.JS.PublishMsg(ctx, bad)
	must(t, err)

	dl := waitDeadLetter(t, ctx, l.rt, bad.Subject)
	if dl.Class != bus.ClassMalformed || !strings.Contains(dl.Reason, "write.request") {
		t.Fatalf("dead letter %+v: want class malformed and a reason naming write.request", dl)
	}
	_, err = cl.Append(ctx, events.AppendRequest{UserID: "u1", Content: "Charts are PNG."})
	must(t, err) // the stack still serves
	// The first request again, after another write: a write of its own.
	_, err = cl.Append(ctx, req)
	must(t, err)
	doc, err = l.rt.Docs.ReadFile(ctx, docstore.Namespace{Tenant: tenant, User: "u1"}, docstore.MemoryFile)
	must(t, err)
	if n := strings.Count(string(doc), req.Content); n != 2 {
		t.Fatalf("an append repeated after another write is in MEMORY.md %d times, want twice:\n%s", n, doc)
	}

	before := snapshot(t, ctx, l.rt, tenant, "u1")
	m := l.replaysAsLive(t, ctx, "dup", before, "replay of a duplicated write differs")
	if m.WritesApplied != 3 {
		t.Fatalf("replay applied %d writes, want 3 (the duplicate once, the bad one not at all)", m.WritesApplied)
	}
}

func waitDeadLetter(t *testing.T, ctx context.Context, rt *app.Runtime, subject string) bus.DeadLetter {
	t.Helper()
	for {
		dls, err := bus.ListDeadLetters(ctx, rt.JS, bus.DefaultDLQStream, 100)
		must(t, err)
		for _, dl := range dls {
			if dl.Subject == subject {
				return dl
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no dead letter for %s: %v", subject, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Issue 17 item 6: random operations through every write endpoint (but
// backups.restore, whose default target depends on when workers ran, and
// session.clear, which deletes the events a rebuild would need), observations
// and session ends; then the derived stores are lost and rebuilt from the
// stream: the same Markdown, memories and items, and session state.
func TestRebuildRestoresWhatTheWritesAndWorkersMade(t *testing.T) {
	apptest.LimitChecks(t, 6) // each case runs the rebuild's own stack
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	l := newLive(t, ctx)
	dataDir := filepath.Dir(l.root)
	n := 0
	rapid.Check(t, func(rt *rapid.T) {
		n++
		ten := fmt.Sprintf("t%d", n)
		cl := l.clientFor(t, ten)
		users := []string{"u1", "u2"}
		var (
			ids      []string
			sessions [][2]string // user, session
		)
		for i := range rapid.IntRange(3, 12).Draw(rt, "ops") {
			user := rapid.SampledFrom(users).Draw(rt, "user")
			l.idle(t, ctx) // a write lands after what the workers made of the events before it
			text := rapid.SampledFrom([]string{"Prefers tabs.", "Reports go to finance.", "Fiscal year starts in April.", "Charts are PNG."}).Draw(rt, "text")
			var err error
			switch op := rapid.SampledFrom([]string{"session", "append", "add", "update", "delete", "reset", "item.save", "item.update", "item.delete", "item.delete_scope", "policy.set", "policy.rollback", "compress"}).Draw(rt, "op"); op {
			case "session":
				session := fmt.Sprintf("s%d", i)
				sessions = append(sessions, [2]string{user, session})
				for j, text := range conversation[:rapid.IntRange(2, len(conversation)).Draw(rt, "turns")] {
					role := events.RoleUser
					if j%2 == 1 {
						role = events.RoleAssistant
					}
					_, err = cl.Say(ctx, user, session, role, text, nil)
					must(t, err)
				}
				_, err = cl.EndSession(ctx, user, session)
			case "append":
				_, err = cl.Append(ctx, events.AppendRequest{UserID: user, Content: text, Slot: rapid.SampledFrom([]events.Slot{events.SlotToday, events.SlotLongTerm}).Draw(rt, "slot")})
			case "add":
				var r events.AddReply
				r, err = cl.Add(ctx, events.AddRequest{UserID: user, Text: text, MemoryType: rapid.SampledFrom([]events.MemoryType{events.MemoryEpisodic, events.MemorySemantic}).Draw(rt, "type")})
				ids = append(ids, r.MemoryIDs...)
			case "update", "delete":
				if len(ids) == 0 {
					continue
				}
				id := rapid.SampledFrom(ids).Draw(rt, "id")
				if op == "update" {
					_, err = cl.Update(ctx, events.UpdateRequest{UserID: user, ID: id, Text: text + " (updated)"})
				} else {
					_, err = cl.Delete(ctx, events.DeleteRequest{UserID: user, IDs: []string{id}})
				}
			case "reset":
				_, err = cl.Reset(ctx, events.ResetRequest{UserID: user})
			case "item.save", "item.update":
				it := events.MemoryItem{Scope: events.ScopeUser, Kind: events.ItemPreference, Key: rapid.SampledFrom([]string{"tone", "lang"}).Draw(rt, "key"), Content: text, Confidence: 0.8}
				if op == "item.save" {
					_, err = cl.SaveItem(ctx, events.ItemRequest{UserID: user, Item: it})
				} else {
					_, err = cl.UpdateItem(ctx, events.ItemRequest{UserID: user, Item: it})
				}
			case "item.delete":
				_, err = cl.DeleteItem(ctx, events.ItemKeyRequest{UserID: user, Scope: events.ScopeUser, Kind: events.ItemPreference, Key: "tone"})
			case "item.delete_scope":
				_, err = cl.DeleteScope(ctx, events.ItemScopeRequest{UserID: user, Scope: events.ScopeUser})
			case "policy.set":
				_, err = cl.SetPolicy(ctx, events.PolicySetRequest{UserID: user, Values: map[string]json.RawMessage{"retrieve_limit": json.RawMessage(fmt.Sprint(rapid.IntRange(1, 50).Draw(rt, "limit")))}})
			case "policy.rollback":
				_, err = cl.RollbackPolicy(ctx, events.PolicyRollbackRequest{UserID: user})
			case "compress":
				_, err = cl.Compress(ctx, events.CompressRequest{UserID: user})
			}
			// A request may fail (an update of a deleted memory, a rollback
			// without snapshot); the rebuild must fail it the same way.
			var cerr *client.Error
			if err != nil && !errors.As(err, &cerr) {
				t.Fatal(err)
			}
		}
		l.idle(t, ctx)
		before := map[string]diff.Snapshot{}
		for _, u := range users {
			before[u] = snapshot(t, ctx, l.rt, ten, u)
		}

		states := map[[2]string]string{}
		for _, us := range sessions {
			states[us] = sessionState(t, ctx, l.rt, ten, us)
		}

		// The disk is lost: the tenant's Markdown, its vector records and session state.
		must(t, os.RemoveAll(filepath.Join(dataDir, "memory", ten)))
		for _, us := range sessions {
			must(t, l.rt.Sessions.Delete(ctx, ten, us[0], us[1]))
		}
		for _, u := range users {
			_, err := l.rt.Vectors.DeleteByFilter(ctx, vectorstore.Filter{Tenant: ten, UserID: u, IncludeExpired: true})
			must(t, err)
		}
		var progress strings.Builder
		sum, err := replay.Rebuild(ctx, replay.RebuildConfig{Root: l.root, Tenant: ten, Environ: []string{}, Progress: &progress}, l.rt.Events, l.rt, nil)
		if err != nil {
			t.Fatalf("rebuild: %v\n%s", err, progress.String())
		}
		if !strings.Contains(progress.String(), "rebuild of "+ten) {
			t.Fatalf("no summary line:\n%s", progress.String())
		}
		for _, u := range sum.Users {
			mustEmpty(t, diff.Compare("before", before[u], "rebuilt", snapshot(t, ctx, l.rt, ten, u)), "rebuilt "+ten+"/"+u+" differs")
		}
		for _, us := range sessions {
			if got := sessionState(t, ctx, l.rt, ten, us); got != states[us] {
				t.Fatalf("session %v rebuilt as\n%s\nwant\n%s", us, got, states[us])
			}
		}
		if list, _ := replay.List(l.root, ten); len(list) != 0 {
			t.Fatalf("the rebuild's replay was not dropped: %+v", list)
		}
	})
}

func sessionState(t *testing.T, ctx context.Context, rt *app.Runtime, tenant string, us [2]string) string {
	t.Helper()
	st, err := rt.Sessions.Get(ctx, tenant, us[0], us[1])
	must(t, err)
	// Applied is ingest's record of what it folded in, in the order its batches
	// came: the set is the state, not the order.
	slices.Sort(st.Applied)
	data, err := json.Marshal(st)
	must(t, err)
	return string(data)
}

// Issue 17 item 6: an import is a write event, so a rebuild brings back what
// was imported (the Markdown, the memories and items, the session values), and
// importing twice is once.
func TestRebuildBringsBackAnImport(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	l := newLive(t, ctx)
	src := l.clientFor(t, "src")
	// What the archive holds: Markdown, a memory, an item and session values.
	for _, write := range []func() error{
		func() error {
			_, err := src.Append(ctx, events.AppendRequest{UserID: "u1", Content: "Reports go to finance@example.com."})
			return err
		},
		func() error {
			_, err := src.Add(ctx, events.AddRequest{UserID: "u1", Text: "The user's manager is Ana.", MemoryType: events.MemorySemantic})
			return err
		},
		func() error {
			_, err := src.SaveItem(ctx, events.ItemRequest{UserID: "u1", Item: events.MemoryItem{Scope: events.ScopeUser, Kind: events.ItemPreference, Key: "tone", Content: "Short answers.", Confidence: 0.9}})
			return err
		},
		func() error {
			_, err := src.Say(ctx, "u1", "s1", events.RoleUser, "Remember: invoices go to finance.", nil)
			return err
		},
	} {
		must(t, write())
	}
	l.idle(t, ctx)
	var archive bytes.Buffer
	_, err := transfer.Export(ctx, src, "u1", &archive, io.Discard)
	must(t, err)

	const ten = "dst"
	dst := l.clientFor(t, ten)
	open := func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(archive.Bytes())), nil }
	m, err := transfer.Check(open)
	must(t, err)
	importOnce := func() {
		// Small pages: the import is several write events.
		_, err := transfer.Import(ctx, dst, m, open, 4096, io.Discard)
		must(t, err)
		l.idle(t, ctx)
	}
	importOnce()
	before := snapshot(t, ctx, l.rt, ten, "u1")
	if len(before.Files) == 0 || len(before.Memories) < 2 {
		t.Fatalf("the import wrote %d files and %d memories", len(before.Files), len(before.Memories))
	}
	keys, err := l.rt.Sessions.UserKeys(ctx, ten, "u1")
	must(t, err)
	if len(keys) == 0 {
		t.Fatal("the import wrote no session values")
	}
	importOnce()
	mustEmpty(t, diff.Compare("imported", before, "imported twice", snapshot(t, ctx, l.rt, ten, "u1")), "a second import changed the memory")
	// The tenant's stream holds the import pages alone, as write events.
	recorded, err := l.rt.Events.List(ctx, eventstore.Query{Tenant: ten}, 0, 0)
	must(t, err)
	if len(recorded) < 2 || slices.ContainsFunc(recorded, func(st eventstore.Stored) bool {
		return st.Envelope.Write == nil || st.Envelope.Write.Op != events.EndpointImport
	}) {
		t.Fatalf("the imports were recorded as %d events: %+v", len(recorded), recorded)
	}

	// The disk is lost: the tenant's Markdown, its vector records and session values.
	must(t, os.RemoveAll(filepath.Join(filepath.Dir(l.root), "memory", ten)))
	_, err = l.rt.Vectors.DeleteByFilter(ctx, vectorstore.Filter{Tenant: ten, UserID: "u1", IncludeExpired: true})
	must(t, err)
	_, _, err = l.rt.Sessions.DeleteUser(ctx, ten, "u1")
	must(t, err)
	if lost := snapshot(t, ctx, l.rt, ten, "u1"); len(lost.Files)+len(lost.Memories) != 0 {
		t.Fatalf("the namespace is not lost: %d files, %d memories", len(lost.Files), len(lost.Memories))
	}
	var progress strings.Builder
	if _, err := replay.Rebuild(ctx, replay.RebuildConfig{Root: l.root, Tenant: ten, Environ: []string{}, Progress: &progress}, l.rt.Events, l.rt, nil); err != nil {
		t.Fatalf("rebuild: %v\n%s", err, progress.String())
	}
	mustEmpty(t, diff.Compare("imported", before, "rebuilt", snapshot(t, ctx, l.rt, ten, "u1")), "the rebuilt import differs")
	rebuilt, err := l.rt.Sessions.UserKeys(ctx, ten, "u1")
	must(t, err)
	if len(rebuilt) != len(keys) {
		t.Fatalf("rebuilt %d session values, imported %d", len(rebuilt), len(keys))
	}
}

// Issue 17: an on-demand consolidation is a write event, so a replay of a
// namespace consolidated on demand reproduces what the consolidation made; a
// second consolidation right after the first is a write of its own, not taken
// for a retry of the first.
func TestReplayReproducesOnDemandConsolidation(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	l := newLive(t, ctx)
	cl := l.clientFor(t, tenant)
	l.session(t, ctx, "u1", "s1", conversation...)
	l.session(t, ctx, "u1", "s2", conversation...) // the same again in another chat: merged
	unconsolidated := snapshot(t, ctx, l.rt, tenant, "u1")
	for range 2 {
		_, err := cl.Consolidate(ctx, events.ConsolidateRequest{UserID: "u1"})
		must(t, err)
	}
	before := snapshot(t, ctx, l.rt, tenant, "u1")
	if diff.Compare("unconsolidated", unconsolidated, "consolidated", before).Empty() {
		t.Fatal("the consolidation changed nothing: this test would show nothing")
	}
	stored, err := l.rt.Events.List(ctx, eventstore.Query{Tenant: tenant, User: "u1"}, 0, 0)
	must(t, err)
	consolidations := 0
	for _, e := range stored {
		if w := e.Envelope.Write; w != nil && w.Op == events.EndpointConsolidate {
			consolidations++
		}
	}
	if consolidations != 2 {
		t.Fatalf("two consolidations recorded %d write events, want 2", consolidations)
	}

	m := l.replaysAsLive(t, ctx, "consolidated", before, "a replay of a namespace consolidated on demand differs")
	if m.WritesApplied != 2 || m.WritesFailed != 0 {
		t.Fatalf("replay applied %d writes (%d failed), want 2", m.WritesApplied, m.WritesFailed)
	}
}
