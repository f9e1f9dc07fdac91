package writes_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/app"
	"github.com/agentmem/agentmem/pkg/app/apptest"
	"github.com/agentmem/agentmem/pkg/diff"
	"github.com/agentmem/agentmem/pkg/markdown"
	"github.com/agentmem/agentmem/pkg/writes"
)

// machine is one stack's applier and runtime.
type machine struct {
	rt *app.Runtime
	a  *writes.Applier
}

func newMachine(t *testing.T) machine {
	t.Helper()
	stack, _ := apptest.Up(t)
	a, err := stack.Runtime().Writes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return machine{stack.Runtime(), a}
}

// importSeq makes the ids of imported records unique: a record id is one
// record of one tenant.
var importSeq atomic.Int64

// genRequest draws a write request of user: what the retriever records.
func genRequest(t *rapid.T, user string, added []string) (string, any) {
	text := rapid.SampledFrom([]string{"Prefers tabs.", "Reports go to finance.", "Fiscal year starts in April."}).Draw(t, "text")
	ops := []string{events.EndpointAppend, events.EndpointAdd, events.EndpointItemSave, events.EndpointPolicySet, events.EndpointImport}
	if len(added) > 0 {
		ops = append(ops, events.EndpointUpdate, events.EndpointDelete)
	}
	switch op := rapid.SampledFrom(ops).Draw(t, "op"); op {
	case events.EndpointAppend:
		return op, events.AppendRequest{UserID: user, Content: text, Slot: rapid.SampledFrom(events.Slots).Draw(t, "slot")}
	case events.EndpointAdd:
		return op, events.AddRequest{UserID: user, Text: text, MemoryType: rapid.SampledFrom([]events.MemoryType{events.MemoryEpisodic, events.MemorySemantic}).Draw(t, "type")}
	case events.EndpointItemSave:
		return op, events.ItemRequest{UserID: user, Item: events.MemoryItem{Scope: events.ScopeUser, Kind: events.ItemPreference, Key: "tone", Content: text, Confidence: 0.5, TTLSec: rapid.Int64Range(0, 3600).Draw(t, "ttl")}}
	case events.EndpointImport:
		// Re-embedded, so that the vectors come from the text on each machine.
		return op, events.ImportRequest{
			UserID: user, Reembed: true,
			Files:   []events.FileChunk{{Name: "user_prefs.md", Data: []byte("- " + text + "\n")}},
			Records: []events.Record{{ID: fmt.Sprintf("6f1c2c57-9d36-4b4e-8f0e-%012x", importSeq.Add(1)), MemoryType: events.MemorySemantic, Text: text}},
		}
	case events.EndpointPolicySet:
		return op, events.PolicySetRequest{UserID: user, Values: map[string]json.RawMessage{"recent_days": json.RawMessage(fmt.Sprint(rapid.IntRange(1, 7).Draw(t, "days")))}}
	case events.EndpointUpdate:
		return op, events.UpdateRequest{UserID: user, ID: rapid.SampledFrom(added).Draw(t, "id"), Text: text + " (updated)"}
	default:
		return op, events.DeleteRequest{UserID: user, IDs: []string{rapid.SampledFrom(added).Draw(t, "id")}}
	}
}

