package processor

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/agentmem/agentmem/pkg/llm"
	"github.com/agentmem/agentmem/pkg/llm/llmtest"
	"github.com/agentmem/agentmem/pkg/records"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// testID is a record id, as the store would give it.
func testID(i int) string { return vectorstore.DeterministicID("processor-test", fmt.Sprint(i)) }

// llmFixture is a real llm.Client talking HTTP to a scripted OpenAI-compatible
// server, and a logger whose entries the test reads.
func llmFixture(t *testing.T, replies ...llmtest.Reply) (LLMConfig, *llmtest.Server, *observer.ObservedLogs, *zap.Logger) {
	t.Helper()
	srv := llmtest.NewServer(t, replies...)
	client, err := llm.New(llm.Config{BaseURL: srv.URL(), Model: "test-model", MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zapcore.DebugLevel)
	return LLMConfig{Client: client}, srv, logs, zap.New(core)
}

// lastUserPrompt is the user message of the last request the server received.
func lastUserPrompt(t *testing.T, srv *llmtest.Server) string {
	t.Helper()
	reqs := srv.Requests()
	if len(reqs) == 0 {
		t.Fatal("the server received no request")
	}
	msgs, _ := reqs[len(reqs)-1].Body["messages"].([]any)
	if len(msgs) != 2 {
		t.Fatalf("want system and user messages, got %v", reqs[len(reqs)-1].Body["messages"])
	}
	user, _ := msgs[1].(map[string]any)["content"].(string)
	return user
}

func assertFellBack(t *testing.T, logs *observer.ObservedLogs, processor string) {
	t.Helper()
	entries := logs.FilterMessage("LLM reply unusable, using the rule-based default").All()
	if len(entries) != 1 || entries[0].ContextMap()["processor"] != processor {
		t.Fatalf("want one fallback warning for %s, got %v", processor, entries)
	}
}

var obsTS = time.Date(2026, 11, 2, 10, 4, 0, 0, time.UTC)

func TestLLMDeciderUsesTheModelButNotForSpeakerAndTime(t *testing.T) {
	cfg, srv, logs, logger := llmFixture(t, llmtest.Reply{Content: `{"write": true, "thing": "User moved to Berlin.", "context": "relocation talk", "reason": "personal event", "who": "someone else"}`})
	d, err := NewLLMDecider(cfg, logger)
	if err != nil {
		t.Fatal(err)
	}
	ep, err := d.Decide(context.Background(), records.Observation{Role: "user", Text: "so yeah, Berlin since last year", TS: obsTS, ChatID: "c7"})
	if err != nil {
		t.Fatal(err)
	}
	want := records.Episode{Write: true, Thing: "User moved to Berlin.", Context: "relocation talk", Who: "user", Time: obsTS, Reason: "model: personal event"}
	if ep != want {
		t.Fatalf("got %+v\nwant %+v", ep, want)
	}
	if p := lastUserPrompt(t, srv); !strings.Contains(p, "so yeah, Berlin since last year") || !strings.Contains(p, "Chat: c7") {
		t.Fatalf("prompt does not carry the observation:\n%s", p)
	}
	if logs.Len() != 0 {
		t.Fatalf("unexpected log entries: %v", logs.All())
	}
}

func TestLLMDeciderFallsBackToRulesOnBadReplies(t *testing.T) {
	for name, content := range map[string]string{
		"not JSON":            "I think you should write it",
		"schema mismatch":     `{"write": "yes"}`,
		"write without thing": `{"write": true, "thing": " ", "reason": "r"}`,
	} {
		t.Run(name, func(t *testing.T) {
			cfg, _, logs, logger := llmFixture(t, llmtest.Reply{Content: content})
			d, _ := NewLLMDecider(cfg, logger)
			obs := records.Observation{Role: "user", Text: "I moved to Berlin last year", TS: obsTS, ChatID: "c1"}
			ep, err := d.Decide(context.Background(), obs)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := NewRuleDecider().Decide(context.Background(), obs)
			want.ProcessedBy = records.ProcessedByRulesFallback
			if ep != want {
				t.Fatalf("got %+v, want the rule-based %+v", ep, want)
			}
			assertFellBack(t, logs, "decide")
		})
	}
}

func TestLLMDeciderAlwaysWritesExplicitRememberRequests(t *testing.T) {
	cfg, _, _, logger := llmFixture(t, llmtest.Reply{Content: `{"write": false, "reason": "not interesting"}`})
	d, _ := NewLLMDecider(cfg, logger)
	ep, err := d.Decide(context.Background(), records.Observation{Role: "user", Text: "Remember, I'm a student at Peking University", TS: obsTS})
	if err != nil {
		t.Fatal(err)
	}
	if !ep.Write || ep.Thing != "I'm a student at Peking University." || ep.Reason != ReasonRemember {
		t.Fatalf("explicit remember request not written: %+v", ep)
	}
}

func TestLLMProcessorsReturnTransientErrors(t *testing.T) {
	cfg, _, logs, logger := llmFixture(t, llmtest.Reply{Status: http.StatusServiceUnavailable, Content: "overloaded"})
	d, _ := NewLLMDecider(cfg, logger)
	_, err := d.Decide(context.Background(), records.Observation{Role: "user", Text: "I moved to Berlin last year"})
	if !errors.Is(err, llm.ErrUnavailable) {
		t.Fatalf("decide: error %v, want llm.ErrUnavailable", err)
	}
	m, _ := NewLLMMerger(cfg, logger)
	if _, err := m.Merge(context.Background(), vectorstore.Record{Text: "a"}, vectorstore.Record{Text: "b"}); !errors.Is(err, llm.ErrUnavailable) {
		t.Fatalf("merge: error %v, want llm.ErrUnavailable", err)
	}
	if len(logs.FilterMessage("LLM reply unusable, using the rule-based default").All()) != 0 {
		t.Fatal("a transient error was treated as a bad reply")
	}
}

func TestLLMSemanticWriterTakesChatAndTimeFromTheEpisodeAndDropsDuplicates(t *testing.T) {
	e1 := episode(testID(1), "user", "c1", "I'm a student at Peking University and I love jazz.", obsTS)
	e2 := episode(testID(2), "user", "c2", "We talked about jazz again.", obsTS.Add(time.Hour))
	cfg, srv, logs, logger := llmFixture(t, llmtest.Reply{Content: `{"facts": [
		{"fact": "User is a student at Peking University.", "episode_id": "` + e1.ID + `"},
		{"fact": "user loves jazz", "episode_id": "` + e2.ID + `"},
		{"fact": "User loves jazz!", "episode_id": "` + e1.ID + `"},
		{"fact": "User speaks Mandarin.", "episode_id": "` + e1.ID + `"}]}`})
	w, _ := NewLLMSemanticWriter(cfg, logger)
	known := []vectorstore.Record{{Text: "User speaks Mandarin"}}
	facts, err := w.Facts(context.Background(), []vectorstore.Record{e1, e2}, known)
	if err != nil {
		t.Fatal(err)
	}
	want := []records.Fact{
		{Fact: "User is a student at Peking University.", SourceChatID: "c1", FirstSeen: obsTS},
		{Fact: "User loves jazz.", SourceChatID: "c2", FirstSeen: obsTS.Add(time.Hour)},
	}
	if len(facts) != len(want) || facts[0] != want[0] || facts[1] != want[1] {
		t.Fatalf("facts %v, want %v", facts, want)
	}
	if p := lastUserPrompt(t, srv); !strings.Contains(p, "- User speaks Mandarin") || !strings.Contains(p, "id="+e2.ID) {
		t.Fatalf("prompt lacks known facts or episodes:\n%s", p)
	}
	if logs.Len() != 0 {
		t.Fatalf("unexpected log entries: %v", logs.All())
	}
}

func TestLLMSemanticWriterFallsBackOnUnknownEpisode(t *testing.T) {
	e1 := episode(testID(1), "user", "c1", "I live in Lisbon.", obsTS)
	cfg, _, logs, logger := llmFixture(t, llmtest.Reply{Content: `{"facts": [{"fact": "User lives in Lisbon.", "episode_id": "made-up"}]}`})
	w, _ := NewLLMSemanticWriter(cfg, logger)
	facts, err := w.Facts(context.Background(), []vectorstore.Record{e1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(facts) != 1 || facts[0] != (records.Fact{Fact: "User lives in Lisbon.", SourceChatID: "c1", FirstSeen: obsTS, ProcessedBy: records.ProcessedByRulesFallback}) {
		t.Fatalf("facts %v, want the rule-based fact", facts)
	}
	assertFellBack(t, logs, "semantic")
}

func TestLLMRewritersUseTheModelAndFallBackOnBadReplies(t *testing.T) {
	a := episode(testID(1), "user", "c1", "I went hiking.", obsTS)
	b := episode(testID(2), "user", "c2", "I went hiking with Ana.", obsTS.Add(time.Hour))
	ctx := context.Background()

	cfg, _, _, logger := llmFixture(t,
		llmtest.Reply{Content: `{"text": "I went hiking with Ana."}`},
		llmtest.Reply{Content: `{"a": "Hiking alone in chat c1.", "b": "Hiking with Ana in chat c2."}`},
		llmtest.Reply{Content: `{"text": "I went hiking; recalled while planning a trip."}`})
	m, _ := NewLLMMerger(cfg, logger)
	s, _ := NewLLMSeparator(cfg, logger)
	r, _ := NewLLMReconsolidator(cfg, logger)
	if got, err := m.Merge(ctx, a, b); err != nil || got != (Rewrite{Text: "I went hiking with Ana."}) {
		t.Fatalf("merge = %+v, %v", got, err)
	}
	if ga, gb, err := s.Separate(ctx, a, b); err != nil || ga != (Rewrite{Text: "Hiking alone in chat c1."}) || gb != (Rewrite{Text: "Hiking with Ana in chat c2."}) {
		t.Fatalf("separate = %+v, %+v, %v", ga, gb, err)
	}
	if got, err := r.Reconsolidate(ctx, a, "planning a trip"); err != nil || got != (Rewrite{Text: "I went hiking; recalled while planning a trip."}) {
		t.Fatalf("reconsolidate = %+v, %v", got, err)
	}

	cfg, _, logs, logger := llmFixture(t,
		llmtest.Reply{Content: `{"text": ""}`},
		llmtest.Reply{Content: `{"a": "Same.", "b": "same"}`},
		llmtest.Reply{Content: `{"text": " "}`})
	m, _ = NewLLMMerger(cfg, logger)
	s, _ = NewLLMSeparator(cfg, logger)
	r, _ = NewLLMReconsolidator(cfg, logger)
	marked := func(rw Rewrite) Rewrite { return Rewrite{Text: rw.Text, ProcessedBy: records.ProcessedByRulesFallback} }
	wantM, _ := NewRuleMerger().Merge(ctx, a, b)
	if got, err := m.Merge(ctx, a, b); err != nil || got != marked(wantM) {
		t.Fatalf("merge fallback = %+v, %v; want %+v", got, err, marked(wantM))
	}
	wantA, wantB, _ := NewRuleSeparator().Separate(ctx, a, b)
	if ga, gb, err := s.Separate(ctx, a, b); err != nil || ga != marked(wantA) || gb != marked(wantB) {
		t.Fatalf("separate fallback = %+v, %+v, %v", ga, gb, err)
	}
	wantR, _ := NewRuleReconsolidator().Reconsolidate(ctx, a, "trip")
	if got, err := r.Reconsolidate(ctx, a, "trip"); err != nil || got != marked(wantR) {
		t.Fatalf("reconsolidate fallback = %+v, %v; want %+v", got, err, marked(wantR))
	}
	if n := len(logs.FilterMessage("LLM reply unusable, using the rule-based default").All()); n != 3 {
		t.Fatalf("%d fallback warnings, want 3", n)
	}
}

func TestLLMConfigNeedsAClient(t *testing.T) {
	if _, err := NewLLMDecider(LLMConfig{}, nil); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("error %v, want ErrInvalidConfig", err)
	}
}
