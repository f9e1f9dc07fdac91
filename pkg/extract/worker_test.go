package extract_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"pgregory.net/rapid"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/bus"
	"github.com/agentmem/agentmem/pkg/bus/bustest"
	"github.com/agentmem/agentmem/pkg/docstore"
	"github.com/agentmem/agentmem/pkg/embed"
	"github.com/agentmem/agentmem/pkg/eventstore"
	"github.com/agentmem/agentmem/pkg/extract"
	"github.com/agentmem/agentmem/pkg/llm"
	"github.com/agentmem/agentmem/pkg/llm/llmtest"
	"github.com/agentmem/agentmem/pkg/markdown"
	"github.com/agentmem/agentmem/pkg/obs"
	"github.com/agentmem/agentmem/pkg/processor"
	"github.com/agentmem/agentmem/pkg/records"
	"github.com/agentmem/agentmem/pkg/vectorstore"
	"github.com/agentmem/agentmem/pkg/vectorstore/embedded"
)

const (
	tenant      = "acme"
	stateBucket = extract.DefaultStateBucket
	waitLong    = 20 * time.Second
)

// endedAt is the session_ended time of the sessions below: entries are stamped with
// it, to the minute.
var endedAt = time.Date(2026, 11, 22, 10, 30, 45, 0, time.UTC)

// counting is the real extractor behind a counter of calls per session (keyed by the
// event id of the session's first message).
type counting struct {
	inner extract.Extractor
	mu    sync.Mutex
	calls map[string]int
}

func newCounting(inner extract.Extractor) *counting {
	return &counting{inner: inner, calls: map[string]int{}}
}

func (c *counting) Extract(ctx context.Context, conv []extract.Message) ([]extract.Extracted, error) {
	c.mu.Lock()
	key := ""
	if len(conv) > 0 {
		key = conv[0].EventID
	}
	c.calls[key]++
	c.mu.Unlock()
	return c.inner.Extract(ctx, conv)
}

func (c *counting) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.calls {
		n += v
	}
	return n
}

func (c *counting) of(firstEventID string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[firstEventID]
}

// rig is one embedded NATS server with the stores of a deployment.
type rig struct {
	srv     *server.Server
	js      jetstream.JetStream
	events  *eventstore.Store
	docs    *docstore.Store
	baseDir string
	vectors vectorstore.Store
	embed   embed.Embedder
}

func newRig(t *testing.T) *rig {
	t.Helper()
	srv, _, js := bustest.Provisioned(t)
	es, err := eventstore.New(eventstore.Config{}, js, nil)
	if err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(t.TempDir(), "memory")
	fs, err := docstore.NewFilesystem(docstore.FilesystemConfig{BaseDir: base}, nil)
	if err != nil {
		t.Fatal(err)
	}
	docs, err := docstore.New(docstore.Config{}, fs, nil)
	if err != nil {
		t.Fatal(err)
	}
	emb, err := embed.NewLocal(embed.LocalConfig{})
	if err != nil {
		t.Fatal(err)
	}
	vs, err := embedded.New(embedded.Config{Path: filepath.Join(t.TempDir(), "vectors.db"), Dimensions: emb.Dimensions()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = vs.Close() })
	return &rig{srv: srv, js: js, events: es, docs: docs, baseDir: base, vectors: vs, embed: emb}
}

// deps are the rig's parts with semantic facts on (the offline processors).
func (r *rig) deps(x extract.Extractor) extract.WorkerDeps {
	return extract.WorkerDeps{
		Dial: func(name string) (*nats.Conn, error) {
			return nats.Connect("", nats.InProcessServer(r.srv), nats.Name(name))
		},
		JS: r.js, Events: r.events, Docs: r.docs, Extractor: x,
		Decider: processor.NewRuleDecider(), Semantic: processor.NewRuleSemanticWriter(),
		Vectors: r.vectors, Embedder: r.embed,
	}
}

