package app

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/agentmem/agentmem/pkg/breaker"
	"github.com/agentmem/agentmem/pkg/embed"
	"github.com/agentmem/agentmem/pkg/llm"
	"github.com/agentmem/agentmem/pkg/llm/llmtest"
)

// What an endpoint's HTTP status says about it: a refused key (401, 403) or an
// unknown model or path (404) is a configuration error that stops the workers;
// overload and server errors are an outage they wait out; any other refusal is
// about one request, and the endpoint answered.
func TestHTTPStatusClasses(t *testing.T) {
	for status, want := range map[int]breaker.Class{
		http.StatusUnauthorized:        breaker.ClassConfig,
		http.StatusForbidden:           breaker.ClassConfig,
		http.StatusNotFound:            breaker.ClassConfig,
		http.StatusBadRequest:          breaker.ClassSuccess,
		http.StatusTooManyRequests:     breaker.ClassTransient,
		http.StatusInternalServerError: breaker.ClassTransient,
	} {
		srv := llmtest.NewModel(t)
		srv.SetStatus(status)
		chat, err := llm.New(llm.Config{BaseURL: srv.URL(), Model: "m", MaxRetries: -1}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := classifyLLM(chat.CompleteJSON(context.Background(), "s", "u", []byte(`{"type":"object"}`), &map[string]any{})); got != want {
			t.Errorf("chat model HTTP %d: class %v, want %v", status, got, want)
		}
		emb, err := embed.NewOpenAI(embed.OpenAIConfig{BaseURL: srv.URL(), Model: "m", Dimensions: 4, Retries: -1, RetryBase: time.Millisecond}, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = emb.Embed(context.Background(), []string{"x"})
		if got := classifyEmbed(err); got != want {
			t.Errorf("embeddings HTTP %d: class %v (%v), want %v", status, got, err, want)
		}
	}
}
