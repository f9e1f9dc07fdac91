package extract_test

import (
	"context"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/agentmem/agentmem/pkg/extract"
	"github.com/agentmem/agentmem/pkg/llm"
	"github.com/agentmem/agentmem/pkg/llm/llmtest"
	"github.com/agentmem/agentmem/pkg/markdown"
)

func newLLMExtractor(t *testing.T, srv *llmtest.Server, logger *zap.Logger) *extract.LLMExtractor {
	t.Helper()
	client, err := llm.New(llm.Config{
		BaseURL: srv.URL(), Model: "extract-model", APIKey: "sk-extract",
		Timeout: 2 * time.Second, MaxRetries: 2, RetryBase: time.Millisecond,
	}, logger)
	if err != nil {
		t.Fatal(err)
	}
	return extract.NewLLM(client, logger)
}

var session = conv(
	"system", "You are excel-bot. SECRET-SYSTEM-PROMPT",
	"user", "My sales.csv has columns date, product, qty.",
	"assistant", "Got it.",
	"tool", "shape: (5000, 3)",
)

func TestLLMExtractorReturnsEntries(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Reply{Content: "```json\n" + `{"entries":[
		{"category":"file_pattern","content":"sales.csv: columns date, product, qty; 5000 rows"},
		{"category":"user_pref","content":"  Prefers   line charts "},
		{"category":"error_solution","content":"Error: #VALUE!. Fix: equal range sizes"},
		{"category":"general","content":"Fiscal year starts in April"},
		{"category":"General","content":"fiscal year starts in april"}
	]}` + "\n```"})
	got, err := newLLMExtractor(t, srv, nil).Extract(context.Background(), session)
	if err != nil {
		t.Fatalf("Extract: %v", err)
	}
	want := []extract.Extracted{
		{Category: markdown.CategoryFilePattern, Content: "sales.csv: columns date, product, qty; 5000 rows"},
		{Category: markdown.CategoryUserPref, Content: "Prefers line charts"},
		{Category: markdown.CategoryErrorSolution, Content: "Error: #VALUE!. Fix: equal range sizes"},
		{Category: markdown.CategoryGeneral, Content: "Fiscal year starts in April"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("entry %d = %+v, want %+v", i, got[i], want[i])
		}
	}

	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("server saw %d requests, want 1", len(reqs))
	}
	msgs, _ := reqs[0].Body["messages"].([]any)
	if len(msgs) != 2 {
		t.Fatalf("messages %v", reqs[0].Body["messages"])
	}
	system, _ := msgs[0].(map[string]any)["content"].(string)
	user, _ := msgs[1].(map[string]any)["content"].(string)
	for _, cat := range []string{"file_pattern", "user_pref", "error_solution", "general", `"entries"`} {
		if !strings.Contains(system, cat) {
			t.Errorf("system prompt does not mention %s", cat)
		}
	}
	for _, line := range []string{"[user] My sales.csv has columns date, product, qty.", "[assistant] Got it.", "[tool] shape: (5000, 3)"} {
		if !strings.Contains(user, line) {
			t.Errorf("user prompt lacks %q:\n%s", line, user)
		}
	}
	if strings.Contains(user, "SECRET-SYSTEM-PROMPT") {
		t.Error("the agent's system prompt was sent for extraction")
	}
}

// Issue 22: an unusable reply falls back to the offline rules, not to nothing.
func TestLLMExtractorGarbageFallsBackToTheRules(t *testing.T) {
	want, err := extract.NewRules(nil).Extract(context.Background(), session)
	if err != nil || len(want) == 0 {
		t.Fatalf("the rules find %v (%v) in the test session; want some entries", want, err)
	}
	for name, content := range map[string]string{
		"prose":            "I could not find anything worth remembering.",
		"wrong shape":      `{"memories":["a","b"]}`,
		"entry not object": `{"entries":["sales.csv has columns a, b"]}`,
	} {
		t.Run(name, func(t *testing.T) {
			srv := llmtest.NewServer(t, llmtest.Reply{Content: content})
			got, err := newLLMExtractor(t, srv, nil).ExtractReport(context.Background(), session)
			if err != nil {
				t.Fatalf("ExtractReport: %v, want the rules' entries", err)
			}
			if !reflect.DeepEqual(got.Entries, want) || got.ProcessedBy != extract.ProcessedByRulesFallback || !strings.Contains(got.Reason, "bad reply") {
				t.Fatalf("got %+v, want the rules' %+v marked %s", got, want, extract.ProcessedByRulesFallback)
			}
		})
	}
}

