package retrieve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"go.uber.org/zap"
	"pgregory.net/rapid"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/bus/bustest"
	"github.com/agentmem/agentmem/pkg/consolidate"
	"github.com/agentmem/agentmem/pkg/docstore"
	"github.com/agentmem/agentmem/pkg/embed"
	"github.com/agentmem/agentmem/pkg/eventstore"
	"github.com/agentmem/agentmem/pkg/extract"
	"github.com/agentmem/agentmem/pkg/memory"
	"github.com/agentmem/agentmem/pkg/records"
	"github.com/agentmem/agentmem/pkg/session"
	"github.com/agentmem/agentmem/pkg/transfer"
	"github.com/agentmem/agentmem/pkg/vectorstore"
	"github.com/agentmem/agentmem/pkg/vectorstore/embedded"
)

var _ Consolidator = (*consolidate.Runner)(nil)

const tenant = "acme"

// rig is a retriever over real parts: an embedded nats-server, the filesystem
// DocStore, the event and session stores, and pkg/memory over the embedded vector
// store with the local embedder.
type rig struct {
	t        testing.TB
	nc       *nats.Conn
	js       jetstream.JetStream
	baseDir  string
	docs     *docstore.Store
	events   *eventstore.Store
	sessions *session.Store
	vectors  *embedded.Store
	emb      embed.Embedder
	mem      *memory.Service
	now      time.Time
}

func newRig(t testing.TB) *rig {
	t.Helper()
	ctx := context.Background()
	_, nc, js := bustest.Provisioned(t)
	r := &rig{t: t, nc: nc, js: js, baseDir: t.TempDir(), now: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)}
	fs, err := docstore.NewFilesystem(docstore.FilesystemConfig{BaseDir: r.baseDir}, nil)
	must(t, err)
	r.docs, err = docstore.New(docstore.Config{Now: func() time.Time { return r.now }}, fs, nil)
	must(t, err)
	// Reads admit texts up to 1 MiB: TestEveryEndpointAnswersWithOversizeRecordsStored
	// stores events from before the limits existed and reads them back.
	r.events, err = eventstore.New(eventstore.Config{Limits: events.Limits{MaxTextBytes: 1 << 20}}, js, nil)
	must(t, err)
	r.sessions, err = session.New(ctx, session.Config{}, js, nil)
	must(t, err)
	r.vectors, err = embedded.New(embedded.Config{Path: filepath.Join(t.TempDir(), "vectors.db"), Dimensions: embed.DefaultLocalDimensions}, nil)
	must(t, err)
	t.Cleanup(func() { _ = r.vectors.Close() })
	r.emb, err = embed.NewLocal(embed.LocalConfig{})
	must(t, err)
	r.mem, err = memory.New(ctx, memory.Config{}, memory.Deps{Vectors: r.vectors, Embedder: r.emb, JS: js}, nil)
	must(t, err)
	return r
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func (r *rig) deps() Deps {
	moves, err := transfer.New(transfer.Config{PageBytes: int(r.nc.MaxPayload()) * 7 / 10},
		transfer.Deps{JS: r.js, Docs: r.docs, Vectors: r.vectors, Embedder: r.emb, Sessions: r.sessions, Events: r.events}, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	return Deps{Conn: r.nc, JS: r.js, Docs: r.docs, Events: r.events, Sessions: r.sessions, Memories: r.mem, Transfer: moves,
		Summarize: extract.SummarizeSession, Now: func() time.Time { return r.now }}
}

// start runs a retriever until the test ends and waits until it serves.
func (r *rig) start(cfg Config) *Service {
	r.t.Helper()
	return r.startWith(cfg, r.deps())
}

// startWith is start with deps of the test's own.
func (r *rig) startWith(cfg Config, deps Deps) *Service {
	r.t.Helper()
	return r.startLogged(cfg, deps, nil)
}

// startLogged is startWith with the retriever logging to logger.
func (r *rig) startLogged(cfg Config, deps Deps, logger *zap.Logger) *Service {
	r.t.Helper()
	svc, err := New(cfg, deps, logger)
	must(r.t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	r.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			r.t.Errorf("Run: %v", err)
		}
	})
	bustest.Eventually(r.t, 5*time.Second, func() error { return svc.Ready(ctx) })
	return svc
}

func (r *rig) write(user, name, content string) {
	r.t.Helper()
	path := filepath.Join(r.baseDir, tenant, user, filepath.FromSlash(name))
	must(r.t, os.MkdirAll(filepath.Dir(path), 0o755))
	must(r.t, os.WriteFile(path, []byte(content), 0o644))
}

func (r *rig) call(endpoint string, req any) *nats.Msg {
	r.t.Helper()
	data, ok := req.([]byte)
	if !ok {
		var err error
		data, err = json.Marshal(req)
		must(r.t, err)
	}
	subject, err := events.RPCSubject(tenant, endpoint)
	must(r.t, err)
	msg, err := r.nc.Request(subject, data, 10*time.Second)
	must(r.t, err)
	return msg
}

// ok decodes a successful reply into T.
func ok[T any](t testing.TB, msg *nats.Msg) T {
	t.Helper()
	if code := msg.Header.Get(micro.ErrorCodeHeader); code != "" {
		t.Fatalf("error reply %s: %s", code, msg.Header.Get(micro.ErrorHeader))
	}
	var v T
	must(t, json.Unmarshal(msg.Data, &v))
	return v
}

// failed checks an error reply's code and returns its message.
func failed(t testing.TB, msg *nats.Msg, code string) string {
	t.Helper()
	if got := msg.Header.Get(micro.ErrorCodeHeader); got != code {
		t.Fatalf("error code %q (%s), want %q; body %s", got, msg.Header.Get(micro.ErrorHeader), code, msg.Data)
	}
	return msg.Header.Get(micro.ErrorHeader)
}

// observe stores a user message of a session in the stream and the session state,
// as ingest would.
func (r *rig) observe(user, sess, text string, meta map[string]any) events.Envelope {
	r.t.Helper()
	env := events.New(events.TypeObservation, tenant, user, "bot", sess)
	env.Observation = &events.Observation{Role: events.RoleUser, Text: text, Meta: meta}
	ctx := context.Background()
	_, err := r.events.Save(ctx, env)
	must(r.t, err)
	_, _, err = r.sessions.Apply(ctx, env)
	must(r.t, err)
	return env
}

