package ingest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/bus"
	"github.com/agentmem/agentmem/pkg/bus/bustest"
	"github.com/agentmem/agentmem/pkg/embed"
	"github.com/agentmem/agentmem/pkg/ingest"
	"github.com/agentmem/agentmem/pkg/priority"
	"github.com/agentmem/agentmem/pkg/processor"
	"github.com/agentmem/agentmem/pkg/records"
	"github.com/agentmem/agentmem/pkg/session"
	"github.com/agentmem/agentmem/pkg/vectorstore"
	"github.com/agentmem/agentmem/pkg/vectorstore/embedded"
)

type rig struct {
	srv      *server.Server
	js       jetstream.JetStream
	sessions *session.Store
	vectors  vectorstore.Store
}

func startIngest(t testing.TB) rig {
	t.Helper()
	return startIngestWith(t, ingest.Config{Router: bus.RouterConfig{Retry: bus.RetryConfig{InitialInterval: time.Millisecond}}})
}

func startIngestWith(t testing.TB, cfg ingest.Config, with ...func(*ingest.Deps)) rig {
	t.Helper()
	r, w := newIngest(t, cfg, with...)
	ctx := context.Background()
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx) }()
	bustest.Eventually(t, 10*time.Second, func() error { return w.Ready(ctx) })
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ingest run: %v", err)
		}
	})
	return r
}

// newIngest builds an ingest worker on a fresh server and stores without running
// it, for tests that call HandleBatch with batches of their own.
func newIngest(t testing.TB, cfg ingest.Config, with ...func(*ingest.Deps)) (rig, *ingest.Worker) {
	t.Helper()
	srv, _, js := bustest.Provisioned(t)
	ctx := context.Background()
	sessions, err := session.New(ctx, session.Config{}, js, nil)
	if err != nil {
		t.Fatal(err)
	}
	emb, err := embed.NewLocal(embed.LocalConfig{})
	if err != nil {
		t.Fatal(err)
	}
	vectors, err := embedded.New(embedded.Config{Path: filepath.Join(t.TempDir(), "v.db"), Dimensions: emb.Dimensions()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = vectors.Close() })
	deps := ingest.Deps{
		Dial: func(name string) (*nats.Conn, error) {
			return nats.Connect("", nats.InProcessServer(srv), nats.Name(name))
		},
		JS:       js,
		Sessions: sessions,
		Decider:  processor.NewRuleDecider(),
		Vectors:  vectors,
		Embedder: emb,
	}
	for _, f := range with {
		f(&deps)
	}
	w, err := ingest.New(cfg, deps, nil)
	if err != nil {
		t.Fatal(err)
	}
	return rig{srv: srv, js: js, sessions: sessions, vectors: vectors}, w
}

func (r rig) say(t *testing.T, user, sess, text string, meta map[string]any) events.Envelope {
	t.Helper()
	env := events.New(events.TypeObservation, "acme", user, "bot", sess)
	env.Observation = &events.Observation{Role: events.RoleUser, Text: text, Meta: meta}
	r.publish(t, env)
	return env
}

func (r rig) publish(t *testing.T, env events.Envelope) {
	t.Helper()
	subject, data := encode(t, env)
	if _, err := r.js.Publish(context.Background(), subject, data); err != nil {
		t.Fatal(err)
	}
}

// encode is env's subject and JSON.
func encode(t *testing.T, env events.Envelope) (string, []byte) {
	t.Helper()
	data, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	subject, err := env.Subject()
	if err != nil {
		t.Fatal(err)
	}
	return subject, data
}

// settled waits until the ingest durable has acknowledged every message: ingest
// acks an observation only once its episode is stored, and it applies the session
// state first, so a state showing an event does not mean its episode is stored yet.
func (r rig) settled(t *testing.T) {
	t.Helper()
	bustest.WaitSettled(t, r.js, bus.DefaultStream, bus.WorkerConsumer(bus.WorkerIngest, bus.ConsumerDefaults{}).Durable, 10*time.Second)
}

