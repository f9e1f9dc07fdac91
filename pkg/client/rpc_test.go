package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/sashabaranov/go-openai"
	"go.uber.org/zap/zaptest"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/bus/bustest"
	"github.com/agentmem/agentmem/pkg/client"
	"github.com/agentmem/agentmem/pkg/docstore"
	"github.com/agentmem/agentmem/pkg/embed"
	"github.com/agentmem/agentmem/pkg/eventstore"
	"github.com/agentmem/agentmem/pkg/extract"
	"github.com/agentmem/agentmem/pkg/markdown"
	"github.com/agentmem/agentmem/pkg/memory"
	"github.com/agentmem/agentmem/pkg/retrieve"
	"github.com/agentmem/agentmem/pkg/session"
	"github.com/agentmem/agentmem/pkg/vectorstore/embedded"
)

// retrieverStack is a real retriever over real stores: embedded NATS, the
// filesystem DocStore and the embedded vector store, both in temporary directories.
type retrieverStack struct {
	c        *client.Client
	js       jetstream.JetStream
	docs     *docstore.Store
	sessions *session.Store
}

func startRetriever(t *testing.T) *retrieverStack {
	t.Helper()
	ctx := testContext(t)
	logger := zaptest.NewLogger(t)
	_, nc, js := bustest.Provisioned(t)
	emb, err := embed.NewLocal(embed.LocalConfig{})
	if err != nil {
		t.Fatal(err)
	}
	vectors, err := embedded.New(embedded.Config{Path: filepath.Join(t.TempDir(), "vectors.db"), Dimensions: emb.Dimensions()}, logger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { vectors.Close() })
	memories, err := memory.New(ctx, memory.Config{}, memory.Deps{Vectors: vectors, Embedder: emb, JS: js}, logger)
	if err != nil {
		t.Fatal(err)
	}
	fs, err := docstore.NewFilesystem(docstore.FilesystemConfig{BaseDir: t.TempDir()}, logger)
	if err != nil {
		t.Fatal(err)
	}
	docs, err := docstore.New(docstore.Config{}, fs, logger)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := eventstore.New(eventstore.Config{}, js, logger)
	if err != nil {
		t.Fatal(err)
	}
	sessions, err := session.New(ctx, session.Config{}, js, logger)
	if err != nil {
		t.Fatal(err)
	}
	// No Consolidator: the consolidate endpoint then answers 503, which is what the
	// test checks for the unavailable code.
	svc, err := retrieve.New(retrieve.Config{}, retrieve.Deps{Conn: nc, JS: js, Docs: docs, Events: evs, Sessions: sessions, Memories: memories, Summarize: extract.SummarizeSession}, logger)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(runCtx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("retriever Run: %v", err)
		}
	})
	bustest.Eventually(t, 10*time.Second, func() error { return svc.Ready(ctx) })
	return &retrieverStack{c: newClient(t, nc), js: js, docs: docs, sessions: sessions}
}

// ingestSession does for the session store what the ingest worker does: it
// applies the stored events of a session in stream order.
func (s *retrieverStack) ingestSession(t *testing.T, ctx context.Context, user, sess string) {
	t.Helper()
	for _, subject := range []string{"mem.acme.obs." + user + "." + sess, "mem.acme.ended." + user + "." + sess} {
		for _, raw := range storedOn(t, ctx, s.js, subject) {
			if _, _, err := s.sessions.Apply(ctx, decodeStored(t, raw)); err != nil {
				t.Fatalf("session Apply: %v", err)
			}
		}
	}
}

// wantError checks that err is the retriever's *Error for endpoint with code, and
// that its message mentions each of mention.
func wantError(t *testing.T, err error, endpoint, code string, sentinel error, mention ...string) {
	t.Helper()
	var rpcErr *client.Error
	if !errors.As(err, &rpcErr) {
		t.Fatalf("error %v (%T) is not a *client.Error", err, err)
	}
	if rpcErr.Endpoint != endpoint || rpcErr.Code != code || !errors.Is(err, sentinel) {
		t.Fatalf("error is %+v, want endpoint %s code %s matching %v", rpcErr, endpoint, code, sentinel)
	}
	for _, m := range mention {
		if !strings.Contains(rpcErr.Message, m) {
			t.Errorf("message %q does not mention %q", rpcErr.Message, m)
		}
	}
}

