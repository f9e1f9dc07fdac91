package ingest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/bus"
	"github.com/agentmem/agentmem/pkg/bus/bustest"
	"github.com/agentmem/agentmem/pkg/cognitive"
	"github.com/agentmem/agentmem/pkg/embed"
	"github.com/agentmem/agentmem/pkg/ingest"
	"github.com/agentmem/agentmem/pkg/session"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

type rig struct {
	js       jetstream.JetStream
	sessions *session.Store
	vectors  vectorstore.Store
}

func startIngest(t *testing.T) rig {
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
	vectors, err := vectorstore.NewEmbedded(vectorstore.EmbeddedConfig{Path: filepath.Join(t.TempDir(), "v.db"), Dimensions: emb.Dimensions()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = vectors.Close() })
	w, err := ingest.New(ingest.Config{Router: bus.RouterConfig{Retry: bus.RetryConfig{InitialInterval: time.Millisecond}}}, ingest.Deps{
		Dial: func(name string) (*nats.Conn, error) {
			return nats.Connect("", nats.InProcessServer(srv), nats.Name(name))
		},
		JS:       js,
		Sessions: sessions,
		Decider:  cognitive.NewRuleDecider(),
		Vectors:  vectors,
		Embedder: emb,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
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
	return rig{js: js, sessions: sessions, vectors: vectors}
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
	data, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	subject, err := env.Subject()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.js.Publish(context.Background(), subject, data); err != nil {
		t.Fatal(err)
	}
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
	eps := r.episodes(t, "u1")
	if len(eps) != 1 {
		t.Fatalf("episodic memories = %d (%v), want exactly 1: greetings and knowledge questions are not written", len(eps), eps)
	}
	ep := eps[0]
	if ep.Who != "user" || ep.ChatID != "s1" || !ep.TS.Equal(remember.TS.Truncate(time.Microsecond)) {
		t.Fatalf("episode = who %q chat %q ts %v", ep.Who, ep.ChatID, ep.TS)
	}
	ids, _ := ep.Metadata[cognitive.MetaSourceEventIDs].([]any)
	metas, _ := ep.Metadata[cognitive.MetaSourceMeta].([]any)
	if len(ids) != 1 || ids[0] != remember.ID || len(metas) != 1 || metas[0].(map[string]any)["dia_id"] != "D1:3" {
		t.Fatalf("provenance = %v / %v", ep.Metadata[cognitive.MetaSourceEventIDs], ep.Metadata[cognitive.MetaSourceMeta])
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