// memory stores a vector memory with provenance directly in the vector store.
func (r *rig) memory(user string, typ vectorstore.MemoryType, text string, eventIDs []string, meta []map[string]any) string {
	r.t.Helper()
	vec, err := r.emb.Embed(context.Background(), []string{text})
	must(r.t, err)
	id := vectorstore.DeterministicID(tenant, user, text)
	rec := vectorstore.Record{
		ID: id, Tenant: tenant, UserID: user, MemoryType: typ, Text: text, Vector: vec[0], TS: r.now, ChatID: "s1",
		Metadata: map[string]any{records.MetaSourceEventIDs: eventIDs, records.MetaSourceMeta: meta},
	}
	must(r.t, r.vectors.Upsert(context.Background(), rec))
	return id
}

func lines(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "line %d of the core memory\n", i)
	}
	return b.String()
}

func TestContextCoreIsFirstAutoLoadLines(t *testing.T) { // SPEC A2
	r := newRig(t)
	r.start(Config{})
	full := lines(300)
	r.write("u1", "MEMORY.md", full)
	r.write("u2", "MEMORY.md", lines(7))

	pack := ok[events.ContextPack](t, r.call(events.EndpointContext, events.ContextRequest{UserID: "u1", Query: "core"}))
	want := strings.Join(strings.SplitAfter(full, "\n")[:200], "")
	if pack.Core == nil || pack.Core.Text != want {
		t.Fatalf("core is not the first 200 lines: %+v", pack.Core)
	}
	if !strings.HasPrefix(pack.Prompt, "## Core memory\n\nline 1 of") || !strings.Contains(pack.Prompt, "line 200 of") {
		t.Fatalf("prompt does not render the core:\n%s", pack.Prompt)
	}

	short := ok[events.ContextPack](t, r.call(events.EndpointContext, events.ContextRequest{UserID: "u2", Query: "core"}))
	if short.Core == nil || short.Core.Text != lines(7) {
		t.Fatalf("short file: core %v, want all 7 lines", short.Core)
	}

	missing := ok[events.ContextPack](t, r.call(events.EndpointContext, events.ContextRequest{UserID: "u3", Query: "core"}))
	if missing.Core != nil || missing.Counts.Core != 0 || strings.Contains(missing.Prompt, "Core memory") {
		t.Fatalf("missing MEMORY.md gave core %v, prompt %q", missing.Core, missing.Prompt)
	}
	r.write("u4", "MEMORY.md", "")
	empty := ok[events.ContextPack](t, r.call(events.EndpointContext, events.ContextRequest{UserID: "u4", Query: "core"}))
	if empty.Core != nil {
		t.Fatalf("empty MEMORY.md gave core %v", empty.Core)
	}
}

func TestContextTopicsOnDemand(t *testing.T) { // SPEC A5
	r := newRig(t)
	r.start(Config{})
	r.write("u1", "file_patterns.md", "Sales files: columns date, product, qty.\n")
	r.write("u1", "user_prefs.md", "Prefers bar charts in dark theme.\n")

	topics := func(query string) []string {
		pack := ok[events.ContextPack](t, r.call(events.EndpointContext, events.ContextRequest{UserID: "u1", Query: query}))
		var names []string
		for _, tp := range pack.Topics {
			names = append(names, tp.ID+"="+tp.Text)
			if !strings.Contains(pack.Prompt, "## Topic: "+tp.ID) {
				t.Errorf("prompt lacks topic %s", tp.ID)
			}
		}
		return names
	}
	if got := topics("which columns do my sales files have?"); !slices.Equal(got, []string{"file_patterns=Sales files: columns date, product, qty.\n"}) {
		t.Errorf("file structure query loaded %q", got)
	}
	if got := topics("what chart style do I like?"); !slices.Equal(got, []string{"user_prefs=Prefers bar charts in dark theme.\n"}) {
		t.Errorf("preference query loaded %q", got)
	}
	// Inflected forms match as the listed words do (the rules go through the tokenizer).
	for _, q := range []string{"what is in the tables?", "how is that structured?", "which records?"} {
		if got := topics(q); !slices.Equal(got, []string{"file_patterns=Sales files: columns date, product, qty.\n"}) {
			t.Errorf("file structure query %q loaded %q", q, got)
		}
	}
	for _, q := range []string{"which formatting do I prefer?", "my preferences?", "what are my favorites?"} {
		if got := topics(q); !slices.Equal(got, []string{"user_prefs=Prefers bar charts in dark theme.\n"}) {
			t.Errorf("preference query %q loaded %q", q, got)
		}
	}
	if got := topics("hello there"); len(got) != 0 {
		t.Errorf("unrelated query loaded %q", got)
	}
	light := ok[events.ContextPack](t, r.call(events.EndpointContext, events.ContextRequest{UserID: "u1", Query: "which columns?", Lightweight: true}))
	if len(light.Topics) != 0 {
		t.Errorf("lightweight pack has topics %v", light.Topics)
	}
}