func TestMarkdownAndContextEndpointsRoundTrip(t *testing.T) {
	s := startRetriever(t)
	ctx := testContext(t)
	c := s.c

	rep, err := c.Append(ctx, events.AppendRequest{UserID: "u1", Content: "Sales files have columns date, product, qty."})
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	if rep.File != "MEMORY.md" || rep.Slot != events.SlotLongTerm {
		t.Errorf("Append reply is %+v, want MEMORY.md long_term", rep)
	}
	rep, err = c.Append(ctx, events.AppendRequest{UserID: "u1", Content: "Working on the Q3 report today.", Slot: events.SlotToday})
	if err != nil {
		t.Fatalf("Append today: %v", err)
	}
	if !regexp.MustCompile(`^\d{6}/\d{8}\.md$`).MatchString(rep.File) || rep.Slot != events.SlotToday {
		t.Errorf("Append today reply is %+v, want a YYYYMM/YYYYMMDD.md note", rep)
	}

	topic, err := c.ReadTopic(ctx, events.TopicRequest{UserID: "u1", Topic: "file_patterns"})
	if err != nil || topic.Content != "" {
		t.Fatalf("ReadTopic before anything was written = %+v, %v; want empty content", topic, err)
	}
	ns := docstore.Namespace{Tenant: tenant, User: "u1"}
	if _, err := s.docs.AppendEntries(ctx, ns, []markdown.Entry{{Time: time.Now().UTC().Truncate(time.Minute), Category: markdown.CategoryFilePattern, Content: "Inventory sheet: columns sku, warehouse, stock."}}); err != nil {
		t.Fatalf("AppendEntries: %v", err)
	}
	topic, err = c.ReadTopic(ctx, events.TopicRequest{UserID: "u1", Topic: "file_patterns.md"})
	if err != nil || topic.Topic != "file_patterns" || !strings.Contains(topic.Content, "sku, warehouse, stock") {
		t.Fatalf("ReadTopic = %+v, %v; want the file_patterns entry", topic, err)
	}

	// Bad input is the retriever's 400, named and matchable.
	_, err = c.ReadTopic(ctx, events.TopicRequest{UserID: "u1", Topic: "../secrets"})
	wantError(t, err, events.EndpointTopic, events.RPCCodeBadRequest, client.ErrBadRequest, "topic", "file_patterns")
	_, err = c.Search(ctx, events.SearchRequest{UserID: "u 1", Query: "sales"})
	wantError(t, err, events.EndpointSearch, events.RPCCodeBadRequest, client.ErrBadRequest, "user_id")

	found, err := c.Search(ctx, events.SearchRequest{UserID: "u1", Query: "sales files columns", MemoryTypes: []events.MemoryType{events.MemoryMarkdown}})
	if err != nil {
		t.Fatalf("Search: %v", err)
	}
	if len(found.Results) == 0 || !strings.Contains(found.Results[0].Text, "qty") {
		t.Errorf("Search results are %+v, want the appended note first", found.Results)
	}

	pack, err := c.Context(ctx, events.ContextRequest{UserID: "u1", SessionID: "s2", Query: "which columns do my sales files have?"})
	if err != nil {
		t.Fatalf("Context: %v", err)
	}
	if pack.Tenant != tenant || pack.UserID != "u1" || !strings.Contains(pack.Prompt, "date, product, qty") || pack.Counts.Total == 0 {
		t.Errorf("context pack is %+v; want the appended note in its prompt", pack)
	}

	// The tools run on the same endpoints and hand the model plain text or JSON.
	out, err := c.HandleToolCall(ctx, "u1", call(client.ToolMemorySearch, `{"query":"sales files columns","limit":3}`))
	if err != nil {
		t.Fatalf("memory_search: %v", err)
	}
	var hits struct {
		Results []struct {
			ID         string `json:"id"`
			Text       string `json:"text"`
			MemoryType string `json:"memory_type"`
		} `json:"results"`
	}
	if err := json.Unmarshal([]byte(out), &hits); err != nil || len(hits.Results) == 0 || len(hits.Results) > 3 || !strings.Contains(out, "qty") {
		t.Errorf("memory_search output %s (%v); want 1-3 JSON results mentioning qty", out, err)
	}
	// Each hit carries the id the search RPC gave it, which the other memory
	// calls take.
	rpcHits, err := c.Search(ctx, events.SearchRequest{UserID: "u1", Query: "sales files columns", Limit: 3})
	if err != nil || len(rpcHits.Results) != len(hits.Results) {
		t.Fatalf("Search = %+v, %v; want as many hits as the tool's", rpcHits, err)
	}
	for i, h := range hits.Results {
		if h.ID == "" || h.ID != rpcHits.Results[i].ID {
			t.Errorf("memory_search hit %d has id %q, want %q", i, h.ID, rpcHits.Results[i].ID)
		}
	}
	out, err = c.HandleToolCall(ctx, "u1", call(client.ToolMemoryAppend, `{"content":"Prefers bar charts.","slot":"long_term"}`))
	if err != nil || !strings.Contains(out, "MEMORY.md") {
		t.Errorf("memory_append = %q, %v", out, err)
	}
	out, err = c.HandleToolCall(ctx, "u1", call(client.ToolMemoryReadTopic, `{"topic":"user_prefs"}`))
	if err != nil || !strings.Contains(out, "Nothing has been recorded under user_prefs") {
		t.Errorf("memory_read_topic of an empty topic = %q, %v", out, err)
	}
	out, err = c.HandleToolCall(ctx, "u1", call(client.ToolMemoryReadTopic, `{"topic":"file_patterns"}`))
	if err != nil || !strings.Contains(out, "sku, warehouse, stock") {
		t.Errorf("memory_read_topic = %q, %v", out, err)
	}
	memFile, err := s.docs.ReadFile(ctx, ns, "MEMORY.md")
	if err != nil || !strings.Contains(string(memFile), "Prefers bar charts.") {
		t.Errorf("MEMORY.md after memory_append holds %q (%v)", memFile, err)
	}
}