// fastConfig retries a failed session twice within milliseconds.
func fastConfig() extract.WorkerConfig {
	return extract.WorkerConfig{Router: bus.RouterConfig{Retry: bus.RetryConfig{
		MaxRetries: 2, InitialInterval: time.Millisecond, MaxInterval: 5 * time.Millisecond,
	}}}
}

func startWorker(t *testing.T, cfg extract.WorkerConfig, deps extract.WorkerDeps) {
	t.Helper()
	w, err := extract.NewWorker(cfg, deps, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("worker run: %v", err)
		}
	})
	bustest.Eventually(t, waitLong, func() error {
		select {
		case err := <-done:
			done <- err
			return fmt.Errorf("worker stopped: %v", err)
		default:
		}
		return w.Ready(context.Background())
	})
}

// turn is one observation of a session.
type turn struct {
	role events.Role
	text string
	tool bool // a tool result rather than a message
	meta map[string]any
}

// saveSession stores the observations with eventstore.Save, one second apart, and
// returns their event ids.
func saveSession(t *testing.T, es *eventstore.Store, user, session string, turns []turn) []string {
	t.Helper()
	ids := make([]string, len(turns))
	for i, tr := range turns {
		env := events.New(events.TypeObservation, tenant, user, "excel-bot", session)
		env.TS = endedAt.Add(-time.Duration(len(turns)-i) * time.Second)
		env.Observation = &events.Observation{Role: tr.role, Text: tr.text, Meta: tr.meta}
		if tr.tool {
			env.Observation = &events.Observation{Kind: events.KindToolResult, Role: events.RoleTool,
				ToolResult: &events.ToolResult{Name: "read_csv", Output: tr.text}, Meta: tr.meta}
		}
		if _, err := es.Save(context.Background(), env); err != nil {
			t.Fatal(err)
		}
		ids[i] = env.ID
	}
	return ids
}

// endSession publishes a session_ended event and returns it.
func endSession(t *testing.T, es *eventstore.Store, user, session string, at time.Time) events.Envelope {
	t.Helper()
	env := events.New(events.TypeSessionEnded, tenant, user, "excel-bot", session)
	env.TS = at
	if _, err := es.Save(context.Background(), env); err != nil {
		t.Fatal(err)
	}
	return env
}

// republish publishes env again under a fresh Nats-Msg-Id: to the worker that is a
// redelivery of the same event.
func republish(t *testing.T, js jetstream.JetStream, env events.Envelope) {
	t.Helper()
	data, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	subject, _ := env.Subject()
	if _, err := js.Publish(context.Background(), subject, data, jetstream.WithMsgID("again-"+env.ID)); err != nil {
		t.Fatal(err)
	}
}

type stateRecord struct {
	Status  string `json:"status"`
	EventID string `json:"event_id"`
	Entries []struct {
		Content string `json:"content"`
	} `json:"entries"`
}

func readState(js jetstream.JetStream, user, session string) (stateRecord, error) {
	var st stateRecord
	kv, err := js.KeyValue(context.Background(), stateBucket)
	if err != nil {
		return st, err
	}
	e, err := kv.Get(context.Background(), tenant+"."+user+"."+session)
	if err != nil {
		return st, err
	}
	return st, json.Unmarshal(e.Value(), &st)
}

func waitStatus(t *testing.T, js jetstream.JetStream, user, session, want string) stateRecord {
	t.Helper()
	var st stateRecord
	bustest.Eventually(t, waitLong, func() error {
		var err error
		if st, err = readState(js, user, session); err != nil {
			return err
		}
		if st.Status != want {
			return fmt.Errorf("session %s is %q, want %q", session, st.Status, want)
		}
		return nil
	})
	return st
}

// waitIdle waits until the extractor's durable has delivered and seen acked every
// message, so that whatever the worker would do has been done.
func waitIdle(t *testing.T, js jetstream.JetStream) {
	t.Helper()
	durable := bus.WorkerConsumer(bus.WorkerExtractor, bus.ConsumerDefaults{}).Durable
	bustest.WaitSettled(t, js, bus.DefaultStream, durable, waitLong)
}

