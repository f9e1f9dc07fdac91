package embed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
)

const testKey = "sk-test-secret-key-1234567890"

// fakeEmbeddings is an OpenAI-compatible /v1/embeddings server. respond decides the
// reply to the n-th request (0-based); the default answers with dims-long vectors
// whose first component is the input's length, so tests can check ordering.
type fakeEmbeddings struct {
	t       *testing.T
	dims    int
	respond func(n int, w http.ResponseWriter) bool // true when it wrote a reply itself

	mu      sync.Mutex
	batches [][]string
}

func (f *fakeEmbeddings) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/embeddings" || r.Method != http.MethodPost {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	if got := r.Header.Get("Authorization"); got != "Bearer "+testKey {
		f.t.Errorf("Authorization header %q", got)
	}
	var req struct {
		Input      []string `json:"input"`
		Model      string   `json:"model"`
		Dimensions int      `json:"dimensions"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		f.t.Errorf("decoding request: %v", err)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	n := len(f.batches)
	f.batches = append(f.batches, req.Input)
	f.mu.Unlock()
	if f.respond != nil && f.respond(n, w) {
		return
	}
	type item struct {
		Object    string    `json:"object"`
		Index     int       `json:"index"`
		Embedding []float32 `json:"embedding"`
	}
	data := make([]item, len(req.Input))
	// Reverse order: the server may list embeddings in any order; Index places them.
	for i, text := range req.Input {
		v := make([]float32, f.dims)
		v[0] = float32(len(text))
		data[len(req.Input)-1-i] = item{Object: "embedding", Index: i, Embedding: v}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "model": req.Model, "data": data})
}

func (f *fakeEmbeddings) requests() [][]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][]string(nil), f.batches...)
}

func newOpenAITest(t *testing.T, fake *fakeEmbeddings, dims int) (*OpenAI, string) {
	t.Helper()
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	base := srv.URL + "/v1"
	o, err := NewOpenAI(OpenAIConfig{
		BaseURL: base, Model: "text-embedding-3-small", APIKey: testKey,
		Dimensions: dims, RetryBase: time.Millisecond,
	}, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	return o, base
}

func TestOpenAIConfigValidate(t *testing.T) {
	_, err := NewOpenAI(OpenAIConfig{BaseURL: "localhost:8080", Dimensions: 0}, nil)
	if !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("err = %v, want ErrInvalidConfig", err)
	}
	for _, want := range []string{"BaseURL", "Model", "Dimensions"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
}

func TestOpenAIBatching(t *testing.T) {
	fake := &fakeEmbeddings{t: t, dims: 8}
	o, _ := newOpenAITest(t, fake, 8)
	texts := make([]string, 150)
	for i := range texts {
		texts[i] = strings.Repeat("x", i+1)
	}
	vecs, err := o.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	// The requests go out concurrently, in any order.
	reqs := fake.requests()
	sizes := make([]int, len(reqs))
	for i, r := range reqs {
		sizes[i] = len(r)
	}
	if slices.Sort(sizes); !slices.Equal(sizes, []int{22, 64, 64}) {
		t.Fatalf("request sizes %v, want 64, 64 and 22", sizes)
	}
	if len(vecs) != len(texts) {
		t.Fatalf("%d vectors for %d texts", len(vecs), len(texts))
	}
	for i, v := range vecs {
		if len(v) != 8 || v[0] != float32(i+1) {
			t.Fatalf("vector %d = %v: not the embedding of text %d", i, v, i)
		}
	}
	if empty, err := o.Embed(context.Background(), nil); err != nil || len(empty) != 0 {
		t.Fatalf("no texts: %v, %v", empty, err)
	}
	if got := len(fake.requests()); got != 3 {
		t.Fatalf("embedding no texts sent a request (%d requests)", got)
	}
}

func TestOpenAIDimensionMismatch(t *testing.T) {
	fake := &fakeEmbeddings{t: t, dims: 16}
	o, base := newOpenAITest(t, fake, 8)
	_, err := o.Embed(context.Background(), []string{"a", "b"})
	if !errors.Is(err, ErrDimension) {
		t.Fatalf("err = %v, want ErrDimension", err)
	}
	if !strings.Contains(err.Error(), base) {
		t.Errorf("error %q does not name the endpoint %s", err, base)
	}
}

func TestOpenAIRetriesTransientErrors(t *testing.T) {
	fake := &fakeEmbeddings{t: t, dims: 4, respond: func(n int, w http.ResponseWriter) bool {
		if n == 0 {
			http.Error(w, `{"error":{"message":"overloaded","type":"server_error"}}`, http.StatusInternalServerError)
			return true
		}
		return false
	}}
	o, _ := newOpenAITest(t, fake, 4)
	vecs, err := o.Embed(context.Background(), []string{"hello"})
	if err != nil {
		t.Fatalf("500 then success: %v", err)
	}
	if len(vecs) != 1 || vecs[0][0] != 5 {
		t.Fatalf("vectors %v", vecs)
	}
	if got := len(fake.requests()); got != 2 {
		t.Fatalf("%d requests, want 2 (one failure, one retry)", got)
	}
}

func TestOpenAIGivesUpAfterRetries(t *testing.T) {
	fake := &fakeEmbeddings{t: t, dims: 4, respond: func(_ int, w http.ResponseWriter) bool {
		http.Error(w, `{"error":{"message":"unavailable"}}`, http.StatusServiceUnavailable)
		return true
	}}
	o, base := newOpenAITest(t, fake, 4)
	_, err := o.Embed(context.Background(), []string{"hello"})
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	if got := len(fake.requests()); got != 1+DefaultOpenAIRetries {
		t.Fatalf("%d requests, want %d", got, 1+DefaultOpenAIRetries)
	}
	if !strings.Contains(err.Error(), base) {
		t.Errorf("error %q does not name the endpoint", err)
	}
}

func TestOpenAIRejectedErrorHidesKey(t *testing.T) {
	fake := &fakeEmbeddings{t: t, dims: 4, respond: func(_ int, w http.ResponseWriter) bool {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"error":{"message":"Incorrect API key provided: %s","type":"invalid_request_error"}}`, testKey)
		return true
	}}
	o, base := newOpenAITest(t, fake, 4)
	_, err := o.Embed(context.Background(), []string{"hello"})
	if !errors.Is(err, ErrRejected) {
		t.Fatalf("err = %v, want ErrRejected", err)
	}
	if got := len(fake.requests()); got != 1 {
		t.Fatalf("a 401 was retried: %d requests", got)
	}
	if strings.Contains(err.Error(), testKey) {
		t.Fatalf("error text contains the API key: %q", err)
	}
	if !strings.Contains(err.Error(), base) || !strings.Contains(err.Error(), "Incorrect API key") {
		t.Fatalf("error %q should name the endpoint and keep the server's message", err)
	}
}

func TestOpenAIUnreachableEndpoint(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	base := srv.URL + "/v1"
	srv.Close() // nothing listens there any more
	o, err := NewOpenAI(OpenAIConfig{BaseURL: base, Model: "m", APIKey: testKey, Dimensions: 4, Retries: 2, RetryBase: time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = o.Embed(context.Background(), []string{"hello"})
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), base) || !strings.Contains(err.Error(), "3 attempts") {
		t.Fatalf("err = %v, want ErrUnavailable naming %s after 3 attempts", err, base)
	}
}

func TestOpenAIContextCancelledDuringBackoff(t *testing.T) {
	fake := &fakeEmbeddings{t: t, dims: 4, respond: func(_ int, w http.ResponseWriter) bool {
		http.Error(w, "busy", http.StatusTooManyRequests)
		return true
	}}
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	o, err := NewOpenAI(OpenAIConfig{BaseURL: srv.URL + "/v1", Model: "m", APIKey: testKey, Dimensions: 4, RetryBase: time.Hour}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = o.Embed(ctx, []string{"hello"})
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable wrapping the context error", err)
	}
	if time.Since(start) > 10*time.Second {
		t.Fatal("Embed waited out the backoff instead of returning on cancellation")
	}
}