func TestMem0EndpointsRoundTrip(t *testing.T) {
	s := startRetriever(t)
	ctx := testContext(t)
	c := s.c

	added, err := c.Add(ctx, events.AddRequest{UserID: "u1", Text: "Remember: my sales files have columns date, product, qty.", ChatID: "chat-1", Who: "u1"})
	if err != nil {
		t.Fatalf("Add: %v", err)
	}
	if len(added.MemoryIDs) != 1 {
		t.Fatalf("Add wrote %v, want one memory", added.MemoryIDs)
	}
	id := added.MemoryIDs[0]
	got, err := c.Get(ctx, events.GetRequest{UserID: "u1", ID: id})
	if err != nil || got.ID != id || !strings.Contains(got.Text, "qty") {
		t.Fatalf("Get = %+v, %v", got, err)
	}
	updated, err := c.Update(ctx, events.UpdateRequest{UserID: "u1", ID: id, Text: "Sales files have columns date, product, qty, unit_price."})
	if err != nil || !strings.Contains(updated.Text, "unit_price") {
		t.Fatalf("Update = %+v, %v", updated, err)
	}
	hist, err := c.History(ctx, events.HistoryRequest{UserID: "u1", ID: id})
	if err != nil {
		t.Fatalf("History: %v", err)
	}
	var ops []string
	for _, ch := range hist.Changes {
		ops = append(ops, ch.Op)
	}
	if hist.ID != id || !slices.Equal(ops, []string{"add", "update"}) {
		t.Errorf("History = %+v (ops %v), want add then update", hist, ops)
	}
	found, err := c.Search(ctx, events.SearchRequest{UserID: "u1", Query: "sales file columns", MemoryTypes: []events.MemoryType{events.MemoryEpisodic}})
	if err != nil || len(found.Results) == 0 || found.Results[0].ID != id {
		t.Fatalf("Search = %+v, %v; want the memory first", found, err)
	}

	deleted, err := c.Delete(ctx, events.DeleteRequest{UserID: "u1", IDs: []string{id}})
	if err != nil || deleted.Deleted != 1 {
		t.Fatalf("Delete = %+v, %v", deleted, err)
	}
	_, err = c.Get(ctx, events.GetRequest{UserID: "u1", ID: id})
	wantError(t, err, events.EndpointGet, events.RPCCodeNotFound, client.ErrNotFound)

	for _, text := range []string{"Remember: I prefer bar charts for monthly sales.", "Remember: my manager is called Dana."} {
		if rep, err := c.Add(ctx, events.AddRequest{UserID: "u1", Text: text, MemoryType: events.MemorySemantic}); err != nil || len(rep.MemoryIDs) != 1 {
			t.Fatalf("Add %q = %+v, %v", text, rep, err)
		}
	}
	reset, err := c.Reset(ctx, events.ResetRequest{UserID: "u1"})
	if err != nil || reset.Deleted != 2 {
		t.Fatalf("Reset = %+v, %v; want 2 deleted", reset, err)
	}
	found, err = c.Search(ctx, events.SearchRequest{UserID: "u1", Query: "bar charts manager", MemoryTypes: []events.MemoryType{events.MemoryEpisodic, events.MemorySemantic}})
	if err != nil || len(found.Results) != 0 {
		t.Errorf("Search after Reset = %+v, %v; want nothing", found, err)
	}

	// This retriever runs without a consolidator: the dependency is unavailable.
	_, err = c.Consolidate(ctx, events.ConsolidateRequest{UserID: "u1"})
	wantError(t, err, events.EndpointConsolidate, events.RPCCodeUnavailable, client.ErrUnavailable, "consolidator")
}

