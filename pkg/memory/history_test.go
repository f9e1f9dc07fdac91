package memory_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/bus/bustest"
	"github.com/agentmem/agentmem/pkg/memory"
	"github.com/agentmem/agentmem/pkg/records"
)

func TestHistoryLogKeepsTheNewest(t *testing.T) {
	f := newFixture(t, memory.Config{MaxHistory: 5})
	ctx := context.Background()
	log := f.svc.Log()
	id := uuid.NewString()
	for i := range 12 {
		if err := log.Append(ctx, "acme", "u1", id, events.Change{TS: t0.Add(time.Duration(i) * time.Second), Op: "reconsolidate", Text: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	// Both spellings of a UUID name the same history.
	if got := historyTexts(t, log, "u1", strings.ToUpper(id)); got != "7,8,9,10,11" {
		t.Errorf("history holds %s, want the newest five 7..11 in order", got)
	}
	if other, err := log.List(ctx, "acme", "u2", id); err != nil || other != nil {
		t.Errorf("another user's history of the same id: %v, %v", other, err)
	}
}

// TestHistoryLogBoundAcrossCalls: with calls of several changes, the newest
// MaxHistory changes are kept, oldest first, even where that splits a call.
func TestHistoryLogBoundAcrossCalls(t *testing.T) {
	f := newFixture(t, memory.Config{MaxHistory: 5})
	ctx := context.Background()
	id := uuid.NewString()
	for call := range 4 {
		var chs []events.Change
		for j := range 3 {
			chs = append(chs, events.Change{TS: t0, Op: "hit", Text: fmt.Sprint(call*3 + j)})
		}
		if err := f.svc.Log().Append(ctx, "acme", "u1", id, chs...); err != nil {
			t.Fatal(err)
		}
	}
	if got := historyTexts(t, f.svc.Log(), "u1", id); got != "7,8,9,10,11" {
		t.Errorf("history holds %s, want the newest five 7..11 in order", got)
	}
}

// TestHistoryLogConcurrentAppends: the consolidator and the service append to
// one memory's history at once; none of the changes is lost, and the changes of
// one Append stay together and in order.
func TestHistoryLogConcurrentAppends(t *testing.T) {
	f := newFixture(t, memory.Config{})
	ctx := context.Background()
	id := uuid.NewString()
	const writers, each = 4, 10
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				errs <- f.svc.Log().Append(ctx, "acme", "u1", id,
					events.Change{TS: t0, Op: "hit", Text: fmt.Sprintf("%d-%d-a", w, i)},
					events.Change{TS: t0, Op: "reconsolidate", Text: fmt.Sprintf("%d-%d-b", w, i)})
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	changes, err := f.svc.Log().List(ctx, "acme", "u1", id)
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 2*writers*each {
		t.Fatalf("%d changes, want %d", len(changes), 2*writers*each)
	}
	calls := map[string]bool{}
	for i := 0; i < len(changes); i += 2 {
		a, b := changes[i].Text, changes[i+1].Text
		if !strings.HasSuffix(a, "-a") || b != strings.TrimSuffix(a, "a")+"b" {
			t.Fatalf("changes %d and %d are %q and %q, want the two changes of one call", i, i+1, a, b)
		}
		calls[a] = true
	}
	if len(calls) != writers*each {
		t.Errorf("%d distinct calls stored, want %d", len(calls), writers*each)
	}
}

// TestHistoryLogLargeChanges: changes far larger than the old whole-history
// value limit are all kept; a call that cannot fit in one message fails with
// ErrInvalid and stores nothing.
func TestHistoryLogLargeChanges(t *testing.T) {
	f := newFixture(t, memory.Config{})
	ctx := context.Background()
	id := uuid.NewString()
	big := strings.Repeat("x", 100<<10)
	for i := range 12 {
		if err := f.svc.Log().Append(ctx, "acme", "u1", id, events.Change{TS: t0, Op: "update", Text: fmt.Sprintf("%d %s", i, big)}); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	huge := strings.Repeat("y", 2<<20)
	err := f.svc.Log().Append(ctx, "acme", "u1", id, events.Change{TS: t0, Op: "update", Text: huge})
	wantErr(t, err, []error{memory.ErrInvalid}, "max payload")
	changes, err := f.svc.Log().List(ctx, "acme", "u1", id)
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 12 || !strings.HasPrefix(changes[11].Text, "11 ") {
		t.Errorf("%d changes, want the 12 appended, ending with the newest", len(changes))
	}
}

// TestHistoryLogRejectsBadIDs: a tenant or user that is not one subject token,
// or a memory id that is not a UUID, is refused before anything is sent, so no
// id can widen the subject to another user's history.
func TestHistoryLogRejectsBadIDs(t *testing.T) {
	f := newFixture(t, memory.Config{})
	ctx := context.Background()
	id := uuid.NewString()
	ch := events.Change{TS: t0, Op: "update"}
	for _, c := range []struct{ tenant, user, id, word string }{
		{"ac.me", "u1", id, "tenant"},
		{"acme", "*", id, "user_id"},
		{"acme", "u1.>", id, "user_id"},
		{"", "u1", id, "tenant"},
		{"acme", "u1", "not-a-uuid", "memory id"},
		{"acme", "u1", ">", "memory id"},
	} {
		wantErr(t, f.svc.Log().Append(ctx, c.tenant, c.user, c.id, ch), []error{memory.ErrInvalid}, c.word)
		_, err := f.svc.Log().List(ctx, c.tenant, c.user, c.id)
		wantErr(t, err, []error{memory.ErrInvalid}, c.word)
	}
}

// TestResetPurgesOnlyThatUsersHistory: Reset removes every history of the user
// and none of a user whose id starts the same, nor of the same user id in
// another tenant.
func TestResetPurgesOnlyThatUsersHistory(t *testing.T) {
	f := newFixture(t, memory.Config{})
	ctx := context.Background()
	log := f.svc.Log()
	ids := []string{uuid.NewString(), uuid.NewString()}
	owners := [][2]string{{"acme", "u1"}, {"acme", "u10"}, {"other", "u1"}}
	for _, o := range owners {
		for _, id := range ids {
			if err := log.Append(ctx, o[0], o[1], id, events.Change{TS: t0, Op: "add", Text: o[0] + "/" + o[1]}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := f.svc.Reset(ctx, "acme", events.ResetRequest{UserID: "u1"}); err != nil {
		t.Fatal(err)
	}
	for _, o := range owners {
		for _, id := range ids {
			changes, err := log.List(ctx, o[0], o[1], id)
			if err != nil {
				t.Fatal(err)
			}
			if reset := o == owners[0]; reset != (changes == nil) {
				t.Errorf("history of %v after resetting acme/u1: %+v", o, changes)
			}
		}
	}
}

// TestNewProvisionsTheHistoryStream: New creates the stream, a later New with
// another MaxHistory updates its per-memory bound (List still returns its own
// MaxHistory newest), and an old history KV bucket is left alone.
func TestNewProvisionsTheHistoryStream(t *testing.T) {
	f := newFixture(t, memory.Config{})
	ctx := context.Background()
	_, _, js := bustest.Provisioned(t)
	old, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "agentmem_history"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := old.PutString(ctx, "acme.u1.x", "[]"); err != nil {
		t.Fatal(err)
	}
	deps := memory.Deps{Vectors: f.store, Embedder: f.emb, JS: js}
	var svcs []*memory.Service
	for _, bound := range []int{5, 7} {
		svc, err := memory.New(ctx, memory.Config{MaxHistory: bound}, deps, nil)
		if err != nil {
			t.Fatal(err)
		}
		svcs = append(svcs, svc)
		str, err := js.Stream(ctx, memory.DefaultHistoryStream)
		if err != nil {
			t.Fatal(err)
		}
		cfg := str.CachedInfo().Config
		if cfg.MaxMsgsPerSubject != int64(bound) || cfg.Discard != jetstream.DiscardOld || cfg.Storage != jetstream.FileStorage ||
			!slices.Equal(cfg.Subjects, []string{"memhist.>"}) {
			t.Errorf("MaxHistory %d: stream config %+v", bound, cfg)
		}
	}
	if e, err := old.Get(ctx, "acme.u1.x"); err != nil || string(e.Value()) != "[]" {
		t.Errorf("the old bucket's value: %v", err)
	}
	// The stream now keeps 7 per memory; the service bounded to 5 lists the newest 5.
	id := uuid.NewString()
	for i := range 7 {
		if err := svcs[0].Log().Append(ctx, "acme", "u1", id, events.Change{TS: t0, Op: "hit", Text: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if got := historyTexts(t, svcs[0].Log(), "u1", id); got != "2,3,4,5,6" {
		t.Errorf("history holds %s, want the newest five 2..6", got)
	}
}

// historyTexts lists the memory's history of acme/user as its texts joined by commas.
func historyTexts(t *testing.T, log *memory.HistoryLog, user, id string) string {
	t.Helper()
	changes, err := log.List(context.Background(), "acme", user, id)
	if err != nil {
		t.Fatal(err)
	}
	texts := make([]string, len(changes))
	for i, c := range changes {
		texts[i] = c.Text
	}
	return strings.Join(texts, ",")
}

// BenchmarkHistoryAppend appends one change to a memory that already holds
// MaxHistory (200) changes, as the consolidator does for a hot memory's hits.
func BenchmarkHistoryAppend(b *testing.B) {
	f := newFixture(b, memory.Config{})
	ctx := context.Background()
	id := uuid.NewString()
	fillHistory(b, f.svc.Log(), id, 200)
	ch := events.Change{TS: t0, Op: "hit", Detail: map[string]any{"hit_count": 7}}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := f.svc.Log().Append(ctx, "acme", "u1", id, ch); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHistoryList lists a memory's 200 changes, appended one at a time.
func BenchmarkHistoryList(b *testing.B) {
	f := newFixture(b, memory.Config{})
	ctx := context.Background()
	id := uuid.NewString()
	fillHistory(b, f.svc.Log(), id, 200)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		changes, err := f.svc.Log().List(ctx, "acme", "u1", id)
		if err != nil || len(changes) != 200 {
			b.Fatalf("list: %d changes, %v", len(changes), err)
		}
	}
}

// fillHistory appends n single-change calls to the history of id of acme/u1.
func fillHistory(tb testing.TB, log *memory.HistoryLog, id string, n int) {
	tb.Helper()
	for i := range n {
		ch := events.Change{TS: t0.Add(time.Duration(i) * time.Second), Op: "update", Text: fmt.Sprintf("change %d of a memory text", i)}
		if err := log.Append(context.Background(), "acme", "u1", id, ch); err != nil {
			tb.Fatal(err)
		}
	}
}

// A memory the pipeline wrote has no "add" in its log; its history starts with
// a "create" told from the record (its statement, not the messages kept as its
// context, and its session), for every reader alike. A memory deleted since
// keeps the log alone.
func TestPipelineMemoryHistoryStartsWithItsCreation(t *testing.T) {
	f := newFixture(t, memory.Config{})
	ctx := context.Background()
	obs := records.Observation{Role: "user", Text: "My bike is red.", TS: t0, ChatID: "s7", EventID: "01HZX3V6Q8K2M4N6P8R0T2V4X6",
		Before: []records.Utterance{{Role: "assistant", Text: "What colour is your bike?"}}}
	rec := records.EpisodeRecord("acme", "u1", obs, records.Episode{Write: true, Thing: "My bike is red.", Who: "user", Time: t0})
	vec, err := f.emb.Embed(ctx, []string{rec.Text})
	if err != nil {
		t.Fatal(err)
	}
	rec.Vector = vec[0]
	if err := f.store.Upsert(ctx, rec); err != nil {
		t.Fatal(err)
	}
	h, err := f.svc.History(ctx, "acme", events.HistoryRequest{UserID: "u1", ID: rec.ID})
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Changes) != 1 {
		t.Fatalf("history %+v, want one create", h.Changes)
	}
	c := h.Changes[0]
	if c.Op != "create" || c.Text != "My bike is red." || !c.TS.Equal(t0) || c.Detail["session"] != "s7" || c.Detail["memory_type"] != "episodic" {
		t.Errorf("creation %+v, want create of the statement alone at %v in session s7", c, t0)
	}

	if _, err := f.svc.Update(ctx, "acme", events.UpdateRequest{UserID: "u1", ID: rec.ID, Text: "My bike is blue."}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Delete(ctx, "acme", events.DeleteRequest{UserID: "u1", IDs: []string{rec.ID}}); err != nil {
		t.Fatal(err)
	}
	h, err = f.svc.History(ctx, "acme", events.HistoryRequest{UserID: "u1", ID: rec.ID})
	if err != nil {
		t.Fatal(err)
	}
	var ops []string
	for _, c := range h.Changes {
		ops = append(ops, c.Op)
	}
	if !slices.Equal(ops, []string{"update", "delete"}) {
		t.Errorf("history of the deleted memory %v, want update, delete", ops)
	}
	// Another user asking for the id finds nothing, not the creation.
	if _, err := f.svc.History(ctx, "acme", events.HistoryRequest{UserID: "u2", ID: rec.ID}); !errors.Is(err, memory.ErrNotFound) {
		t.Errorf("history of u1's memory asked by u2: %v, want not found", err)
	}
}