func (r rig) episodes(t *testing.T, user string) []vectorstore.Record {
	t.Helper()
	recs, _, err := r.vectors.Scroll(context.Background(), vectorstore.Filter{Tenant: "acme", UserID: user, MemoryTypes: []vectorstore.MemoryType{vectorstore.Episodic}}, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// SPEC C3 through the pipeline: a personal "remember" becomes an episodic memory with
// who=user and its provenance; a greeting and an impersonal question become none.
func TestObservationsBecomeEpisodicMemories(t *testing.T) {
	r := startIngest(t)
	remember := r.say(t, "u1", "s1", "Remember, I'm a student at Peking University", map[string]any{"dia_id": "D1:3"})
	r.say(t, "u1", "s1", "hi!", nil)
	last := r.say(t, "u1", "s1", "what is the capital of France?", nil)

	ctx := context.Background()
	bustest.Eventually(t, 10*time.Second, func() error {
		st, err := r.sessions.Get(ctx, "acme", "u1", "s1")
		if err != nil {
			return err
		}
		if st.Messages != 3 || st.Recent[2].EventID != last.ID {
			return fmt.Errorf("session state has %d messages", st.Messages)
		}
		return nil
	})
	r.settled(t)
	eps := r.episodes(t, "u1")
	if len(eps) != 1 {
		t.Fatalf("episodic memories = %d (%v), want exactly 1: greetings and knowledge questions are not written", len(eps), eps)
	}
	ep := eps[0]
	if ep.Who != "user" || ep.ChatID != "s1" || !ep.TS.Equal(remember.TS.Truncate(time.Microsecond)) {
		t.Fatalf("episode = who %q chat %q ts %v", ep.Who, ep.ChatID, ep.TS)
	}
	ids, _ := ep.Metadata[records.MetaSourceEventIDs].([]any)
	metas, _ := ep.Metadata[records.MetaSourceMeta].([]any)
	if len(ids) != 1 || ids[0] != remember.ID || len(metas) != 1 || metas[0].(map[string]any)["dia_id"] != "D1:3" {
		t.Fatalf("provenance = %v / %v", ep.Metadata[records.MetaSourceEventIDs], ep.Metadata[records.MetaSourceMeta])
	}
	// The consolidator learns about the write.
	bustest.Eventually(t, 10*time.Second, func() error {
		stream, err := r.js.Stream(ctx, bus.DefaultStream)
		if err != nil {
			return err
		}
		if _, err := stream.GetLastMsgForSubject(ctx, "mem.acme.written.u1"); err != nil {
			return fmt.Errorf("no memory_written: %w", err)
		}
		return nil
	})
}

// The same observation delivered again (republished after the duplicate window would
// have passed, so JetStream stores it twice) changes neither the counts nor the memories.
func TestRedeliveryIsIdempotent(t *testing.T) {
	r := startIngest(t)
	env := r.say(t, "u2", "s1", "Remember: my sister's name is Ana", nil)
	r.publish(t, env)
	marker := r.say(t, "u2", "s1", "ok", nil)

	bustest.Eventually(t, 10*time.Second, func() error {
		st, err := r.sessions.Get(context.Background(), "acme", "u2", "s1")
		if err != nil {
			return err
		}
		if n := len(st.Recent); n == 0 || st.Recent[n-1].EventID != marker.ID {
			return fmt.Errorf("marker not applied yet")
		}
		if st.Messages != 2 {
			return fmt.Errorf("messages = %d, want 2 (duplicate counted)", st.Messages)
		}
		return nil
	})
	r.settled(t)
	if eps := r.episodes(t, "u2"); len(eps) != 1 {
		t.Fatalf("episodic memories = %d, want 1", len(eps))
	}
}

// Observations of two users never mix.
func TestUsersAreIsolated(t *testing.T) {
	r := startIngest(t)
	r.say(t, "alice", "s1", "Remember, I live in Lisbon", nil)
	r.say(t, "bob", "s1", "Remember, I live in Oslo", nil)
	bustest.Eventually(t, 10*time.Second, func() error {
		if len(r.episodes(t, "alice")) != 1 || len(r.episodes(t, "bob")) != 1 {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	if got := r.episodes(t, "alice")[0].Text; got == "" || strings.Contains(got, "Oslo") {
		t.Fatalf("alice's memory = %q", got)
	}
}

// Many observations of several sessions arriving together are handled in batches:
// each becomes exactly one episodic memory and one count in its session's state,
// and every memory is announced by a memory_written of its own session, fewer
// announcements than observations.
func TestConcurrentObservationsOfManySessions(t *testing.T) {
	r := startIngest(t)
	ctx := context.Background()
	const sessions, perSession = 6, 15
	pub, err := jetstream.New(bustest.Connect(t, r.srv))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{} // event id → session
	for i := range sessions * perSession {
		s := i % sessions // interleaved, as concurrent agents publish
		env := events.New(events.TypeObservation, "acme", fmt.Sprintf("u%d", s%2), "bot", fmt.Sprintf("s%d", s))
		env.Observation = &events.Observation{Role: events.RoleUser, Text: fmt.Sprintf("Remember: my locker number %d is on floor %d", i, s)}
		subject, data := encode(t, env)
		if _, err := pub.PublishAsync(subject, data); err != nil {
			t.Fatal(err)
		}
		want[env.ID] = env.SessionID
	}
	<-pub.PublishAsyncComplete()

	episodeSession := map[string]string{} // episodic record id → session
	bustest.Eventually(t, 20*time.Second, func() error {
		clear(episodeSession)
		for _, user := range []string{"u0", "u1"} {
			for _, ep := range r.episodes(t, user) {
				episodeSession[ep.ID] = ep.ChatID
			}
		}
		if len(episodeSession) != len(want) {
			return fmt.Errorf("%d episodic memories, want %d", len(episodeSession), len(want))
		}
		return nil
	})
	seen := map[string]bool{}
	for _, user := range []string{"u0", "u1"} {
		for _, ep := range r.episodes(t, user) {
			// The episode's own observation is its last source; the others are
			// the context said before it, in the same session.
			ids := records.StringList(ep.Metadata[records.MetaSourceEventIDs])
			if len(ids) == 0 || len(ids) > 1+ingest.DefaultContextMessages || seen[ids[len(ids)-1]] {
				t.Fatalf("episode %s of session %s has source %v: want its own observation last, stored once", ep.ID, ep.ChatID, ids)
			}
			for _, id := range ids {
				if want[id] != ep.ChatID {
					t.Fatalf("episode %s of session %s has source %s of session %q", ep.ID, ep.ChatID, id, want[id])
				}
			}
			seen[ids[len(ids)-1]] = true
		}
	}
	// Every state holds all of its session's messages.
	bustest.Eventually(t, 10*time.Second, func() error {
		for s := range sessions {
			st, err := r.sessions.Get(ctx, "acme", fmt.Sprintf("u%d", s%2), fmt.Sprintf("s%d", s))
			if err != nil {
				return err
			}
			if st.Messages != perSession || len(st.Applied) != perSession {
				return fmt.Errorf("session s%d: %d messages, %d applied ids; want %d", s, st.Messages, len(st.Applied), perSession)
			}
		}
		return nil
	})

	announced := map[string]bool{}
	writtens := 0
	bustest.Eventually(t, 10*time.Second, func() error {
		clear(announced)
		writtens = 0
		for _, env := range writtenEvents(t, r.js) {
			writtens++
			for _, id := range env.MemoryWritten.MemoryIDs {
				if episodeSession[id] != env.SessionID || env.MemoryWritten.SourceSessionID != env.SessionID {
					t.Fatalf("memory_written of session %s announces %s of session %q", env.SessionID, id, episodeSession[id])
				}
				announced[id] = true
			}
		}
		if len(announced) != len(episodeSession) {
			return fmt.Errorf("%d of %d memories announced", len(announced), len(episodeSession))
		}
		return nil
	})
	if writtens >= len(want) {
		t.Fatalf("%d memory_written events for %d observations: they were not batched", writtens, len(want))
	}
}

// writtenEvents reads every memory_written event of tenant acme from the stream.
func writtenEvents(t *testing.T, js jetstream.JetStream) []events.Envelope {
	t.Helper()
	return bustest.StreamEvents(t, js, "mem.acme.written.")
}

// An episode keeps the messages said before it in its session as context: its
// text is the exchange (kept or not by the decider), its provenance every message
// of it, and its vector the statement's alone. ContextMessages bounds the context;
// negative keeps none.
func TestEpisodeKeepsTheMessagesBeforeIt(t *testing.T) {
	for _, tc := range []struct {
		name     string
		messages int
		want     string
	}{
		{"default two", 0, "Melanie: hi!\nMelanie: How was your week?\nCaroline: I went to the LGBTQ support group yesterday."},
		{"one", 1, "Melanie: How was your week?\nCaroline: I went to the LGBTQ support group yesterday."},
		{"none", -1, "Caroline: I went to the LGBTQ support group yesterday."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := startIngestWith(t, ingest.Config{ContextMessages: tc.messages})
			ctx := context.Background()
			var ids []string
			for i, line := range [][2]string{{"Caroline", "Hey Mel!"}, {"Melanie", "hi!"}, {"Melanie", "How was your week?"}, {"Caroline", "I went to the LGBTQ support group yesterday."}} {
				env := r.say(t, "u1", "s1", line[1], map[string]any{records.SpeakerMetaKey: line[0], "dia_id": fmt.Sprintf("D1:%d", i+1)})
				ids = append(ids, env.ID)
				// One at a time, so that each is in the session state before the next.
				bustest.Eventually(t, 10*time.Second, func() error {
					st, err := r.sessions.Get(ctx, "acme", "u1", "s1")
					if err != nil || st.Messages != i+1 {
						return fmt.Errorf("state: %d messages, %v", st.Messages, err)
					}
					return nil
				})
			}
			var ep vectorstore.Record
			bustest.Eventually(t, 10*time.Second, func() error {
				for _, e := range r.episodes(t, "u1") {
					if src := records.StringList(e.Metadata[records.MetaSourceEventIDs]); len(src) > 0 && src[len(src)-1] == ids[3] {
						ep = e
						return nil
					}
				}
				return fmt.Errorf("no episode of the last message yet")
			})
			if ep.Text != tc.want {
				t.Errorf("text %q, want %q", ep.Text, tc.want)
			}
			lines := strings.Count(tc.want, "\n") + 1
			if src := records.StringList(ep.Metadata[records.MetaSourceEventIDs]); !slices.Equal(src, ids[4-lines:]) {
				t.Errorf("source_event_ids %v, want %v", src, ids[4-lines:])
			}
			emb, err := embed.NewLocal(embed.LocalConfig{})
			if err != nil {
				t.Fatal(err)
			}
			vecs, err := emb.Embed(ctx, []string{"Caroline: I went to the LGBTQ support group yesterday."})
			if err != nil {
				t.Fatal(err)
			}
			if sim := float64(embed.Cosine(ep.Vector, vecs[0])); sim < 0.9999 {
				t.Errorf("vector is not the statement's (cosine %.4f)", sim)
			}
		})
	}
}

// The ingest durable reads the whole stream and filters on the client: events of
// other types, its own memory_written among them, are acknowledged without being
// handled or dead-lettered.
func TestOtherEventsAreSkipped(t *testing.T) {
	r := startIngest(t)
	hit := events.New(events.TypeMemoryHit, "acme", "u1", "bot", "")
	hit.MemoryHit = &events.MemoryHit{MemoryIDs: []string{"m1"}}
	r.publish(t, hit)
	r.publish(t, events.New(events.TypeSessionEnded, "acme", "u1", "bot", "s1"))
	r.say(t, "u1", "s1", "Remember, I'm a student at Peking University", nil)
	r.settled(t)
	if eps := r.episodes(t, "u1"); len(eps) != 1 {
		t.Fatalf("episodic memories = %d, want 1", len(eps))
	}
	if dls, err := bus.ListDeadLetters(context.Background(), r.js, bus.DefaultDLQStream, 10); err != nil || len(dls) != 0 {
		t.Fatalf("dead letters %+v (%v), want none: other events are skipped, not rejected", dls, err)
	}
	if len(writtenEvents(t, r.js)) == 0 {
		t.Fatal("no memory_written event in the stream")
	}
}

// An event id is the identity of what it says: re-sent later (after the first was
// acked, so in another batch) with another ts it changes nothing, and re-sent with
// other content it is dead-lettered as a conflict and never overwrites the memory
// the first one wrote.
func TestEventIDAloneIsTheIdentity(t *testing.T) {
	r := startIngest(t)
	env := r.say(t, "u3", "s1", "Remember: my sales files have columns date, product, qty", nil)
	r.settled(t)
	first := r.episodes(t, "u3")
	if len(first) != 1 {
		t.Fatalf("episodic memories = %d, want 1", len(first))
	}

	resent := env
	resent.TS = env.TS.Add(-time.Hour)
	r.publish(t, resent)
	r.settled(t)
	if eps := r.episodes(t, "u3"); len(eps) != 1 || eps[0].ID != first[0].ID {
		t.Fatalf("after the same event with another ts: %d memories (ids %v), want the one %s", len(eps), ids(eps), first[0].ID)
	}

	forged := env
	forged.Observation = &events.Observation{Role: events.RoleUser, Text: "Remember: my sales files have columns region, revenue"}
	r.publish(t, forged)
	r.settled(t)
	eps := r.episodes(t, "u3")
	if len(eps) != 1 || eps[0].Text != first[0].Text {
		t.Fatalf("after the same id with other content: %d memories, text %q; want the first one unchanged", len(eps), eps[0].Text)
	}
	dls, err := bus.ListDeadLetters(context.Background(), r.js, bus.DefaultDLQStream, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(dls) != 1 || !strings.HasPrefix(dls[0].Reason, session.ErrEventIDReused.Error()) || dls[0].Class != bus.ClassMalformed {
		t.Fatalf("dead letters %+v, want one with reason %q", dls, session.ErrEventIDReused)
	}
}

func ids(recs []vectorstore.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.ID
	}
	return out
}

// observation is a user message of session s1 of user, not published.
func observation(user, text string) events.Envelope {
	env := events.New(events.TypeObservation, "acme", user, "bot", "s1")
	env.Observation = &events.Observation{Role: events.RoleUser, Text: text}
	return env
}

// A store failure of one episode in a batch fails that observation alone: the
// others of the batch are stored and succeed, and an observation that wrote no
// episode (a greeting, before it in the batch) is not blamed for it.
func TestStoreFailureFailsOnlyItsObservation(t *testing.T) {
	r, w := newIngest(t, ingest.Config{})
	ctx := context.Background()
	batch := []events.Envelope{
		observation("u1", "hi!"),
		observation("u1", "Remember: my sales files have columns date, product, qty"),
		observation("u1", "Remember: my invoices live in the finance share"),
	}
	// Another user already holds the id the second observation's episode gets, so
	// that upsert fails with ErrConflict.
	poisoned := records.EpisodeRecord("acme", "u1", records.Observation{EventID: batch[1].ID}, records.Episode{}).ID
	squatter := vectorstore.Record{ID: poisoned, Tenant: "acme", UserID: "u2", MemoryType: vectorstore.Episodic, Text: "x", TS: time.Now(), Vector: unitVector()}
	if err := r.vectors.Upsert(ctx, squatter); err != nil {
		t.Fatal(err)
	}
	errs := w.HandleBatch(ctx, batch)
	if errs[0] != nil || errs[2] != nil || !errors.Is(errs[1], vectorstore.ErrConflict) {
		t.Fatalf("results %v; want only the second observation failed with ErrConflict", errs)
	}
	if eps := r.episodes(t, "u1"); len(eps) != 1 || !strings.Contains(eps[0].Text, "finance share") {
		t.Fatalf("stored episodes %v, want the third observation's alone", ids(eps))
	}
}

// An observation whose memory_written announcement cannot be published fails (so
// it is retried), although its episode is stored: acking it would leave the
// consolidator never hearing of the memory.
func TestUnannouncedMemoryFailsItsObservation(t *testing.T) {
	r, w := newIngest(t, ingest.Config{})
	ctx := context.Background()
	// Without the event stream nothing on mem.> can be published; the session
	// state and the vector store live elsewhere and still work.
	if err := r.js.DeleteStream(ctx, bus.DefaultStream); err != nil {
		t.Fatal(err)
	}
	batch := []events.Envelope{observation("u1", "hello"), observation("u1", "Remember: my team meets on Tuesdays")}
	errs := w.HandleBatch(ctx, batch)
	if errs[0] != nil || errs[1] == nil || !strings.Contains(errs[1].Error(), "memory_written") {
		t.Fatalf("results %v; want the second observation failed by its memory_written publish", errs)
	}
}

// unitVector is a vector of the local embedder's dimensions, which the rig's store has.
func unitVector() []float32 {
	v := make([]float32, embed.DefaultLocalDimensions)
	v[0] = 1
	return v
}

// A batch waits while the process serves reads (the gate's foreground work): with
// a read held open, a batch whose context ends meanwhile fails without storing.
func TestBatchesLetReadsGoFirst(t *testing.T) {
	gate := priority.New(time.Hour)
	r, w := newIngest(t, ingest.Config{}, func(d *ingest.Deps) { d.Gate = gate })
	read := gate.Foreground()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	errs := w.HandleBatch(ctx, []events.Envelope{observation("u1", "Remember: my team meets on Tuesdays")})
	if !errors.Is(errs[0], context.DeadlineExceeded) {
		t.Fatalf("batch during a read: %v, want it to have waited until its deadline", errs[0])
	}
	read()
	if errs := w.HandleBatch(context.Background(), []events.Envelope{observation("u1", "Remember: my team meets on Tuesdays")}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	if n := len(r.episodes(t, "u1")); n != 1 {
		t.Fatalf("%d episodes, want the one of the batch after the read", n)
	}
}