func TestItemEndpointsRoundTrip(t *testing.T) {
	s := startRetriever(t)
	ctx := testContext(t)
	c := s.c

	pref := events.MemoryItem{Scope: events.ScopeUser, Kind: events.ItemPreference, Key: "chart_style", Content: "bar charts", Confidence: 0.9}
	saved, err := c.SaveItem(ctx, events.ItemRequest{UserID: "u1", Item: pref})
	if err != nil || saved.Content != "bar charts" || saved.CreatedTS.IsZero() {
		t.Fatalf("SaveItem = %+v, %v; want it stored with timestamps", saved, err)
	}
	key := events.ItemKeyRequest{UserID: "u1", Scope: events.ScopeUser, Kind: events.ItemPreference, Key: "chart_style"}
	got, err := c.GetItem(ctx, key)
	if err != nil || got.Content != "bar charts" {
		t.Fatalf("GetItem = %+v, %v", got, err)
	}
	pref.Content = "stacked bar charts"
	updated, err := c.UpdateItem(ctx, events.ItemRequest{UserID: "u1", Item: pref})
	if err != nil || updated.Content != "stacked bar charts" {
		t.Fatalf("UpdateItem = %+v, %v", updated, err)
	}
	goal := events.MemoryItem{Scope: events.ScopeUser, Kind: events.ItemGoal, Key: "q3_report", Content: "finish the Q3 sales report", Confidence: 1}
	if _, err := c.SaveItem(ctx, events.ItemRequest{UserID: "u1", Item: goal}); err != nil {
		t.Fatalf("SaveItem goal: %v", err)
	}
	list, err := c.ListItems(ctx, events.ItemScopeRequest{UserID: "u1", Scope: events.ScopeUser})
	if err != nil || len(list.Items) != 2 {
		t.Fatalf("ListItems = %+v, %v; want 2 items", list, err)
	}
	search, err := c.SearchItems(ctx, events.ItemSearchRequest{UserID: "u1", Query: "sales report"})
	if err != nil || len(search.Items) == 0 || search.Items[0].Key != "q3_report" {
		t.Fatalf("SearchItems = %+v, %v; want q3_report first", search, err)
	}
	del, err := c.DeleteItem(ctx, key)
	if err != nil || del.Deleted != 1 {
		t.Fatalf("DeleteItem = %+v, %v", del, err)
	}
	_, err = c.GetItem(ctx, key)
	wantError(t, err, events.EndpointItemGet, events.RPCCodeNotFound, client.ErrNotFound)
	del, err = c.DeleteScope(ctx, events.ItemScopeRequest{UserID: "u1", Scope: events.ScopeUser})
	if err != nil || del.Deleted != 1 {
		t.Fatalf("DeleteScope = %+v, %v; want the remaining goal deleted", del, err)
	}
	// A session-scoped item must name its session.
	_, err = c.SaveItem(ctx, events.ItemRequest{UserID: "u1", Item: events.MemoryItem{Scope: events.ScopeSession, Kind: events.ItemNote, Key: "k", Content: "x"}})
	wantError(t, err, events.EndpointItemSave, events.RPCCodeBadRequest, client.ErrBadRequest, "session_id")
}