func TestContextChunksAndRecentDailyNotes(t *testing.T) { // SPEC A10
	r := newRig(t)
	r.start(Config{AutoLoadLines: 1}) // the core is the title: chunks are not in it (dedupe)
	doc := "# Memory\n\n## 2026-11-01\n\nThe invoice template lives in finance/invoices.xlsx.\n\n## 2026-11-02\n\nThe user walks a dog named Rex.\n"
	r.write("u1", "MEMORY.md", doc)
	for _, d := range []int{0, 2, 3, 10} { // today, 2 and 3 days ago, 10 days ago
		day := r.now.AddDate(0, 0, -d)
		r.write("u1", day.Format("200601/20060102.md"), fmt.Sprintf("note of day -%d\n", d))
	}
	pack := ok[events.ContextPack](t, r.call(events.EndpointContext, events.ContextRequest{UserID: "u1", Query: "where is the invoice template?"}))
	if len(pack.Chunks) == 0 || !strings.Contains(pack.Chunks[0].Text, "invoice template") || pack.Chunks[0].ID != "MEMORY.md#L3-5" {
		t.Fatalf("chunks %+v", pack.Chunks)
	}
	for _, c := range pack.Chunks {
		if strings.Contains(c.Text, "Rex") {
			t.Errorf("irrelevant chunk returned: %q", c.Text)
		}
	}
	var notes []string
	for _, n := range pack.DailyNotes {
		notes = append(notes, strings.TrimSpace(n.Text))
	}
	if want := []string{"note of day -0", "note of day -2"}; !slices.Equal(notes, want) { // recent_days 3
		t.Fatalf("daily notes %q, want %q", notes, want)
	}
	if pack.Counts.Chunks != len(pack.Chunks) || pack.Counts.DailyNotes != 2 || pack.TokenEstimate != (len([]rune(pack.Prompt))+3)/4 {
		t.Fatalf("counts %+v, token estimate %d", pack.Counts, pack.TokenEstimate)
	}
	if err := pack.Validate(); err != nil {
		t.Fatalf("pack does not validate: %v", err)
	}

	whole := ok[events.ContextPack](t, r.call(events.EndpointContext, events.ContextRequest{UserID: "u1"}))
	if whole.Core == nil || whole.Core.Text != doc || len(whole.Chunks) != 0 || len(whole.DailyNotes) != 2 {
		t.Fatalf("no query: core %v, chunks %d, notes %d; want the whole file and the notes", whole.Core, len(whole.Chunks), len(whole.DailyNotes))
	}
}

// TestContextChunksFollowMemoryEdits: the chunk index is cached per namespace,
// and an edited MEMORY.md must be searched as edited on the next request.
func TestContextChunksFollowMemoryEdits(t *testing.T) { // SPEC A10
	r := newRig(t)
	r.start(Config{AutoLoadLines: 1}) // the core is the title: chunks are not in it (dedupe)
	req := events.ContextRequest{UserID: "u1", Query: "where is the invoice template?"}
	r.write("u1", "MEMORY.md", "# Memory\n\nThe invoice template lives in finance/invoices.xlsx.\n")
	first := ok[events.ContextPack](t, r.call(events.EndpointContext, req))
	if len(first.Chunks) != 1 || !strings.Contains(first.Chunks[0].Text, "finance/invoices.xlsx") {
		t.Fatalf("before the edit: chunks %+v", first.Chunks)
	}
	r.write("u1", "MEMORY.md", "# Memory\n\nThe user walks a dog.\n\nThe invoice template moved to shared/templates.xlsx.\n")
	second := ok[events.ContextPack](t, r.call(events.EndpointContext, req))
	if len(second.Chunks) != 1 || !strings.Contains(second.Chunks[0].Text, "shared/templates.xlsx") || second.Chunks[0].ID != "MEMORY.md#L5-5" {
		t.Fatalf("after the edit: chunks %+v", second.Chunks)
	}
}

// TestContextSeesEditsOfCachedFiles: once MEMORY.md and a topic file are cached
// (settled, so only their stat is checked per request), an edit is in the very
// next pack, whether the docstore replaced the file or another program rewrote
// it in place with the same size.
func TestContextSeesEditsOfCachedFiles(t *testing.T) { // SPEC A2, A5, A10
	r := newRig(t)
	svc := r.start(Config{})
	ctx := context.Background()
	ns := docstore.Namespace{Tenant: tenant, User: "u1"}
	req := events.ContextRequest{UserID: "u1", Query: "which columns does the invoice file have?"}
	ask := func() events.ContextPack { return ok[events.ContextPack](t, r.call(events.EndpointContext, req)) }
	settled := func() {
		t.Helper()
		bustest.Eventually(t, 5*time.Second, func() error {
			ask()
			for _, name := range []string{docstore.MemoryFile, docstore.FilePatternsFile} {
				if d, ok := svc.docs.Peek(docKey{ns, name}); !ok || d.version == (docstore.Version{}) {
					return fmt.Errorf("%s not cached yet", name)
				}
			}
			return nil
		})
	}
	expect := func(step, memory, topic string) {
		t.Helper()
		pack := ask()
		// The core holds the whole file, so no chunk repeats it (dedupe).
		if pack.Core == nil || !strings.Contains(pack.Core.Text, memory) || len(pack.Chunks) != 0 {
			t.Fatalf("%s: core %v, chunks %+v; want %q", step, pack.Core, pack.Chunks, memory)
		}
		if len(pack.Topics) != 1 || !strings.Contains(pack.Topics[0].Text, topic) {
			t.Fatalf("%s: topics %+v; want %q", step, pack.Topics, topic)
		}
	}

	r.write("u1", "MEMORY.md", "# Memory\n\nThe invoice file is finance/a.xlsx.\n")
	r.write("u1", "file_patterns.md", "Invoice files: columns date, total.\n")
	settled()
	expect("before the edits", "finance/a.xlsx", "columns date, total")

	_, err := r.docs.Replace(ctx, ns, docstore.MemoryFile, []byte("# Memory\n\nThe invoice file is finance/b.xlsx.\n"))
	must(t, err)
	_, err = r.docs.Replace(ctx, ns, docstore.FilePatternsFile, []byte("Invoice files: columns date, vat.\n"))
	must(t, err)
	expect("after a Replace", "finance/b.xlsx", "columns date, vat")

	settled()
	r.write("u1", "MEMORY.md", "# Memory\n\nThe invoice file is finance/c.xlsx.\n")
	r.write("u1", "file_patterns.md", "Invoice files: columns date, net.\n")
	expect("after a rewrite in place", "finance/c.xlsx", "columns date, net")
}