func TestLLMExtractorDropsInvalidCategory(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	srv := llmtest.NewServer(t, llmtest.Reply{Content: `{"entries":[
		{"category":"todo","content":"buy milk"},
		{"category":"user_pref","content":"Prefers bar charts"},
		{"category":"user_pref","content":"   "}
	]}`})
	got, err := newLLMExtractor(t, srv, zap.New(core)).Extract(context.Background(), session)
	if err != nil {
		t.Fatalf("Extract: %v", err)
	}
	if len(got) != 1 || got[0] != (extract.Extracted{Category: markdown.CategoryUserPref, Content: "Prefers bar charts"}) {
		t.Fatalf("got %+v", got)
	}
	if logs.FilterField(zap.String("category", "todo")).Len() != 1 {
		t.Fatalf("the dropped category was not logged: %v", logs.All())
	}
}

// Issue 22: with the model unavailable after its retries, the rules stand in; a
// refused request (wrong key, unknown model) is still an error.
func TestLLMExtractorUnavailableFallsBackToTheRules(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Reply{Status: http.StatusServiceUnavailable, Content: "overloaded"})
	got, err := newLLMExtractor(t, srv, nil).ExtractReport(context.Background(), session)
	if err != nil || len(got.Entries) == 0 || got.ProcessedBy != extract.ProcessedByRulesFallback {
		t.Fatalf("got %+v, %v; want the rules' entries marked %s", got, err, extract.ProcessedByRulesFallback)
	}
	if n := len(srv.Requests()); n != 3 {
		t.Fatalf("server saw %d requests, want 3 (1 + 2 retries)", n)
	}
	refused := llmtest.NewServer(t, llmtest.Reply{Status: http.StatusUnauthorized, Content: "bad key"})
	if got, err := newLLMExtractor(t, refused, nil).Extract(context.Background(), session); !errors.Is(err, llm.ErrRequest) || got != nil {
		t.Fatalf("refused: %v, %v; want no entries and an error wrapping llm.ErrRequest", got, err)
	}
}

func TestLLMExtractorSkipsEmptyConversations(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Reply{Content: `{"entries":[{"category":"general","content":"x"}]}`})
	x := newLLMExtractor(t, srv, nil)
	for _, c := range [][]extract.Message{nil, conv("system", "You are a bot."), conv("user", "  ", "system", "hi")} {
		got, err := x.Extract(context.Background(), c)
		if err != nil || len(got) != 0 {
			t.Fatalf("Extract(%+v) = %+v, %v; want nothing", c, got, err)
		}
	}
	if n := len(srv.Requests()); n != 0 {
		t.Fatalf("the model was called %d times for conversations with nothing to extract (SPEC A3)", n)
	}
}

func TestLLMExtractorWithoutClient(t *testing.T) {
	if _, err := extract.NewLLM(nil, nil).Extract(context.Background(), session); err == nil {
		t.Fatal("an extractor without a client returned no error")
	}
}

// Issue 28: with llmtest.Model's unparsable and off-schema switches, the
// extraction is the rules', marked rules_fallback and counted once as
// agentmem_llm_calls_total{step="extract", outcome="fallback"}.
func TestLLMExtractorFallbackIsCounted(t *testing.T) {
	want, err := extract.NewRules(nil).Extract(context.Background(), session)
	if err != nil || len(want) == 0 {
		t.Fatalf("the rules find %v (%v) in the test session; want some entries", want, err)
	}
	for _, sw := range llmtest.UnusableReplies {
		t.Run(sw.Name, func(t *testing.T) {
			client, fallbacks := sw.Start(t)
			got, err := extract.NewLLM(client, nil).ExtractReport(context.Background(), session)
			if err != nil || !reflect.DeepEqual(got.Entries, want) || got.ProcessedBy != extract.ProcessedByRulesFallback {
				t.Fatalf("got %+v, %v; want the rules' %+v marked %s", got, err, want, extract.ProcessedByRulesFallback)
			}
			if n := fallbacks()[extract.StepExtract]; n != 1 {
				t.Errorf("agentmem_llm_calls_total{step=extract,outcome=fallback} = %v, want 1", n)
			}
		})
	}
}