// A write event applied on two machines, at any time after it was recorded,
// makes the same memory: the applier takes the time from the event (an append
// goes to the note of the event's day), and the ids it assigns are the
// recorded ones.
func TestApplyingTheSameWritesOnTwoMachinesGivesTheSameMemory(t *testing.T) {
	apptest.LimitChecks(t, 25) // each case writes to two stacks
	ctx := context.Background()
	a, b := newMachine(t), newMachine(t)
	n := 0
	rapid.Check(t, func(rt *rapid.T) {
		n++
		tenant := fmt.Sprintf("t%d", n)
		ts := time.Date(2026, time.Month(rapid.IntRange(1, 12).Draw(rt, "month")), 3, 9, 0, 0, 0, time.UTC)
		var added []string
		for range rapid.IntRange(1, 8).Draw(rt, "writes") {
			ts = ts.Add(time.Duration(rapid.IntRange(1, 48*3600).Draw(rt, "gap_s")) * time.Second)
			op, req := genRequest(rt, "u1", added)
			env, err := writes.Record(tenant, op, req, ts)
			if err != nil {
				rt.Fatal(err)
			}
			ra, errA := a.a.Apply(ctx, env)
			rb, errB := b.a.Apply(ctx, env)
			if (errA == nil) != (errB == nil) || (op == events.EndpointImport && errA != nil) {
				rt.Fatalf("%s: machine a %v, machine b %v", op, errA, errB)
			}
			if r, ok := ra.(events.AppendReply); ok && r.Slot == events.SlotToday && r.File != markdown.DailyNoteName(ts) {
				rt.Fatalf("append went to %s, not the note of the event's day %s", r.File, ts.Format(time.DateOnly))
			}
			if errA == nil && op == events.EndpointAdd {
				ids := ra.(events.AddReply).MemoryIDs
				if strings.Join(ids, ",") != strings.Join(env.Write.MemoryIDs, ",") || strings.Join(rb.(events.AddReply).MemoryIDs, ",") != strings.Join(ids, ",") {
					rt.Fatalf("add made %v and %v, recorded %v", ids, rb, env.Write.MemoryIDs)
				}
				added = append(added, ids...)
			}
		}
		sa, err := diff.Take(ctx, a.rt.Docs, a.rt.Vectors, tenant, "u1")
		if err != nil {
			rt.Fatal(err)
		}
		sb, err := diff.Take(ctx, b.rt.Docs, b.rt.Vectors, tenant, "u1")
		if err != nil {
			rt.Fatal(err)
		}
		if r := diff.Compare("a", sa, "b", sb); !r.Empty() {
			var out strings.Builder
			_ = r.Write(&out)
			rt.Fatalf("the same writes made different memories:\n%s", out.String())
		}
	})
}

func TestRecordAndItsMsgID(t *testing.T) {
	ts := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	req := events.AppendRequest{UserID: "u1", Content: "Prefers tabs."}
	env, err := writes.Record("acme", events.EndpointAppend, req, ts)
	if err != nil {
		t.Fatal(err)
	}
	if env.Type != events.TypeWrite || env.UserID != "u1" || !env.TS.Equal(ts) || env.Write.Op != events.EndpointAppend {
		t.Fatalf("envelope %+v", env)
	}
	if subject, _ := env.Subject(); subject != "mem.acme.write.u1" {
		t.Fatalf("subject %s", subject)
	}
	record := func(tenant string, req events.AppendRequest) events.Envelope {
		e, err := writes.Record(tenant, events.EndpointAppend, req, ts.Add(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	other := req
	other.Content = "Prefers spaces."
	id := writes.MsgID(env, 7)
	retried, otherContent, otherTenant := record("acme", req), record("acme", other), record("bcme", req)
	if writes.MsgID(retried, 7) != id || !writes.SameRequest(env, retried) {
		t.Fatalf("the same request after the same write has msg id %s, want %s", writes.MsgID(retried, 7), id)
	}
	for what, got := range map[string]string{
		"after another write": writes.MsgID(retried, 9), "other content": writes.MsgID(otherContent, 7), "other tenant": writes.MsgID(otherTenant, 7),
	} {
		if got == id {
			t.Errorf("%s: the same msg id %s", what, id)
		}
	}
	add, err := writes.Record("acme", events.EndpointAdd, events.AddRequest{UserID: "u1", Text: "Manager is Ana."}, ts)
	if err != nil || len(add.Write.MemoryIDs) != 1 {
		t.Fatalf("add records %+v, %v; want the memory id", add.Write, err)
	}
}

func TestApplyRejectsWhatIsNotAWrite(t *testing.T) {
	m := newMachine(t)
	ctx := context.Background()
	obs := events.New(events.TypeObservation, "acme", "u1", "", "s1")
	obs.Observation = &events.Observation{Role: events.RoleUser, Text: "hi"}
	if _, err := m.a.Apply(ctx, obs); !errors.Is(err, writes.ErrInvalid) {
		t.Fatalf("an observation: %v, want ErrInvalid", err)
	}
	env := events.New(events.TypeWrite, "acme", "u1", "", "")
	env.Write = &events.Write{Op: events.EndpointAppend, Request: json.RawMessage(`{"user_id":"u1"}`)}
	if _, err := m.a.Apply(ctx, env); !errors.Is(err, writes.ErrInvalid) || !strings.Contains(err.Error(), "content") {
		t.Fatalf("an append without content: %v, want ErrInvalid naming content", err)
	}
}