// written returns the memory_written events of user, oldest first.
func written(t *testing.T, js jetstream.JetStream, user string) []events.Envelope {
	t.Helper()
	subject, err := events.WrittenSubject(tenant, user)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := js.Stream(context.Background(), bus.DefaultStream)
	if err != nil {
		t.Fatal(err)
	}
	var out []events.Envelope
	for seq := uint64(1); ; {
		raw, err := stream.GetMsg(context.Background(), seq, jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		env, err := events.Decode(raw.Data)
		if err != nil {
			t.Fatalf("memory_written does not decode: %v", err)
		}
		out = append(out, env)
		seq = raw.Sequence + 1
	}
}

func readFile(t *testing.T, r *rig, user, name string) string {
	t.Helper()
	data, err := r.docs.ReadFile(context.Background(), docstore.Namespace{Tenant: tenant, User: user}, name)
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	return string(data)
}

func semanticFacts(t *testing.T, r *rig, user string) []vectorstore.Record {
	t.Helper()
	recs, _, err := r.vectors.Scroll(context.Background(), vectorstore.Filter{
		Tenant: tenant, UserID: user, MemoryTypes: []vectorstore.MemoryType{vectorstore.Semantic},
	}, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// realistic is a session with a file structure (from the user and a tool), a
// preference, an error with its fix, a request to remember, a personal fact and
// chit-chat around them.
var realistic = []turn{
	{role: events.RoleSystem, text: "You are excel-bot, a spreadsheet assistant."},
	{role: events.RoleUser, text: "Hi there!", meta: map[string]any{"dia_id": "D1:1"}},
	{role: events.RoleUser, text: "I uploaded sales.csv, it has columns date, product, qty and amount.", meta: map[string]any{"dia_id": "D1:2"}},
	{role: events.RoleTool, text: "RangeIndex: 5000 entries, 0 to 4999", tool: true},
	{role: events.RoleUser, text: "I prefer bar charts with values rounded to two decimals.", meta: map[string]any{"dia_id": "D1:4"}},
	{role: events.RoleUser, text: "I get an error: KeyError: 'Amount'", meta: map[string]any{"dia_id": "D1:5"}},
	{role: events.RoleAssistant, text: "The column name is lowercase; use df['amount'] instead."},
	{role: events.RoleUser, text: "Thanks, that worked!", meta: map[string]any{"dia_id": "D1:7"}},
	{role: events.RoleUser, text: "Remember that our fiscal year starts in April.", meta: map[string]any{"dia_id": "D1:8"}},
	{role: events.RoleUser, text: "Btw, I'm a student at Peking University.", meta: map[string]any{"dia_id": "D1:9"}},
	{role: events.RoleUser, text: "Thanks, bye!", meta: map[string]any{"dia_id": "D1:10"}},
}

// The entries of realistic, in the exact format of SPEC A6, routed by SPEC A4.
const (
	wantFilePatterns = "### [2026-11-22 10:30] file_pattern\n\n" +
		"sales.csv: columns date, product, qty, amount; 5000 rows\n\n---\n"
	wantUserPrefs = "### [2026-11-22 10:30] user_pref\n\n" +
		"I prefer bar charts with values rounded to two decimals.\n\n---\n"
	wantMemory = "### [2026-11-22 10:30] error_solution\n\n" +
		"Error: I get an error: KeyError: 'Amount'. Fix: The column name is lowercase; use df['amount'] instead\n\n---\n" +
		"\n### [2026-11-22 10:30] general\n\n" +
		"Our fiscal year starts in April.\n\n---\n"
	studentFact = "User is a student at Peking University."
)

// SPEC A3, A4, A6, C8, D2: a session read back from the stream becomes routed
// entries in the exact entry format, semantic facts with provenance and one
// memory_written event; the same session_ended delivered again and a second
// session_ended of the session change nothing and ask the extractor nothing more.
func TestWorkerExtractsSessionOnceAcrossDuplicates(t *testing.T) {
	r := newRig(t)
	x := newCounting(extract.NewRules(nil))
	startWorker(t, fastConfig(), r.deps(x))

	ids := saveSession(t, r.events, "u1", "s1", realistic)
	ended := endSession(t, r.events, "u1", "s1", endedAt)
	waitStatus(t, r.js, "u1", "s1", "applied")

	if got := readFile(t, r, "u1", docstore.FilePatternsFile); got != wantFilePatterns {
		t.Errorf("file_patterns.md =\n%q\nwant\n%q", got, wantFilePatterns)
	}
	if got := readFile(t, r, "u1", docstore.UserPrefsFile); got != wantUserPrefs {
		t.Errorf("user_prefs.md =\n%q\nwant\n%q", got, wantUserPrefs)
	}
	if got := readFile(t, r, "u1", docstore.MemoryFile); got != wantMemory {
		t.Errorf("MEMORY.md =\n%q\nwant\n%q", got, wantMemory)
	}

	facts := semanticFacts(t, r, "u1")
	var student *vectorstore.Record
	for i := range facts {
		if facts[i].Text == studentFact {
			student = &facts[i]
		}
	}
	if student == nil {
		t.Fatalf("no fact %q among %d semantic memories", studentFact, len(facts))
	}
	if got := fmt.Sprint(student.Metadata[records.MetaSourceEventIDs]); got != fmt.Sprint([]any{ids[9]}) {
		t.Errorf("student fact source_event_ids = %s, want [%s]", got, ids[9])
	}
	if got := fmt.Sprint(student.Metadata[records.MetaSourceMeta]); got != "[map[dia_id:D1:9]]" {
		t.Errorf("student fact source_meta = %s, want [map[dia_id:D1:9]]", got)
	}
	if student.Metadata[records.MetaSourceChatID] != "s1" || len(student.Vector) != r.embed.Dimensions() {
		t.Errorf("student fact chat %v, vector of %d", student.Metadata[records.MetaSourceChatID], len(student.Vector))
	}

	ws := written(t, r.js, "u1")
	if len(ws) != 1 {
		t.Fatalf("%d memory_written events, want 1", len(ws))
	}
	body := ws[0].MemoryWritten
	if ws[0].ID != "written-"+ended.ID || body.SourceSessionID != "s1" || len(body.Entries) != 4 || len(body.MemoryIDs) != len(facts) {
		t.Errorf("memory_written %s = %+v; want id written-%s, 4 entries and the %d fact ids", ws[0].ID, body, ended.ID, len(facts))
	}
	for _, e := range body.Entries {
		if want := docstore.RouteCategory(markdown.Category(e.Category)); e.File != want {
			t.Errorf("entry %q reported in %s, routed to %s", e.Content, e.File, want)
		}
	}

	// A redelivery of the same event, then another session_ended of the session an
	// hour later (whose stamp would differ if it extracted again).
	republish(t, r.js, ended)
	endSession(t, r.events, "u1", "s1", endedAt.Add(time.Hour))
	waitIdle(t, r.js)

	if n := x.total(); n != 1 {
		t.Errorf("extractor called %d times, want 1", n)
	}
	if got := readFile(t, r, "u1", docstore.MemoryFile); got != wantMemory {
		t.Errorf("after duplicates MEMORY.md =\n%q\nwant\n%q", got, wantMemory)
	}
	if got := readFile(t, r, "u1", docstore.UserPrefsFile); got != wantUserPrefs {
		t.Errorf("after duplicates user_prefs.md =\n%q", got)
	}
	if n := len(semanticFacts(t, r, "u1")); n != len(facts) {
		t.Errorf("%d semantic facts after duplicates, want %d", n, len(facts))
	}
	if n := len(written(t, r.js, "u1")); n != 1 {
		t.Errorf("%d memory_written events after duplicates, want 1", n)
	}
}

// Duplicates arriving together (the same event redelivered, a second session_ended)
// are serialised per session: one extraction, one set of entries, one event.
func TestWorkerExtractsOnceWhenDuplicatesArriveTogether(t *testing.T) {
	r := newRig(t)
	x := newCounting(extract.NewRules(nil))
	startWorker(t, fastConfig(), r.deps(x))

	saveSession(t, r.events, "u1", "s1", realistic)
	ended := endSession(t, r.events, "u1", "s1", endedAt)
	republish(t, r.js, ended)
	later := endSession(t, r.events, "u1", "s1", endedAt.Add(time.Hour))
	st := waitStatus(t, r.js, "u1", "s1", "applied")
	waitIdle(t, r.js)

	if n := x.total(); n != 1 {
		t.Errorf("extractor called %d times, want 1", n)
	}
	// Handlers run concurrently, so either event may win; its time stamps the entries.
	want := wantMemory
	switch st.EventID {
	case ended.ID:
	case later.ID:
		want = strings.ReplaceAll(wantMemory, "10:30", "11:30")
	default:
		t.Fatalf("session extracted by %q, want one of its session_ended events", st.EventID)
	}
	if got := readFile(t, r, "u1", docstore.MemoryFile); got != want {
		t.Errorf("MEMORY.md =\n%q\nwant\n%q", got, want)
	}
	if n := len(written(t, r.js, "u1")); n != 1 {
		t.Errorf("%d memory_written events, want 1", n)
	}
}

// SPEC A7: entries a session adds to a full MEMORY.md push out the oldest ones;
// the file ends within the bound with the session's entries last.
func TestWorkerKeepsMemoryWithinCapacity(t *testing.T) {
	r := newRig(t)
	startWorker(t, fastConfig(), r.deps(extract.NewRules(nil)))

	old := make([]markdown.Entry, 100) // 6 lines each with the separating blank line
	for i := range old {
		old[i] = markdown.Entry{Time: endedAt.AddDate(-1, 0, i), Category: markdown.CategoryGeneral, Content: fmt.Sprintf("Old fact %d.", i)}
	}
	dir := filepath.Join(r.baseDir, tenant, "u1")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, docstore.MemoryFile), []byte(markdown.FormatEntries(old)), 0o644); err != nil {
		t.Fatal(err)
	}
	saveSession(t, r.events, "u1", "s1", realistic)
	endSession(t, r.events, "u1", "s1", endedAt)
	waitStatus(t, r.js, "u1", "s1", "applied")

	doc := readFile(t, r, "u1", docstore.MemoryFile)
	if n := markdown.CountLines(doc); n > docstore.DefaultTargetLines {
		t.Errorf("MEMORY.md has %d lines, want at most %d", n, docstore.DefaultTargetLines)
	}
	if !strings.HasSuffix(doc, wantMemory) {
		t.Errorf("MEMORY.md does not end with the session's entries:\n%s", doc)
	}
	if strings.Contains(doc, "Old fact 0.") || !strings.Contains(doc, "Old fact 99.") {
		t.Errorf("capacity dropped the wrong entries:\n%s", doc)
	}
}

// SPEC A3: empty and system-only sessions cost no extractor call, write nothing and
// are marked applied.
func TestWorkerSkipsEmptyAndSystemOnlySessions(t *testing.T) {
	r := newRig(t)
	x := newCounting(extract.NewRules(nil))
	startWorker(t, fastConfig(), r.deps(x))

	endSession(t, r.events, "u1", "empty", endedAt)
	saveSession(t, r.events, "u1", "sys", []turn{
		{role: events.RoleSystem, text: "You are excel-bot. Remember that the user prefers CSV."},
		{role: events.RoleSystem, text: "Tools: read_csv, plot."},
	})
	endSession(t, r.events, "u1", "sys", endedAt)

	for _, s := range []string{"empty", "sys"} {
		if st := waitStatus(t, r.js, "u1", s, "applied"); len(st.Entries) != 0 {
			t.Errorf("session %s applied with entries %+v", s, st.Entries)
		}
	}
	waitIdle(t, r.js)
	if n := x.total(); n != 0 {
		t.Errorf("extractor called %d times, want 0", n)
	}
	files, err := r.docs.Files(context.Background(), docstore.Namespace{Tenant: tenant, User: "u1"})
	if err != nil || len(files) != 0 {
		t.Errorf("files %v (%v), want none", files, err)
	}
	if ws := written(t, r.js, "u1"); len(ws) != 0 {
		t.Errorf("%d memory_written events, want none", len(ws))
	}
}

// Issue 22: with the model down (or its reply unusable) the offline rules
// extract the session, the record in KV says processed_by rules_fallback, and
// a log line names the session.
func TestWorkerFallsBackToTheRulesWhenLLMIsDown(t *testing.T) {
	r := newRig(t)
	srv := llmtest.NewServer(t,
		llmtest.Reply{Status: 503, Content: "overloaded"},
		llmtest.Reply{Content: "not JSON at all"},
	)
	client, err := llm.New(llm.Config{BaseURL: srv.URL(), Model: "m", Timeout: 2 * time.Second, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.WarnLevel)
	deps := r.deps(extract.NewLLM(client, nil))
	deps.Decider, deps.Semantic, deps.Vectors, deps.Embedder = nil, nil, nil, nil
	w, err := extract.NewWorker(fastConfig(), deps, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	want, _ := extract.NewRules(nil).Extract(context.Background(), []extract.Message{{Role: extract.RoleUser, Text: realistic[2].text}})
	for _, session := range []string{"down", "garbage"} {
		saveSession(t, r.events, "u1", session, realistic[2:3])
		endSession(t, r.events, "u1", session, endedAt)
		waitStatus(t, r.js, "u1", session, "applied")
		kv, err := r.js.KeyValue(context.Background(), stateBucket)
		if err != nil {
			t.Fatal(err)
		}
		e, err := kv.Get(context.Background(), tenant+".u1."+session)
		if err != nil {
			t.Fatal(err)
		}
		var st struct {
			ProcessedBy string            `json:"processed_by"`
			Entries     []json.RawMessage `json:"entries"`
		}
		if err := json.Unmarshal(e.Value(), &st); err != nil {
			t.Fatal(err)
		}
		if st.ProcessedBy != extract.ProcessedByRulesFallback || len(st.Entries) != len(want) {
			t.Errorf("session %s: processed_by %q, %d entries; want %q and the rules' %d", session, st.ProcessedBy, len(st.Entries), extract.ProcessedByRulesFallback, len(want))
		}
		if n := logs.FilterField(obs.Session(session)).FilterFieldKey("processed_by").Len(); n != 1 {
			t.Errorf("session %s: %d log lines naming it and the fallback, want 1: %v", session, n, logs.All())
		}
	}
	if dls, err := bus.ListDeadLetters(context.Background(), r.js, bus.DefaultDLQStream, 10); err != nil || len(dls) != 0 {
		t.Errorf("dead letters %v (%v), want none", dls, err)
	}
}

// A write that fails after the extraction was stored is retried, dead-lettered, and
// when replayed applies the stored extraction: the extractor is never asked twice.
func TestWorkerReusesStoredExtractionAfterWriteFailure(t *testing.T) {
	r := newRig(t)
	x := newCounting(extract.NewRules(nil))
	startWorker(t, fastConfig(), r.deps(x))

	// A file where the tenant's directory belongs makes every docstore write fail.
	if err := os.MkdirAll(r.baseDir, 0o755); err != nil {
		t.Fatal(err)
	}
	blocker := filepath.Join(r.baseDir, tenant)
	if err := os.WriteFile(blocker, []byte("not a directory"), 0o644); err != nil {
		t.Fatal(err)
	}
	ids := saveSession(t, r.events, "u1", "s1", realistic)
	endSession(t, r.events, "u1", "s1", endedAt)

	var dls []bus.DeadLetter
	bustest.Eventually(t, waitLong, func() error {
		var err error
		if dls, err = bus.ListDeadLetters(context.Background(), r.js, bus.DefaultDLQStream, 10); err != nil {
			return err
		}
		if len(dls) != 1 {
			return fmt.Errorf("%d dead letters, want 1", len(dls))
		}
		return nil
	})
	if st := waitStatus(t, r.js, "u1", "s1", "extracted"); len(st.Entries) != 4 {
		t.Errorf("stored extraction has %d entries, want 4", len(st.Entries))
	}

	if err := os.Remove(blocker); err != nil {
		t.Fatal(err)
	}
	if err := bus.ReplayDeadLetter(context.Background(), r.js, dls[0]); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, r.js, "u1", "s1", "applied")
	if got := readFile(t, r, "u1", docstore.MemoryFile); got != wantMemory {
		t.Errorf("MEMORY.md =\n%q\nwant\n%q", got, wantMemory)
	}
	if n := x.of(ids[0]); n != 1 {
		t.Errorf("extractor called %d times for the session, want 1", n)
	}
	if n := len(written(t, r.js, "u1")); n != 1 {
		t.Errorf("%d memory_written events, want 1", n)
	}
}

// SPEC E2: two replicas on one durable share ten sessions of one user; each session
// is extracted once and every entry lands once in the shared MEMORY.md.
func TestWorkerReplicasProcessEachSessionOnce(t *testing.T) {
	r := newRig(t)
	x := newCounting(extract.NewRules(nil))
	cfg := fastConfig()
	startWorker(t, cfg, r.deps(x))
	startWorker(t, cfg, r.deps(x))

	const sessions = 10
	first := make([]string, sessions)
	for i := range sessions {
		s := fmt.Sprintf("s%d", i)
		first[i] = saveSession(t, r.events, "u1", s, []turn{
			{role: events.RoleUser, text: fmt.Sprintf("Remember that project %d ships in week %d.", i, 10+i)},
			{role: events.RoleAssistant, text: "Noted."},
		})[0]
		endSession(t, r.events, "u1", s, endedAt)
	}
	for i := range sessions {
		waitStatus(t, r.js, "u1", fmt.Sprintf("s%d", i), "applied")
	}
	waitIdle(t, r.js)

	for i, id := range first {
		if n := x.of(id); n != 1 {
			t.Errorf("session s%d extracted %d times, want 1", i, n)
		}
	}
	doc := readFile(t, r, "u1", docstore.MemoryFile)
	for i := range sessions {
		entry := fmt.Sprintf("### [2026-11-22 10:30] general\n\nProject %d ships in week %d.\n\n---\n", i, 10+i)
		if n := strings.Count(doc, entry); n != 1 {
			t.Errorf("entry of session s%d appears %d times in MEMORY.md, want 1", i, n)
		}
	}
	if n := len(written(t, r.js, "u1")); n != sessions {
		t.Errorf("%d memory_written events, want %d", n, sessions)
	}
}

func TestNewWorkerRejectsBadConfig(t *testing.T) {
	r := newRig(t)
	good := r.deps(extract.NewRules(nil))
	cases := map[string]struct {
		cfg  extract.WorkerConfig
		deps func(extract.WorkerDeps) extract.WorkerDeps
		want string
	}{
		"no extractor":     {deps: func(d extract.WorkerDeps) extract.WorkerDeps { d.Extractor = nil; return d }, want: "Extractor"},
		"no stores":        {deps: func(d extract.WorkerDeps) extract.WorkerDeps { d.Docs, d.Events = nil, nil; return d }, want: "Events, Docs"},
		"half semantic":    {deps: func(d extract.WorkerDeps) extract.WorkerDeps { d.Embedder = nil; return d }, want: "all set"},
		"no dialer":        {deps: func(d extract.WorkerDeps) extract.WorkerDeps { d.Dial = nil; return d }, want: "Dial"},
		"bad bucket":       {cfg: extract.WorkerConfig{StateBucket: "a.b"}, want: "StateBucket"},
		"negative workers": {cfg: extract.WorkerConfig{Concurrency: -1}, want: "Concurrency"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			deps := good
			if c.deps != nil {
				deps = c.deps(good)
			}
			_, err := extract.NewWorker(c.cfg, deps, nil)
			if !errors.Is(err, extract.ErrInvalidConfig) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("NewWorker: %v, want ErrInvalidConfig naming %s", err, c.want)
			}
		})
	}
	if _, err := extract.NewWorker(extract.WorkerConfig{}, good, nil); err != nil {
		t.Errorf("defaults: %v", err)
	}
}