func TestContextSessionHistory(t *testing.T) { // SPEC B3, B1 overlay, B5 new sessions only
	r := newRig(t)
	r.start(Config{})
	for _, s := range []string{"s1", "s2"} {
		for i := 1; i <= 12; i++ {
			text := fmt.Sprintf("message %d about the weather", i)
			if i == 3 || i == 9 {
				text = fmt.Sprintf("message %d: the invoice total is wrong", i)
			}
			r.observe("u1", s, text, nil)
		}
	}
	texts := func(sess string) []string {
		pack := ok[events.ContextPack](t, r.call(events.EndpointContext, events.ContextRequest{UserID: "u1", SessionID: sess, Query: "fix the invoice"}))
		var out []string
		for _, e := range pack.RecentEvents {
			out = append(out, e.Obs.Text)
		}
		return out
	}
	got := texts("s1")
	if len(got) != 8 || got[0] != "message 5 about the weather" || got[7] != "message 12 about the weather" {
		t.Fatalf("fallback history %q, want the last 8 messages", got)
	}

	_, err := r.docs.SetPolicyOverrides(context.Background(), docstore.Namespace{Tenant: tenant, User: "u1"}, []byte(`{"session_relevant_history_limit": 2}`))
	must(t, err)
	want := []string{"message 3: the invoice total is wrong", "message 9: the invoice total is wrong"}
	if got := texts("s2"); !slices.Equal(got, want) {
		t.Fatalf("relevant history %q, want %q", got, want)
	}
	if got := texts("s1"); len(got) != 8 {
		t.Fatalf("a running session changed policy mid-session: %q", got)
	}
}

func TestContextProvenanceAndMemoryHit(t *testing.T) { // SPEC C4, D1 provenance
	r := newRig(t)
	r.start(Config{})
	meta := []map[string]any{{"dia_id": "D1:3"}}
	ep := r.memory("u1", vectorstore.Episodic, "The user's sales files have columns date, product and qty", []string{"01JD3QZ7X4K9M2N8P5R6S7T8V9"}, meta)
	sem := r.memory("u1", vectorstore.Semantic, "Sales files have columns date, product, qty", []string{"01JD3QZ7X4K9M2N8P5R6S7T8VA"}, nil)
	r.memory("u2", vectorstore.Episodic, "Other user's sales files have columns region", nil, nil)

	pack := ok[events.ContextPack](t, r.call(events.EndpointContext, events.ContextRequest{UserID: "u1", SessionID: "s9", Query: "which columns do my sales files have?"}))
	if len(pack.EpisodicItems) != 1 || len(pack.SemanticItems) != 1 {
		t.Fatalf("episodic %+v semantic %+v", pack.EpisodicItems, pack.SemanticItems)
	}
	e := pack.EpisodicItems[0]
	if e.ID != ep || !slices.Equal(e.Source.EventIDs, []string{"01JD3QZ7X4K9M2N8P5R6S7T8V9"}) || len(e.Source.Meta) != 1 || e.Source.Meta[0]["dia_id"] != "D1:3" || !slices.Equal(e.Source.SessionIDs, []string{"s1"}) {
		t.Fatalf("episodic provenance %+v", e)
	}
	if pack.SemanticItems[0].ID != sem || !strings.Contains(pack.Prompt, "## Known facts") || !strings.Contains(pack.Prompt, "## Episodic memories") {
		t.Fatalf("semantic %+v / prompt %s", pack.SemanticItems, pack.Prompt)
	}

	subject, _ := events.HitSubject(tenant, "u1")
	var hit events.Envelope
	bustest.Eventually(t, 5*time.Second, func() error {
		stream, err := r.js.Stream(context.Background(), "AGENTMEM")
		if err != nil {
			return err
		}
		msg, err := stream.GetLastMsgForSubject(context.Background(), subject)
		if err != nil {
			return err
		}
		if msg.Header.Get(events.HeaderMsgID) == "" {
			return errors.New("memory_hit published without Nats-Msg-Id")
		}
		hit, err = events.Decode(msg.Data)
		if err == nil && msg.Header.Get(events.HeaderMsgID) != hit.ID {
			err = fmt.Errorf("Nats-Msg-Id %s is not the event id %s", msg.Header.Get(events.HeaderMsgID), hit.ID)
		}
		return err
	})
	if got, want := hit.MemoryHit.MemoryIDs, []string{ep, sem}; !slices.Equal(got, want) || hit.SessionID != "s9" || hit.MemoryHit.Query != pack.Query {
		t.Fatalf("memory_hit %+v, want ids %v", hit.MemoryHit, want)
	}
	info, err := r.js.Stream(context.Background(), "AGENTMEM")
	must(t, err)
	si, err := info.Info(context.Background(), jetstream.WithSubjectFilter(events.FilterHits))
	must(t, err)
	if n := si.State.Subjects[subject]; n != 1 {
		t.Fatalf("%d memory_hit events for one pack, want 1", n)
	}

	light := ok[events.ContextPack](t, r.call(events.EndpointContext, events.ContextRequest{UserID: "u1", Query: "sales columns", Lightweight: true}))
	if len(light.EpisodicItems)+len(light.SemanticItems)+len(light.Chunks) != 0 {
		t.Fatalf("lightweight pack recalled vector memories or chunks: %+v", light.Counts)
	}
}

func TestTopicEndpoint(t *testing.T) { // SPEC A5 whitelist
	r := newRig(t)
	r.start(Config{})
	r.write("u1", "user_prefs.md", "Bar charts.\n")
	for _, bad := range []string{"../x", "MEMORY", "/etc/passwd", "user_prefs/../../MEMORY"} {
		msg := failed(t, r.call(events.EndpointTopic, events.TopicRequest{UserID: "u1", Topic: bad}), events.RPCCodeBadRequest)
		if !strings.Contains(msg, "allowed topics are") || !strings.Contains(msg, "unknown topic") {
			t.Errorf("topic %q: message %q does not name the rule", bad, msg)
		}
	}
	got := ok[events.TopicReply](t, r.call(events.EndpointTopic, events.TopicRequest{UserID: "u1", Topic: "user_prefs.md"}))
	if got.Topic != "user_prefs" || got.Content != "Bar charts.\n" {
		t.Fatalf("topic reply %+v", got)
	}
	empty := ok[events.TopicReply](t, r.call(events.EndpointTopic, events.TopicRequest{UserID: "u1", Topic: "file_patterns"}))
	if empty.Content != "" {
		t.Fatalf("missing topic file gave %q", empty.Content)
	}
}

