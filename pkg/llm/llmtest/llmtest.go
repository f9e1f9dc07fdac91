// Package llmtest runs a real HTTP server speaking the OpenAI chat-completions API
// with scripted replies, so that code using pkg/llm is tested over the wire without
// a model.
package llmtest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// Reply scripts one response of the server.
type Reply struct {
	// Status is the HTTP status; 0 means 200. Non-2xx statuses get an OpenAI-style
	// error body with Content as its message.
	Status int
	// Content is the assistant message text of a 2xx reply.
	Content string
	// Hang makes the handler wait until the client gives up (its request context
	// ends), to exercise timeouts.
	Hang bool
}

// Request is what the server received.
type Request struct {
	Authorization string
	Path          string
	Body          map[string]any // the decoded JSON body
}

// Server is an httptest.Server answering POST <URL>/chat/completions.
type Server struct {
	srv *httptest.Server

	mu       sync.Mutex
	replies  []Reply
	requests []Request
}

// NewServer starts a server that answers with replies in order and repeats the last
// one once the script runs out. It is closed when the test ends.
func NewServer(t testing.TB, replies ...Reply) *Server {
	t.Helper()
	if len(replies) == 0 {
		t.Fatal("llmtest: NewServer needs at least one reply")
	}
	s := &Server{replies: replies}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

// URL is the base URL to configure the client with (it ends in /v1).
func (s *Server) URL() string { return s.srv.URL + "/v1" }

// Close stops the server; calls made afterwards find nothing listening.
func (s *Server) Close() { s.srv.Close() }

// Requests returns the requests received so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	_ = json.Unmarshal(raw, &body) // a malformed body is recorded as nil for the test to see

	s.mu.Lock()
	n := len(s.requests)
	s.requests = append(s.requests, Request{Authorization: r.Header.Get("Authorization"), Path: r.URL.Path, Body: body})
	reply := s.replies[min(n, len(s.replies)-1)]
	s.mu.Unlock()

	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		writeJSON(w, http.StatusNotFound, errorBody(fmt.Sprintf("no route %s %s", r.Method, r.URL.Path)))
		return
	}
	if reply.Hang {
		<-r.Context().Done()
		return
	}
	if reply.Status != 0 && reply.Status/100 != 2 {
		writeJSON(w, reply.Status, errorBody(reply.Content))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"id":      fmt.Sprintf("chatcmpl-%d", n+1),
		"object":  "chat.completion",
		"created": 1700000000,
		"model":   body["model"],
		"choices": []any{map[string]any{
			"index":         0,
			"message":       map[string]any{"role": "assistant", "content": reply.Content},
			"finish_reason": "stop",
		}},
		"usage": map[string]any{"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
	})
}

func errorBody(msg string) map[string]any {
	return map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error"}}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
