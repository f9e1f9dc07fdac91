package llm_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/agentmem/agentmem/pkg/llm"
	"github.com/agentmem/agentmem/pkg/llm/llmtest"
)

const testKey = "sk-test-0123456789abcdef"

var answerSchema = []byte(`{
  "type": "object",
  "required": ["answer", "n"],
  "properties": {"answer": {"type": "string"}, "n": {"type": "integer"}},
  "additionalProperties": false
}`)

type answer struct {
	Answer string `json:"answer"`
	N      int    `json:"n"`
}

func newClient(t *testing.T, baseURL string, logger *zap.Logger) *llm.Client {
	t.Helper()
	c, err := llm.New(llm.Config{
		BaseURL:    baseURL,
		Model:      "test-model",
		APIKey:     testKey,
		Timeout:    200 * time.Millisecond,
		MaxRetries: 3,
		RetryBase:  time.Millisecond,
	}, logger)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}

func TestCompleteJSONSuccess(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Reply{Content: `{"answer":"42","n":42}`})
	c := newClient(t, srv.URL(), nil)

	var got answer
	if err := c.CompleteJSON(context.Background(), "be exact", "what is it?", answerSchema, &got); err != nil {
		t.Fatalf("CompleteJSON: %v", err)
	}
	if got != (answer{Answer: "42", N: 42}) {
		t.Fatalf("got %+v", got)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("server saw %d requests, want 1", len(reqs))
	}
	r := reqs[0]
	if r.Authorization != "Bearer "+testKey {
		t.Errorf("Authorization header %q does not carry the key", r.Authorization)
	}
	if r.Body["model"] != "test-model" {
		t.Errorf("model %v", r.Body["model"])
	}
	if rf, _ := r.Body["response_format"].(map[string]any); rf["type"] != "json_object" {
		t.Errorf("response_format %v, want json_object", r.Body["response_format"])
	}
	if temp, ok := r.Body["temperature"].(float64); !ok || temp > 1e-6 {
		t.Errorf("temperature %v, want (effectively) 0 sent explicitly", r.Body["temperature"])
	}
	msgs, _ := r.Body["messages"].([]any)
	if len(msgs) != 2 {
		t.Fatalf("messages %v", r.Body["messages"])
	}
	if m := msgs[0].(map[string]any); m["role"] != "system" || m["content"] != "be exact" {
		t.Errorf("system message %v", m)
	}
	if m := msgs[1].(map[string]any); m["role"] != "user" || m["content"] != "what is it?" {
		t.Errorf("user message %v", m)
	}
}

func TestCompleteJSONToleratesFencesAndProse(t *testing.T) {
	for name, content := range map[string]string{
		"json fence": "```json\n{\"answer\":\"a\",\"n\":1}\n```",
		"bare fence": "```\n{\"answer\":\"a\",\"n\":1}\n```",
		"prose":      "Sure! Here it is: {\"answer\":\"a\",\"n\":1} Hope that helps.",
		"whitespace": "\n  {\"answer\":\"a\",\"n\":1}  \n",
	} {
		t.Run(name, func(t *testing.T) {
			srv := llmtest.NewServer(t, llmtest.Reply{Content: content})
			var got answer
			if err := newClient(t, srv.URL(), nil).CompleteJSON(context.Background(), "s", "u", answerSchema, &got); err != nil {
				t.Fatalf("CompleteJSON: %v", err)
			}
			if got != (answer{Answer: "a", N: 1}) {
				t.Fatalf("got %+v", got)
			}
		})
	}
}

func TestCompleteJSONRetries5xx(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	srv := llmtest.NewServer(t,
		llmtest.Reply{Status: http.StatusInternalServerError, Content: "overloaded"},
		llmtest.Reply{Content: `{"answer":"ok","n":1}`},
	)
	c := newClient(t, srv.URL(), zap.New(core))

	var got answer
	if err := c.CompleteJSON(context.Background(), "s", "u", answerSchema, &got); err != nil {
		t.Fatalf("CompleteJSON: %v", err)
	}
	if n := len(srv.Requests()); n != 2 {
		t.Fatalf("server saw %d requests, want 2 (one retry)", n)
	}
	if got.Answer != "ok" {
		t.Fatalf("got %+v", got)
	}
	if logs.FilterMessage("llm call failed, retrying").Len() != 1 {
		t.Fatalf("want one retry warning, got %v", logs.All())
	}
}

