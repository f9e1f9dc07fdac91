package consolidate_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/bus/bustest"
	"github.com/agentmem/agentmem/pkg/consolidate"
	"github.com/agentmem/agentmem/pkg/embed"
	"github.com/agentmem/agentmem/pkg/eventstore"
	"github.com/agentmem/agentmem/pkg/memory"
	"github.com/agentmem/agentmem/pkg/processor"
	"github.com/agentmem/agentmem/pkg/records"
	"github.com/agentmem/agentmem/pkg/vectorstore"
	"github.com/agentmem/agentmem/pkg/vectorstore/embedded"
)

const (
	tenant  = "acme"
	user    = "u1"
	wait    = 15 * time.Second
	student = "Remember, I'm a student at Peking University"
	fact    = "User is a student at Peking University."
)

// base is the time of the first chat of every scenario.
var base = time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)

// testEnv is one real deployment: embedded NATS, embedded vector store, the local
// embedder and the memory service (history and TTL sweep).
type testEnv struct {
	srv   *server.Server
	js    jetstream.JetStream
	store vectorstore.Store
	emb   embed.Embedder
	mem   *memory.Service
}

func newEnv(t testing.TB) *testEnv {
	t.Helper()
	srv, _, js := bustest.Provisioned(t)
	emb, err := embed.NewLocal(embed.LocalConfig{})
	if err != nil {
		t.Fatal(err)
	}
	store, err := embedded.New(embedded.Config{Path: filepath.Join(t.TempDir(), "vectors.db"), Dimensions: emb.Dimensions()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	mem, err := memory.New(testCtx(t), memory.Config{}, memory.Deps{Vectors: store, Embedder: emb, JS: js}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &testEnv{srv: srv, js: js, store: store, emb: emb, mem: mem}
}

func testCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// runner returns a Runner on env; edit adjusts its config and deps.
func (e *testEnv) runner(t testing.TB, owner string, edit func(*consolidate.RunnerConfig, *consolidate.RunnerDeps)) *consolidate.Runner {
	t.Helper()
	cfg := consolidate.RunnerConfig{}
	deps := consolidate.RunnerDeps{JS: e.js, Vectors: e.store, Embedder: e.emb, History: e.mem.Log(), Sweeper: e.mem, Owner: owner}
	if edit != nil {
		edit(&cfg, &deps)
	}
	r, err := consolidate.NewRunner(testCtx(t), cfg, deps, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// episode stores the episodic memory the rule decider makes of text said by the
// user in chat at ts, as ingest would.
func (e *testEnv) episode(t testing.TB, userID, chat string, ts time.Time, text string) vectorstore.Record {
	t.Helper()
	ctx := testCtx(t)
	obs := records.Observation{Role: "user", Text: text, TS: ts, ChatID: chat, EventID: fmt.Sprintf("ev-%s-%s-%d", userID, chat, ts.Unix())}
	ep, err := processor.NewRuleDecider().Decide(ctx, obs)
	if err != nil || !ep.Write {
		t.Fatalf("decider does not write %q: %+v, %v", text, ep, err)
	}
	rec := records.EpisodeRecord(tenant, userID, obs, ep)
	rec.Metadata[records.MetaSourceEventIDs] = []any{obs.EventID}
	vecs, err := e.emb.Embed(ctx, []string{rec.Text})
	if err != nil {
		t.Fatal(err)
	}
	rec.Vector = vecs[0]
	if err := e.store.Upsert(ctx, rec); err != nil {
		t.Fatal(err)
	}
	return rec
}

// records returns the user's records of type mt, by id.
func (e *testEnv) records(t *testing.T, userID string, mt vectorstore.MemoryType) []vectorstore.Record {
	t.Helper()
	recs, _, err := e.store.Scroll(testCtx(t), vectorstore.Filter{Tenant: tenant, UserID: userID, MemoryTypes: []vectorstore.MemoryType{mt}}, "", 1000)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

func (e *testEnv) get(t *testing.T, userID, id string) vectorstore.Record {
	t.Helper()
	recs, err := e.store.Get(testCtx(t), tenant, userID, id)
	if err != nil || len(recs) != 1 {
		t.Fatalf("get %s: %d records, %v", id, len(recs), err)
	}
	return recs[0]
}

// ops lists the operations in a memory's history, oldest first.
func (e *testEnv) ops(t *testing.T, userID, id string) []string {
	t.Helper()
	changes, err := e.mem.Log().List(testCtx(t), tenant, userID, id)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range changes {
		out = append(out, c.Op)
	}
	return out
}

// snapshot is the whole partition as JSON, to compare states.
func (e *testEnv) snapshot(t *testing.T, userID string) string {
	t.Helper()
	recs, _, err := e.store.Scroll(testCtx(t), vectorstore.Filter{Tenant: tenant, UserID: userID}, "", 1000)
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(recs)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// publish sends env on its subject with its id as Nats-Msg-Id, as producers do.
func publish(t testing.TB, js jetstream.JetStream, env events.Envelope) {
	t.Helper()
	msg, err := eventstore.Msg(env)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.PublishMsg(testCtx(t), msg); err != nil {
		t.Fatal(err)
	}
}

// hitEvent is a memory_hit of a context request in a session of its own, so that
// every event may reconsolidate (once per session).
func hitEvent(userID, query string, ids ...string) events.Envelope {
	return hitEventIn(ulid.Make().String(), userID, query, ids...)
}

// hitEventIn is a memory_hit of a context request in session ("" for none).
func hitEventIn(session, userID, query string, ids ...string) events.Envelope {
	env := events.New(events.TypeMemoryHit, tenant, userID, "", session)
	env.MemoryHit = &events.MemoryHit{MemoryIDs: ids, Query: query}
	return env
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// strs reads a metadata list of strings.
func strs(v any) []string {
	var out []string
	if l, ok := v.([]any); ok {
		for _, x := range l {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
	}
	return out
}