func TestBadRequestsAre400(t *testing.T) {
	r := newRig(t)
	r.start(Config{})
	for _, ep := range events.Endpoints {
		msg := failed(t, r.call(ep, []byte(`{"user_id":`)), events.RPCCodeBadRequest)
		if !strings.Contains(msg, "malformed JSON") {
			t.Errorf("%s: malformed JSON message %q", ep, msg)
		}
	}
	msg := failed(t, r.call(events.EndpointContext, events.ContextRequest{UserID: "u 1"}), events.RPCCodeBadRequest)
	if !strings.Contains(msg, `user_id "u 1" has character ' '`) {
		t.Errorf("invalid user id message %q", msg)
	}
	failed(t, r.call(events.EndpointGet, events.GetRequest{UserID: "u1", ID: "9b2c6f0e-1d2a-4c3b-8e7f-0a1b2c3d4e5f"}), events.RPCCodeNotFound)
	failed(t, r.call(events.EndpointSessionSummary, events.SessionRequest{UserID: "u1", SessionID: "nope"}), events.RPCCodeNotFound)
	failed(t, r.call(events.EndpointConsolidate, events.ConsolidateRequest{UserID: "u1"}), events.RPCCodeUnavailable)
}

func TestDiscovery(t *testing.T) { // SPEC E3
	r := newRig(t)
	svc := r.start(Config{})
	ok[events.TopicReply](t, r.call(events.EndpointTopic, events.TopicRequest{UserID: "u1", Topic: "user_prefs"}))

	subject, err := micro.ControlSubject(micro.InfoVerb, DefaultServiceName, "")
	must(t, err)
	msg, err := r.nc.Request(subject, nil, 5*time.Second)
	must(t, err)
	var info micro.Info
	must(t, json.Unmarshal(msg.Data, &info))
	got := map[string]string{}
	for _, ep := range info.Endpoints {
		got[ep.Metadata["endpoint"]] = ep.Subject
		if ep.QueueGroup != DefaultQueueGroup {
			t.Errorf("endpoint %s queue group %q", ep.Name, ep.QueueGroup)
		}
	}
	for _, ep := range events.Endpoints {
		if want, _ := events.RPCServiceSubject(ep); got[ep] != want {
			t.Errorf("endpoint %s on %q, want %q", ep, got[ep], want)
		}
	}
	mine, _ := svc.Info()
	subject, err = micro.ControlSubject(micro.StatsVerb, DefaultServiceName, mine.ID)
	must(t, err)
	// micro counts a request once its handler has returned, which is after the
	// reply went out: poll.
	bustest.Eventually(t, 5*time.Second, func() error {
		msg, err := r.nc.Request(subject, nil, 5*time.Second)
		if err != nil {
			return err
		}
		var stats micro.Stats
		if err := json.Unmarshal(msg.Data, &stats); err != nil {
			return err
		}
		for _, ep := range stats.Endpoints {
			if ep.Name == "topic" && ep.NumRequests != 1 {
				return fmt.Errorf("topic stats %+v, want 1 request", ep)
			}
		}
		return nil
	})
}

func TestReplicasShareQueueGroup(t *testing.T) { // SPEC E2/E3: N replicas, each request answered once
	r := newRig(t)
	a, b := r.start(Config{}), r.start(Config{})
	const n = 200
	for i := 0; i < n; i++ {
		ok[events.TopicReply](t, r.call(events.EndpointTopic, events.TopicRequest{UserID: "u1", Topic: "user_prefs"}))
	}
	count := func(svc *Service) int {
		info, _ := svc.Info()
		subject, _ := micro.ControlSubject(micro.StatsVerb, DefaultServiceName, info.ID)
		msg, err := r.nc.Request(subject, nil, 5*time.Second)
		must(t, err)
		var stats micro.Stats
		must(t, json.Unmarshal(msg.Data, &stats))
		for _, ep := range stats.Endpoints {
			if ep.Name == "topic" {
				return ep.NumRequests
			}
		}
		return 0
	}
	// A service counts a request once its handler has returned, after the reply
	// went out: the last count can trail the last reply.
	bustest.Eventually(t, 5*time.Second, func() error {
		if ca, cb := count(a), count(b); ca == 0 || cb == 0 || ca+cb != n {
			return fmt.Errorf("replica a answered %d, b %d; want both > 0 and %d in total", ca, cb, n)
		}
		return nil
	})
}

func TestSessionArchiveClearRestore(t *testing.T) { // SPEC D5
	r := newRig(t)
	r.start(Config{})
	ctx := context.Background()
	var ids []string
	for i := 0; i < 5; i++ {
		ids = append(ids, r.observe("u1", "s1", fmt.Sprintf("Remember: report %d uses the blue template.", i), map[string]any{"dia_id": fmt.Sprintf("D1:%d", i)}).ID)
	}
	key := tenant + ".u1.s1"
	must(t, r.sessions.SaveTurn(ctx, events.TurnRecord{TurnID: "t1", SessionKey: key, Status: events.TurnOK, StartedTS: r.now, FinishedTS: r.now.Add(time.Second)}))
	_, err := r.mem.SaveItem(ctx, tenant, "u1", events.MemoryItem{Scope: events.ScopeSession, SessionID: "s1", Kind: events.ItemGoal, Key: "goal", Content: "finish the report", Confidence: 0.9})
	must(t, err)

	sum := ok[events.SessionSummaryReply](t, r.call(events.EndpointSessionSummary, events.SessionRequest{UserID: "u1", SessionID: "s1"}))
	if sum.MessageCount != 5 || sum.TurnCount != 1 || !strings.Contains(sum.Summary, "Request: Remember: report 0") {
		t.Fatalf("summary %+v", sum)
	}

	archive := ok[events.SessionArchive](t, r.call(events.EndpointSessionArchive, events.SessionRequest{UserID: "u1", SessionID: "s1"}))
	if len(archive.Events) != 5 || len(archive.Turns) != 1 || len(archive.Items) != 1 || archive.Validate() != nil {
		t.Fatalf("archive: %d events, %d turns, %d items, valid: %v", len(archive.Events), len(archive.Turns), len(archive.Items), archive.Validate())
	}

	cleared := ok[events.DeleteReply](t, r.call(events.EndpointSessionClear, events.SessionRequest{UserID: "u1", SessionID: "s1"}))
	if cleared.Deleted != 7 {
		t.Fatalf("clear deleted %d, want 5 events + 1 turn + 1 item", cleared.Deleted)
	}
	if n, _ := r.events.CountSession(ctx, tenant, "u1", "s1"); n != 0 {
		t.Fatalf("%d events left after clear", n)
	}
	if _, err := r.sessions.Get(ctx, tenant, "u1", "s1"); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("session state after clear: %v", err)
	}

	for i, want := range []events.SessionRestoreReply{{SessionID: "s1", Events: 5, Turns: 1, Items: 1}, {SessionID: "s1", Events: 0, Turns: 1, Items: 1}} {
		got := ok[events.SessionRestoreReply](t, r.call(events.EndpointSessionRestore, archive))
		if got != want {
			t.Fatalf("restore %d: %+v, want %+v", i+1, got, want)
		}
	}
	stored, err := r.events.ListSession(ctx, tenant, "u1", "s1", 0, 0)
	must(t, err)
	var got []string
	for _, st := range stored {
		got = append(got, st.Envelope.ID)
		if st.Envelope.Observation.Meta["dia_id"] == nil {
			t.Errorf("restored event %s lost its meta", st.Envelope.ID)
		}
	}
	if !slices.Equal(got, ids) {
		t.Fatalf("restored events %v, want each of %v exactly once", got, ids)
	}
	if turns, _ := r.sessions.ListTurns(ctx, key); len(turns) != 1 {
		t.Fatalf("restored turns %v", turns)
	}
	items, err := r.mem.ListItems(ctx, tenant, events.ItemScopeRequest{UserID: "u1", Scope: events.ScopeSession, SessionID: "s1"})
	must(t, err)
	if len(items.Items) != 1 || items.Items[0].Content != "finish the report" {
		t.Fatalf("restored items %+v", items.Items)
	}

	other := events.SessionArchive{SchemaVersion: events.SchemaVersion, Tenant: "other", UserID: "u1", SessionID: "s1", ArchivedTS: r.now}
	msg := failed(t, r.call(events.EndpointSessionRestore, other), events.RPCCodeBadRequest)
	if !strings.Contains(msg, `archive tenant "other" does not match`) {
		t.Fatalf("cross-tenant restore message %q", msg)
	}
}