func TestCompleteJSONRetries429ThenGivesUp(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Reply{Status: http.StatusTooManyRequests, Content: "slow down"})
	err := newClient(t, srv.URL(), nil).CompleteJSON(context.Background(), "s", "u", answerSchema, &answer{})
	if !errors.Is(err, llm.ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	if n := len(srv.Requests()); n != 4 {
		t.Fatalf("server saw %d requests, want 4 (1 + 3 retries)", n)
	}
	var ee *llm.EndpointError
	if !errors.As(err, &ee) || ee.Status != http.StatusTooManyRequests {
		t.Fatalf("err = %#v, want *EndpointError with status 429", err)
	}
}

func TestCompleteJSONDoesNotRetry4xx(t *testing.T) {
	// Servers echo the key they were given; it must be redacted from the error.
	srv := llmtest.NewServer(t, llmtest.Reply{Status: http.StatusBadRequest, Content: "bad key " + testKey})
	err := newClient(t, srv.URL(), nil).CompleteJSON(context.Background(), "s", "u", answerSchema, &answer{})
	if !errors.Is(err, llm.ErrRequest) {
		t.Fatalf("err = %v, want ErrRequest", err)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Fatalf("server saw %d requests, want 1 (no retry)", n)
	}
	if strings.Contains(err.Error(), testKey) {
		t.Fatalf("error text leaks the API key: %v", err)
	}
	if !strings.Contains(err.Error(), srv.URL()) {
		t.Fatalf("error %q does not name the endpoint %s", err, srv.URL())
	}
}

func TestCompleteJSONBadReply(t *testing.T) {
	for name, content := range map[string]string{
		"garbage":         "I am sorry, I cannot do that.",
		"truncated":       `{"answer":"a",`,
		"schema mismatch": `{"answer":7,"n":"seven"}`,
		"missing field":   `{"answer":"a"}`,
		"extra field":     `{"answer":"a","n":1,"x":true}`,
	} {
		t.Run(name, func(t *testing.T) {
			srv := llmtest.NewServer(t, llmtest.Reply{Content: content})
			err := newClient(t, srv.URL(), nil).CompleteJSON(context.Background(), "s", "u", answerSchema, &answer{})
			if !errors.Is(err, llm.ErrBadReply) {
				t.Fatalf("err = %v, want ErrBadReply", err)
			}
			if n := len(srv.Requests()); n != 1 {
				t.Fatalf("server saw %d requests, want 1 (a bad reply is not retried)", n)
			}
		})
	}
}

func TestCompleteJSONPerAttemptTimeout(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Reply{Hang: true})
	c, err := llm.New(llm.Config{
		BaseURL: srv.URL(), Model: "m", APIKey: testKey,
		Timeout: 50 * time.Millisecond, MaxRetries: 2, RetryBase: time.Millisecond,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = c.CompleteJSON(context.Background(), "s", "u", answerSchema, &answer{})
	if !errors.Is(err, llm.ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	if n := len(srv.Requests()); n != 3 {
		t.Fatalf("server saw %d requests, want 3 (each attempt timed out and was retried)", n)
	}
}

func TestCompleteJSONConnectionRefused(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Reply{Content: `{}`})
	base := srv.URL()
	srv.Close()

	err := newClient(t, base, nil).CompleteJSON(context.Background(), "s", "u", answerSchema, &answer{})
	if !errors.Is(err, llm.ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	var ee *llm.EndpointError
	if !errors.As(err, &ee) {
		t.Fatalf("err = %#v, want *EndpointError", err)
	}
	if ee.Endpoint != base || ee.Model != "test-model" {
		t.Fatalf("EndpointError names %q/%q, want %q/test-model", ee.Endpoint, ee.Model, base)
	}
	if !strings.Contains(err.Error(), base) {
		t.Fatalf("error %q does not name the endpoint", err)
	}
	t.Logf("error text: %v", err)
	if strings.Contains(err.Error(), testKey) {
		t.Fatalf("error leaks the key: %v", err)
	}
}

func TestCompleteJSONCallerCancelStopsRetries(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Reply{Status: http.StatusServiceUnavailable})
	c, err := llm.New(llm.Config{BaseURL: srv.URL(), Model: "m", RetryBase: time.Hour}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.CompleteJSON(ctx, "s", "u", answerSchema, &answer{}) }()
	deadline := time.Now().Add(5 * time.Second)
	for len(srv.Requests()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no request reached the server")
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("CompleteJSON kept waiting for its backoff after the caller cancelled")
	}
}

func TestKeyNeverLogged(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	srv := llmtest.NewServer(t,
		llmtest.Reply{Status: http.StatusBadGateway, Content: "upstream said " + testKey},
		llmtest.Reply{Content: "not json " + testKey},
	)
	_ = newClient(t, srv.URL(), zap.New(core)).CompleteJSON(context.Background(), "s", "u", answerSchema, &answer{})
	if logs.Len() == 0 {
		t.Fatal("expected log lines for the retry and the bad reply")
	}
	for _, e := range logs.All() {
		line := e.Message
		for k, v := range e.ContextMap() {
			line += " " + k + "=" + toString(v)
		}
		if strings.Contains(line, testKey) {
			t.Fatalf("log line leaks the key: %s", line)
		}
	}
}

func toString(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	if e, ok := v.(error); ok {
		return e.Error()
	}
	return ""
}

func TestNewValidates(t *testing.T) {
	for name, cfg := range map[string]llm.Config{
		"no base URL":      {Model: "m"},
		"relative URL":     {BaseURL: "localhost:8080/v1", Model: "m"},
		"ftp URL":          {BaseURL: "ftp://example.org/v1", Model: "m"},
		"no model":         {BaseURL: "http://127.0.0.1:1/v1"},
		"negative timeout": {BaseURL: "http://127.0.0.1:1/v1", Model: "m", Timeout: -time.Second},
		"too many retries": {BaseURL: "http://127.0.0.1:1/v1", Model: "m", MaxRetries: 11},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := llm.New(cfg, nil); !errors.Is(err, llm.ErrInvalidConfig) {
				t.Fatalf("err = %v, want ErrInvalidConfig", err)
			}
		})
	}
}