// The memory_written id derived from any valid session_ended id is a valid event id,
// the same every time, and different for different session_ended ids.
func TestWrittenIDIsValidDeterministicAndDistinct(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		idGen := rapid.StringMatching(`[A-Za-z0-9_-]{1,128}`)
		a, b := idGen.Draw(t, "a"), idGen.Draw(t, "b")
		wa, wb := extract.WrittenID(a), extract.WrittenID(b)
		if err := events.ValidateID("id", wa); err != nil {
			t.Fatalf("WrittenID(%q) = %q: %v", a, wa, err)
		}
		if wa != extract.WrittenID(a) {
			t.Fatalf("WrittenID(%q) is not deterministic", a)
		}
		if (a == b) != (wa == wb) {
			t.Fatalf("WrittenID(%q) = %q, WrittenID(%q) = %q", a, wa, b, wb)
		}
	})
}

// stallFirst is the real extractor, holding its first session back until another
// session's extraction starts or a second has passed: a session started meanwhile
// would be one of the same user's handled out of turn.
type stallFirst struct {
	inner   extract.Extractor
	mu      sync.Mutex
	calls   int
	another chan struct{}
}

func (s *stallFirst) Extract(ctx context.Context, conv []extract.Message) ([]extract.Extracted, error) {
	s.mu.Lock()
	s.calls++
	first := s.calls == 1
	if s.calls == 2 {
		close(s.another)
	}
	s.mu.Unlock()
	if first {
		select {
		case <-s.another:
		case <-time.After(time.Second):
		}
	}
	return s.inner.Extract(ctx, conv)
}