func TestSearchMergesMarkdownAndVectorMemories(t *testing.T) { // SPEC A10, C2
	r := newRig(t)
	r.start(Config{})
	r.write("u1", "MEMORY.md", "## 2026-11-01\n\nQuarterly invoices are exported as csv.\n\n## 2026-11-02\n\nThe dog is called Rex.\n")
	r.write("u1", r.now.Format("200601/20060102.md"), "Sent the invoices to finance.\n")
	ep := r.memory("u1", vectorstore.Episodic, "The user asked about quarterly invoices", nil, nil)

	md := ok[events.SearchReply](t, r.call(events.EndpointSearch, events.SearchRequest{UserID: "u1", Query: "invoices", MemoryTypes: []events.MemoryType{events.MemoryMarkdown}}))
	sources := map[string]bool{}
	for _, res := range md.Results {
		if res.MemoryType != events.MemoryMarkdown || !strings.Contains(res.ID, "#L") || !strings.Contains(res.Text, "invoices") {
			t.Errorf("markdown result %+v", res)
		}
		sources[res.Source] = true
	}
	if !sources["MEMORY.md"] || !sources[r.now.Format("200601/20060102.md")] || len(md.Results) != 2 {
		t.Fatalf("markdown results %+v", md.Results)
	}

	all := ok[events.SearchReply](t, r.call(events.EndpointSearch, events.SearchRequest{UserID: "u1", Query: "quarterly invoices", Limit: 3}))
	if len(all.Results) != 3 || all.Results[0].ID != ep || all.Results[1].MemoryType != events.MemoryMarkdown {
		t.Fatalf("merged results %+v", all.Results)
	}
}

func TestAppendSlots(t *testing.T) { // SPEC A9
	r := newRig(t)
	r.start(Config{})
	lt := ok[events.AppendReply](t, r.call(events.EndpointAppend, events.AppendRequest{UserID: "u1", Content: "Uses the blue template."}))
	today := ok[events.AppendReply](t, r.call(events.EndpointAppend, events.AppendRequest{UserID: "u1", Content: "Prefers bar charts.", Slot: events.SlotToday}))
	if lt.File != "MEMORY.md" || today.File != "202611/20261122.md" {
		t.Fatalf("append replies %+v %+v", lt, today)
	}
	ns := docstore.Namespace{Tenant: tenant, User: "u1"}
	mem, err := r.docs.ReadFile(context.Background(), ns, "MEMORY.md")
	must(t, err)
	note, err := r.docs.ReadFile(context.Background(), ns, today.File)
	must(t, err)
	if !strings.Contains(string(mem), "### [2026-11-22 ") || !strings.Contains(string(mem), "] general\n\nUses the blue template.\n\n---\n") || !strings.Contains(string(note), "Prefers bar charts.") {
		t.Fatalf("MEMORY.md %q, note %q", mem, note)
	}
	failed(t, r.call(events.EndpointAppend, events.AppendRequest{UserID: "u1", Content: "x", Slot: "forever"}), events.RPCCodeBadRequest)
}

func TestMemoryAndItemEndpointsReachMemories(t *testing.T) { // SPEC C2, D4 over request/reply
	r := newRig(t)
	r.start(Config{})
	add := ok[events.AddReply](t, r.call(events.EndpointAdd, events.AddRequest{UserID: "u1", Text: "Remember that my sales files have columns date, product and qty."}))
	if len(add.MemoryIDs) == 0 {
		t.Fatal("add wrote nothing")
	}
	got := ok[events.Memory](t, r.call(events.EndpointGet, events.GetRequest{UserID: "u1", ID: add.MemoryIDs[0]}))
	if got.ID != add.MemoryIDs[0] {
		t.Fatalf("get %+v", got)
	}
	item := events.MemoryItem{Scope: events.ScopeUser, Kind: events.ItemPreference, Key: "chart", Content: "bar charts", Confidence: 1}
	ok[events.MemoryItem](t, r.call(events.EndpointItemSave, events.ItemRequest{UserID: "u1", Item: item}))
	back := ok[events.MemoryItem](t, r.call(events.EndpointItemGet, events.ItemKeyRequest{UserID: "u1", Scope: events.ScopeUser, Kind: events.ItemPreference, Key: "chart"}))
	if back.Content != "bar charts" {
		t.Fatalf("item.get %+v", back)
	}
	pack := ok[events.ContextPack](t, r.call(events.EndpointContext, events.ContextRequest{UserID: "u1", Query: "charts"}))
	if len(pack.UserProfile) != 1 || !strings.Contains(pack.Prompt, "## User profile") {
		t.Fatalf("user profile %+v", pack.UserProfile)
	}
	reset := ok[events.ResetReply](t, r.call(events.EndpointReset, events.ResetRequest{UserID: "u1"}))
	if reset.Deleted < len(add.MemoryIDs) {
		t.Fatalf("reset deleted %d, want at least %d", reset.Deleted, len(add.MemoryIDs))
	}
	failed(t, r.call(events.EndpointGet, events.GetRequest{UserID: "u1", ID: add.MemoryIDs[0]}), events.RPCCodeNotFound)
}