func TestEndpointHidesCredentials(t *testing.T) {
	c, err := llm.New(llm.Config{BaseURL: "http://user:secret@127.0.0.1:1/v1?key=secret", Model: "m"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(c.Endpoint(), "secret") || c.Endpoint() != "http://127.0.0.1:1/v1" {
		t.Fatalf("Endpoint() = %q", c.Endpoint())
	}
}

func TestCompleteJSONInvalidArguments(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Reply{Content: `{"answer":"a","n":1}`})
	c := newClient(t, srv.URL(), nil)
	var a answer
	for name, call := range map[string]func() error{
		"schema not JSON": func() error { return c.CompleteJSON(context.Background(), "s", "u", []byte("{"), &a) },
		"schema invalid":  func() error { return c.CompleteJSON(context.Background(), "s", "u", []byte(`{"type":"nope"}`), &a) },
		"out not pointer": func() error { return c.CompleteJSON(context.Background(), "s", "u", answerSchema, a) },
		"out nil pointer": func() error { return c.CompleteJSON(context.Background(), "s", "u", answerSchema, (*answer)(nil)) },
	} {
		t.Run(name, func(t *testing.T) {
			if err := call(); !errors.Is(err, llm.ErrInvalidArgument) {
				t.Fatalf("err = %v, want ErrInvalidArgument", err)
			}
		})
	}
	if n := len(srv.Requests()); n != 0 {
		t.Fatalf("invalid calls reached the server %d times", n)
	}
}

// SPEC C9 for the chat model: a transient failure is retried after 1 s, 2 s and
// 4 s by default (the waits are recorded, not slept), and the call succeeds as
// soon as the endpoint answers.
func TestRetryScheduleIsC9(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fails int
		waits []time.Duration
		ok    bool
	}{
		{"recovers after two waits", 2, []time.Duration{time.Second, 2 * time.Second}, true},
		{"gives up after three retries", 4, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			replies := make([]llmtest.Reply, 0, tc.fails+1)
			for range tc.fails {
				replies = append(replies, llmtest.Reply{Status: http.StatusServiceUnavailable, Content: "down"})
			}
			srv := llmtest.NewServer(t, append(replies, llmtest.Reply{Content: `{"answer":"ok","n":1}`})...)
			var waits []time.Duration
			cfg := llm.WithSleep(llm.Config{BaseURL: srv.URL(), Model: "m"}, func(_ context.Context, d time.Duration) error {
				waits = append(waits, d)
				return nil
			})
			c, err := llm.New(cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			err = c.CompleteJSON(context.Background(), "s", "u", answerSchema, &answer{})
			if (err == nil) != tc.ok || !tc.ok && !errors.Is(err, llm.ErrUnavailable) {
				t.Fatalf("CompleteJSON: %v, want success %v", err, tc.ok)
			}
			if !slices.Equal(waits, tc.waits) || len(srv.Requests()) != len(tc.waits)+1 {
				t.Fatalf("waits %v over %d requests, want %v", waits, len(srv.Requests()), tc.waits)
			}
		})
	}
}