// A user's sessions ending at once are extracted one after the other in stream
// order, as a replay feeds them: their entries land in user_prefs.md in the order
// the sessions ended, even when the first takes longest.
func TestWorkerHandlesOneUsersSessionsInStreamOrder(t *testing.T) {
	r := newRig(t)
	prefs := []string{"I prefer bar charts.", "I prefer tabs over spaces.", "I prefer dark mode.", "I prefer short answers."}
	for i, p := range prefs {
		session := fmt.Sprintf("s%d", i+1)
		saveSession(t, r.events, "u1", session, []turn{{role: events.RoleUser, text: p}})
		endSession(t, r.events, "u1", session, endedAt.Add(time.Duration(i)*time.Hour))
	}
	startWorker(t, extract.WorkerConfig{Concurrency: 4}, r.deps(&stallFirst{inner: extract.NewRules(nil), another: make(chan struct{})}))
	waitIdle(t, r.js)

	file := readFile(t, r, "u1", "user_prefs.md")
	last := -1
	for _, p := range prefs {
		at := strings.Index(file, p)
		if at < 0 {
			t.Fatalf("user_prefs.md has no %q:\n%s", p, file)
		}
		if at < last {
			t.Fatalf("user_prefs.md has %q before an entry of an earlier session:\n%s", p, file)
		}
		last = at
	}
}