func TestRenderDropsLowestPriorityFirst(t *testing.T) {
	pack := events.ContextPack{
		Core:          &events.PackItem{Kind: events.PackKindCore, Text: strings.Repeat("c", 400)},
		Chunks:        []events.PackItem{{Kind: events.PackKindChunk, Text: strings.Repeat("k", 200)}},
		DailyNotes:    []events.PackItem{{ID: "202611/20261122.md", Kind: events.PackKindDailyNote, Text: strings.Repeat("n", 200)}, {ID: "202611/20261121.md", Kind: events.PackKindDailyNote, Text: strings.Repeat("o", 200)}},
		SemanticItems: []events.PackItem{{ID: "f", Kind: events.PackKindSemantic, Text: "a fact"}},
	}
	render(&pack, 200, noShares) // 800 characters: the notes must go, the chunk may stay
	if len(pack.DailyNotes) != 0 || len(pack.Chunks) != 1 || len(pack.SemanticItems) != 1 || pack.Core == nil {
		t.Fatalf("kept notes %d chunks %d facts %d", len(pack.DailyNotes), len(pack.Chunks), len(pack.SemanticItems))
	}
	if pack.TokenEstimate > 200 || strings.Contains(pack.Prompt, "Recent notes") {
		t.Fatalf("estimate %d, prompt:\n%s", pack.TokenEstimate, pack.Prompt)
	}
	render(&pack, 1, noShares) // only the core is never dropped
	if len(pack.Chunks)+len(pack.SemanticItems) != 0 || !strings.HasPrefix(pack.Prompt, "## Core memory\n\n") {
		t.Fatalf("over a tiny budget: %+v", pack)
	}
}

// The token estimate is the rendered prompt's runes / 4, rounded up, whatever the
// pack holds and however much of it the budget drops.
func TestRenderTokenEstimateCountsThePromptsRunes(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		text := rapid.StringOf(rapid.SampledFrom([]rune{'a', 'é', '字', '\n', ' ', '🙂'}))
		items := func(label string, kind events.PackItemKind) []events.PackItem {
			n := rapid.IntRange(0, 3).Draw(t, label)
			out := make([]events.PackItem, n)
			for i := range out {
				out[i] = events.PackItem{ID: fmt.Sprintf("%s%d", label, i), Kind: kind, Text: text.Draw(t, label+" text")}
			}
			return out
		}
		pack := events.ContextPack{
			Topics: items("topic", events.PackKindTopic), Chunks: items("chunk", events.PackKindChunk),
			DailyNotes: items("note", events.PackKindDailyNote), SemanticItems: items("fact", events.PackKindSemantic),
			EpisodicItems: items("episode", events.PackKindEpisodic),
		}
		if rapid.Bool().Draw(t, "core") {
			pack.Core = &events.PackItem{Kind: events.PackKindCore, Text: text.Draw(t, "core text")}
		}
		render(&pack, rapid.IntRange(1, 100).Draw(t, "max tokens"), noShares)
		if want := (utf8.RuneCountInString(pack.Prompt) + 3) / 4; pack.TokenEstimate != want {
			t.Fatalf("estimate %d for a prompt of %d runes, want %d:\n%q", pack.TokenEstimate, utf8.RuneCountInString(pack.Prompt), want, pack.Prompt)
		}
	})
}