func TestSessionEndpointsRoundTrip(t *testing.T) {
	s := startRetriever(t)
	ctx := testContext(t)
	c := s.c
	const user, sess = "u1", "s1"

	for _, text := range []string{"Remember: my sales files have columns date, product, qty.", "Plot monthly qty as bar charts."} {
		if _, err := c.Say(ctx, user, sess, events.RoleUser, text, nil); err != nil {
			t.Fatalf("Say: %v", err)
		}
	}
	turn, err := c.StartTurn(ctx, user, sess, "", "")
	if err != nil {
		t.Fatalf("StartTurn: %v", err)
	}
	if _, err := c.Say(ctx, user, sess, events.RoleAssistant, "Here is the chart.", nil); err != nil {
		t.Fatalf("Say: %v", err)
	}
	if _, err := c.FinishTurn(ctx, turn, events.TurnOK, ""); err != nil {
		t.Fatalf("FinishTurn: %v", err)
	}
	if _, err := c.EndSession(ctx, user, sess); err != nil {
		t.Fatalf("EndSession: %v", err)
	}
	s.ingestSession(t, ctx, user, sess)
	note := events.MemoryItem{Scope: events.ScopeSession, SessionID: sess, Kind: events.ItemNote, Key: "chart", Content: "bar chart of qty", Confidence: 1}
	if _, err := c.SaveItem(ctx, events.ItemRequest{UserID: user, Item: note}); err != nil {
		t.Fatalf("SaveItem: %v", err)
	}

	sum, err := c.SessionSummary(ctx, events.SessionRequest{UserID: user, SessionID: sess})
	if err != nil || sum.SessionID != sess || sum.MessageCount != 3 || sum.TurnCount != 1 || !strings.Contains(sum.Summary, "qty") {
		t.Fatalf("SessionSummary = %+v, %v; want 3 messages, 1 turn, a summary mentioning qty", sum, err)
	}
	archive, err := c.ArchiveSession(ctx, events.SessionRequest{UserID: user, SessionID: sess})
	if err != nil {
		t.Fatalf("ArchiveSession: %v", err)
	}
	// The archive holds all the session's events: 5 observations and session_ended.
	if err := archive.Validate(); err != nil || len(archive.Events) != 6 || len(archive.Turns) != 1 || len(archive.Items) != 1 {
		t.Fatalf("archive has %d events, %d turns, %d items (%v); want 6, 1, 1", len(archive.Events), len(archive.Turns), len(archive.Items), err)
	}
	if last := archive.Events[len(archive.Events)-1]; last.Type != events.TypeSessionEnded {
		t.Fatalf("the archive's last event is %s, want session_ended", last.Type)
	}
	// Clearing removes all 6 events (session_ended too), the turn and the item.
	cleared, err := c.ClearSession(ctx, events.SessionRequest{UserID: user, SessionID: sess})
	if err != nil || cleared.Deleted != 6+1+1 {
		t.Fatalf("ClearSession = %+v, %v; want 8 records deleted", cleared, err)
	}
	_, err = c.ArchiveSession(ctx, events.SessionRequest{UserID: user, SessionID: sess})
	wantError(t, err, events.EndpointSessionArchive, events.RPCCodeNotFound, client.ErrNotFound)

	restored, err := c.RestoreSession(ctx, archive)
	if err != nil || restored.SessionID != sess || restored.Events != 6 || restored.Turns != 1 || restored.Items != 1 {
		t.Fatalf("RestoreSession = %+v, %v; want 6 events, 1 turn, 1 item", restored, err)
	}
	again, err := c.RestoreSession(ctx, archive)
	if err != nil || again.Events != 0 {
		t.Fatalf("second RestoreSession = %+v, %v; want no event re-published", again, err)
	}
	back, err := c.ArchiveSession(ctx, events.SessionRequest{UserID: user, SessionID: sess})
	if err != nil {
		t.Fatalf("ArchiveSession after restore: %v", err)
	}
	ids := func(a events.SessionArchive) []string {
		var out []string
		for _, e := range a.Events {
			out = append(out, e.ID)
		}
		return out
	}
	if !slices.Equal(ids(back), ids(archive)) {
		t.Errorf("restored events %v, want the archived %v", ids(back), ids(archive))
	}

	// A restore of another tenant's archive is refused by the retriever.
	foreign := archive
	foreign.Tenant = "globex"
	_, err = c.RestoreSession(ctx, foreign)
	wantError(t, err, events.EndpointSessionRestore, events.RPCCodeBadRequest, client.ErrBadRequest)
}

// TestToolCallErrorsFromTheRetrieverAreErrors: a call that passes the schema but
// that the retriever refuses comes back as the retriever's *Error.
func TestToolCallErrorsFromTheRetrieverAreErrors(t *testing.T) {
	s := startRetriever(t)
	_, err := s.c.HandleToolCall(testContext(t), "not a user", openai.ToolCall{Type: openai.ToolTypeFunction, Function: openai.FunctionCall{Name: client.ToolMemoryReadTopic, Arguments: `{"topic":"user_prefs"}`}})
	wantError(t, err, events.EndpointTopic, events.RPCCodeBadRequest, client.ErrBadRequest, "user_id")
}