func TestRunStopsGracefully(t *testing.T) {
	r := newRig(t)
	svc, err := New(Config{}, r.deps(), nil)
	must(t, err)
	if svc.Ready(context.Background()) == nil {
		t.Fatal("ready before Run")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	bustest.Eventually(t, 5*time.Second, func() error { return svc.Ready(ctx) })

	// Requests in flight when the context ends are still answered.
	var wg sync.WaitGroup
	replies := make(chan error, 20)
	for i := 0; i < 20; i++ {
		wg.Go(func() {
			subject, _ := events.RPCSubject(tenant, events.EndpointContext)
			data, _ := json.Marshal(events.ContextRequest{UserID: "u1", Query: "anything"})
			msg, err := r.nc.Request(subject, data, 10*time.Second)
			if err == nil && msg.Header.Get(micro.ErrorCodeHeader) != "" {
				err = errors.New(msg.Header.Get(micro.ErrorHeader))
			}
			replies <- err
		})
	}
	bustest.Eventually(t, 5*time.Second, func() error {
		if svc.received.Load() == 0 {
			return errors.New("no request received yet")
		}
		return nil
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if svc.Ready(context.Background()) == nil {
		t.Fatal("ready after Run returned")
	}
	wg.Wait()
	close(replies)
	answered := 0
	for err := range replies {
		if err == nil {
			answered++
		} else if !errors.Is(err, nats.ErrNoResponders) && !errors.Is(err, nats.ErrTimeout) {
			t.Errorf("request failed during shutdown: %v", err)
		}
	}
	if answered < int(svc.received.Load()) {
		t.Fatalf("%d requests received but only %d answered", svc.received.Load(), answered)
	}
}

func TestConfigValidate(t *testing.T) {
	r := newRig(t)
	for name, cfg := range map[string]Config{
		"ServiceName": {ServiceName: "bad name"},
		"KEpisodic":   {KEpisodic: -1},
		"ItemsLimit":  {ItemsLimit: events.MaxLimit + 1},
		"MinScore":    {MinScore: math.NaN()},
	} {
		if _, err := New(cfg, r.deps(), nil); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v", name, err)
		}
	}
	d := r.deps()
	d.Memories = nil
	if _, err := New(Config{}, d, nil); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "Memories") {
		t.Errorf("missing Memories: %v", err)
	}
}

// TestRunDrainWaitsForMemoryHits: when Run returns, the memory_hit event of
// every pack it answered is already stored (the hit publisher's queue drained
// and acknowledged), with no polling; an event handed over after Run returned is
// published and acknowledged on the caller's goroutine.
func TestRunDrainWaitsForMemoryHits(t *testing.T) {
	r := newRig(t)
	r.memory("u1", vectorstore.Episodic, "The user's sales files have columns date, product and qty", nil, nil)
	svc, err := New(Config{}, r.deps(), nil)
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	bustest.Eventually(t, 5*time.Second, func() error { return svc.Ready(ctx) })

	const requests = 30
	for range requests {
		pack := ok[events.ContextPack](t, r.call(events.EndpointContext, events.ContextRequest{UserID: "u1", SessionID: "s1", Query: "sales file columns"}))
		if len(pack.EpisodicItems) != 1 {
			t.Fatalf("pack without the memory: %+v", pack.Counts)
		}
	}
	cancel()
	must(t, <-done)
	subject, _ := events.HitSubject(tenant, "u1")
	hits := func() uint64 {
		stream, err := r.js.Stream(context.Background(), "AGENTMEM")
		must(t, err)
		si, err := stream.Info(context.Background(), jetstream.WithSubjectFilter(subject))
		must(t, err)
		return si.State.Subjects[subject]
	}
	if n := hits(); n != requests {
		t.Fatalf("%d memory_hit events stored when Run returned, want %d", n, requests)
	}

	svc.publishHit(tenant, events.ContextRequest{UserID: "u1", SessionID: "s1", Query: "late"}, &events.ContextPack{
		EpisodicItems: []events.PackItem{{ID: vectorstore.DeterministicID(tenant, "u1", "late"), Kind: events.PackKindEpisodic, Text: "late"}},
	})
	if n := hits(); n != requests+1 {
		t.Fatalf("%d memory_hit events stored after a publish past Run, want %d", n, requests+1)
	}
}

// KEpisodic and KSemantic bound their own kind each (SPEC C4): with more matching
// memories of both kinds than either limit, the pack holds exactly that many of
// each.
func TestContextLimitsEachKindByItsOwnK(t *testing.T) {
	r := newRig(t)
	r.start(Config{KEpisodic: 2, KSemantic: 1})
	for i := range 4 {
		r.memory("u1", vectorstore.Episodic, fmt.Sprintf("The user's sales file %d has columns date, product and qty", i), nil, nil)
		r.memory("u1", vectorstore.Semantic, fmt.Sprintf("Sales file %d has columns date, product, qty", i), nil, nil)
	}
	pack := ok[events.ContextPack](t, r.call(events.EndpointContext, events.ContextRequest{UserID: "u1", SessionID: "s9", Query: "which columns do my sales files have?"}))
	if len(pack.EpisodicItems) != 2 || len(pack.SemanticItems) != 1 {
		t.Fatalf("%d episodic and %d semantic memories, want 2 and 1", len(pack.EpisodicItems), len(pack.SemanticItems))
	}
}

// Requests to one endpoint are served concurrently: a request held up (here the
// summariser of session s1 waits for the test) does not hold up the next one.
// micro alone serves an endpoint's requests one after another.
func TestSlowRequestDoesNotHoldUpOthers(t *testing.T) {
	r := newRig(t)
	r.observe("u1", "s1", "Remember: the slow one", nil)
	r.observe("u1", "s2", "Remember: the quick one", nil)
	entered, release := make(chan struct{}), make(chan struct{})
	deps := r.deps()
	deps.Summarize = func(conv []session.Message, maxChars int) string {
		if len(conv) > 0 && strings.Contains(conv[0].Text, "slow") {
			close(entered)
			<-release
		}
		return extract.SummarizeSession(conv, maxChars)
	}
	r.startWith(Config{}, deps)
	slow := make(chan *nats.Msg, 1)
	go func() {
		slow <- r.call(events.EndpointSessionSummary, events.SessionRequest{UserID: "u1", SessionID: "s1"})
	}()
	<-entered
	quick := ok[events.SessionSummaryReply](t, r.call(events.EndpointSessionSummary, events.SessionRequest{UserID: "u1", SessionID: "s2"}))
	if quick.SessionID != "s2" {
		t.Fatalf("reply %+v", quick)
	}
	close(release)
	if got := ok[events.SessionSummaryReply](t, <-slow); got.SessionID != "s1" {
		t.Fatalf("slow reply %+v", got)
	}
}

// session.summary answers with the session's running summary once the
// extractor wrote one (SPEC B2), followed by a digest of the messages after it.
func TestSessionSummaryEndpointReturnsTheStoredSummary(t *testing.T) {
	r := newRig(t)
	r.start(Config{})
	ctx := context.Background()
	var ids []string
	for i := range 6 {
		ids = append(ids, r.observe("u1", "s1", fmt.Sprintf("Remember: report %d uses the blue template.", i), nil).ID)
	}
	st, err := r.sessions.Get(ctx, tenant, "u1", "s1")
	must(t, err)
	_, err = r.sessions.PutSummary(ctx, tenant, "u1", "s1", session.Summary{
		Text: "The user keeps reports 0 to 3 in the blue template.", FirstEventID: ids[0], LastEventID: ids[3],
		ThroughTS: st.Recent[3].TS, Messages: 4, By: session.SummaryByRules,
	}, 0)
	must(t, err)
	sum := ok[events.SessionSummaryReply](t, r.call(events.EndpointSessionSummary, events.SessionRequest{UserID: "u1", SessionID: "s1"}))
	if !strings.HasPrefix(sum.Summary, "The user keeps reports 0 to 3") || !strings.Contains(sum.Summary, "report 4") || strings.Contains(sum.Summary, "report 0 uses") {
		t.Fatalf("summary %q: want the stored summary, then only the messages after it", sum.Summary)
	}
}
