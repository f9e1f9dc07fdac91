package llmtest

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Steps of agentmem that call a chat model, as Model tells them apart (by the
// first words of the system prompt each step sends).
const (
	StepDecide = "decide"
	// StepDecideBatch is the write decision of several messages in one request.
	StepDecideBatch   = "decide_batch"
	StepExtract       = "extract"
	StepSemantic      = "semantic"
	StepMerge         = "merge"
	StepSeparate      = "separate"
	StepReconsolidate = "reconsolidate"
	StepUnknown       = "unknown"
	// StepEmbed counts embedding requests (one per call, whatever its inputs).
	StepEmbed = "embed"
)

// stepPrompts maps the opening of each step's system prompt to the step.
var stepPrompts = []struct{ prefix, step string }{
	{"You decide whether one message", StepDecide},
	{"You decide, for each message of a numbered list", StepDecideBatch},
	{"You merge two memories", StepMerge},
	{"A memory of a person was just recalled", StepReconsolidate},
	{"You extract stable facts about people", StepSemantic},
	{"Two memories of a person are similar", StepSeparate},
	{"You read the conversation of a finished session", StepExtract},
}

// Model is a real HTTP server speaking the OpenAI chat-completions and embeddings
// APIs that answers every agentmem step with a reply of the shape its prompt asks
// for, deterministically, like a small obedient model. Its switches inject what a
// real endpoint does: latency, HTTP errors, invalid JSON and downtime. It counts
// the calls of each step. Safe for concurrent use.
type Model struct {
	srv *httptest.Server

	mu          sync.Mutex
	chatLatency time.Duration
	embLatency  time.Duration
	status      int  // non-zero: every request fails with it
	down        bool // every connection is dropped without an answer
	invalidJSON bool
	wrongSchema bool
	calls       map[string]int
	decisions   int // messages asked about by StepDecide and StepDecideBatch
	apiKeys     []string
	embedding   func(text string, dims int) []float32 // nil: embeddingsReply's bag of words
}

// NewModel starts a Model; it is closed when the test ends.
func NewModel(t testing.TB) *Model {
	t.Helper()
	m := StartModel()
	t.Cleanup(m.Close)
	return m
}

// StartModel starts a Model outside a test (agentmem bench's remote-model
// phase); the caller closes it.
func StartModel() *Model {
	m := &Model{calls: map[string]int{}}
	m.srv = httptest.NewServer(http.HandlerFunc(m.serve))
	return m
}

// Close stops the server and waits for the requests in progress.
func (m *Model) Close() { m.srv.Close() }

// URL is the base URL to configure clients with (it ends in /v1).
func (m *Model) URL() string { return m.srv.URL + "/v1" }

// SetLatency sets how long each chat completion and each embeddings request takes.
func (m *Model) SetLatency(chat, embeddings time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.chatLatency, m.embLatency = chat, embeddings
}

// SetStatus makes every request fail with HTTP status (and an OpenAI-style error
// body); 0 answers normally again.
func (m *Model) SetStatus(status int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.status = status
}

// SetDown drops every connection without an answer while down is true, as a
// server that went away does.
func (m *Model) SetDown(down bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.down = down
}

// SetEmbedding makes the embeddings endpoint answer fn(text, dimensions) for
// each input (normalised to unit length), as a model whose notion of meaning a
// test chooses; nil restores the default bag of words, under which only texts
// sharing words are similar.
func (m *Model) SetEmbedding(fn func(text string, dims int) []float32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.embedding = fn
}

// SetInvalidJSON makes chat completions answer text that is not JSON.
func (m *Model) SetInvalidJSON(invalid bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.invalidJSON = invalid
}

// SetWrongSchema makes chat completions answer JSON that matches no step's
// schema (none of the properties they require).
func (m *Model) SetWrongSchema(wrong bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.wrongSchema = wrong
}

// Calls returns how many requests of step were answered (or failed) so far.
func (m *Model) Calls(step string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls[step]
}

// Decisions returns how many write decisions were asked for so far: one per
// StepDecide request, one per message of a StepDecideBatch request.
func (m *Model) Decisions() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.decisions
}

// Authorizations returns the Authorization headers received, in order.
func (m *Model) Authorizations() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.apiKeys...)
}

type chatRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"messages"`
}

type embeddingRequest struct {
	Input      []string `json:"input"`
	Dimensions int      `json:"dimensions"`
}

func (m *Model) serve(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var step string
	var chat chatRequest
	var emb embeddingRequest
	switch r.URL.Path {
	case "/v1/chat/completions":
		_ = json.Unmarshal(raw, &chat)
		step = chatStep(chat)
	case "/v1/embeddings":
		_ = json.Unmarshal(raw, &emb)
		step = StepEmbed
	default:
		writeJSON(w, http.StatusNotFound, errorBody(fmt.Sprintf("no route %s %s", r.Method, r.URL.Path)))
		return
	}

	m.mu.Lock()
	m.calls[step]++
	switch step {
	case StepDecide:
		m.decisions++
	case StepDecideBatch:
		m.decisions += len(batchMessageRe.FindAllStringIndex(userPrompt(chat), -1))
	}
	m.apiKeys = append(m.apiKeys, r.Header.Get("Authorization"))
	latency, status, down, invalid, wrong, embedding := m.chatLatency, m.status, m.down, m.invalidJSON, m.wrongSchema, m.embedding
	if step == StepEmbed {
		latency = m.embLatency
	}
	m.mu.Unlock()

	if down {
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				_ = conn.Close()
				return
			}
		}
		writeJSON(w, http.StatusServiceUnavailable, errorBody("down"))
		return
	}
	select {
	case <-time.After(latency):
	case <-r.Context().Done():
		return
	}
	if status != 0 {
		writeJSON(w, status, errorBody(http.StatusText(status)))
		return
	}
	if step == StepEmbed {
		writeJSON(w, http.StatusOK, embeddingsReply(emb, embedding))
		return
	}
	content := "this is not JSON"
	switch {
	case wrong:
		content = `{"answer": "off the schema"}`
	case !invalid:
		content = m.answerOf(step, chat)
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"id": "chatcmpl-fake", "object": "chat.completion", "created": 1700000000, "model": chat.Model,
		"choices": []any{map[string]any{
			"index": 0, "message": map[string]any{"role": "assistant", "content": content}, "finish_reason": "stop",
		}},
		"usage": map[string]any{"prompt_tokens": len(raw) / 4, "completion_tokens": len(content) / 4, "total_tokens": (len(raw) + len(content)) / 4},
	})
}

// chatStep tells which step sent a chat request.
func chatStep(req chatRequest) string {
	if len(req.Messages) == 0 {
		return StepUnknown
	}
	system := req.Messages[0].Content
	for _, p := range stepPrompts {
		if strings.HasPrefix(system, p.prefix) {
			return p.step
		}
	}
	return extraStep(system)
}

var (
	memoryRe  = regexp.MustCompile(`(?s)Memory A \([^)]*\):\n(.*?)\n\nMemory B \([^)]*\):\n(.*)$`)
	recallRe  = regexp.MustCompile(`(?s)^Memory \([^)]*\):\n(.*?)\n\nRecalled in this context:`)
	episodeRe = regexp.MustCompile(`(?m)^- id=(\S+) .*? speaker=[^:]*: (.+)$`)
	turnRe    = regexp.MustCompile(`(?m)^\[(\w+)\] (.+)$`)
	// batchMessageRe opens each message of a batched write decision.
	batchMessageRe = regexp.MustCompile(`(?m)^=== message (\d+) ===\n`)
)

// userPrompt is the last message of req, the user prompt ("" without one).
func userPrompt(req chatRequest) string {
	if len(req.Messages) > 1 {
		return req.Messages[len(req.Messages)-1].Content
	}
	return ""
}

// answer is the reply a cooperative model gives to step.
func answer(step string, req chatRequest) string {
	user := userPrompt(req)
	var v any
	switch step {
	case StepDecide:
		v = decision(user)
	case StepDecideBatch:
		// Each numbered message is decided as it would be alone, so batching
		// changes no decision.
		decisions := []map[string]any{}
		parts := batchMessageRe.Split(user, -1)
		for i, n := range batchMessageRe.FindAllStringSubmatch(user, -1) {
			d := decision(strings.TrimSuffix(parts[i+1], "\n\n"))
			d["index"], _ = strconv.Atoi(n[1])
			decisions = append(decisions, d)
		}
		v = map[string]any{"decisions": decisions}
	case StepExtract:
		entries := []map[string]string{}
		for _, m := range turnRe.FindAllStringSubmatch(user, -1) {
			if m[1] != "user" || !strings.Contains(strings.ToLower(m[2]), "remember") {
				continue
			}
			entries = append(entries, map[string]string{"category": category(m[2]), "content": strings.TrimSpace(m[2])})
		}
		v = map[string]any{"entries": entries}
	case StepSemantic:
		facts := []map[string]string{}
		for _, m := range episodeRe.FindAllStringSubmatch(user, -1) {
			facts = append(facts, map[string]string{"fact": "User: " + strings.TrimSpace(m[2]), "episode_id": m[1]})
		}
		v = map[string]any{"facts": facts}
	case StepMerge:
		a, b := pair(user)
		v = map[string]any{"text": strings.TrimSpace(a + " " + b)}
	case StepSeparate:
		a, b := pair(user)
		v = map[string]any{"a": "First: " + a, "b": "Second: " + b}
	case StepReconsolidate:
		text := user
		if m := recallRe.FindStringSubmatch(user); m != nil {
			text = m[1]
		}
		v = map[string]any{"text": strings.TrimSpace(text)}
	default:
		if a, ok := extraAnswers[step]; ok {
			v = a(user)
			break
		}
		v = map[string]any{}
	}
	out, _ := json.Marshal(v)
	return string(out)
}

// decision is the write decision of one message block ("Message:\n" and its text).
func decision(block string) map[string]any {
	text := block
	if _, after, ok := strings.Cut(block, "Message:\n"); ok {
		text = after
	}
	lower := " " + strings.ToLower(text) + " "
	write := strings.Contains(lower, "remember") || strings.Contains(lower, " my ") || strings.Contains(lower, " i ")
	return map[string]any{"write": write, "thing": strings.TrimSpace(text), "context": "said in conversation", "reason": "fake model"}
}

func pair(user string) (string, string) {
	if m := memoryRe.FindStringSubmatch(user); m != nil {
		return strings.TrimSpace(m[1]), strings.TrimSpace(m[2])
	}
	return user, user
}

func category(text string) string {
	lower := strings.ToLower(text)
	switch {
	case strings.Contains(lower, "column") || strings.Contains(lower, "sheet") || strings.Contains(lower, "rows"):
		return "file_pattern"
	case strings.Contains(lower, "prefer") || strings.Contains(lower, "always use"):
		return "user_pref"
	}
	return "general"
}

// embeddingsReply embeds each input as a bag of hashed lower-case words, unit
// length: texts sharing words are near each other, as with a real model.
// bagOfWords is the default embedding: each word (lower-cased, punctuation
// trimmed) counts in one hashed dimension.
func bagOfWords(text string, dims int) []float32 {
	vec := make([]float32, dims)
	for _, w := range strings.Fields(strings.ToLower(text)) {
		h := fnv.New32a()
		_, _ = h.Write([]byte(strings.Trim(w, ".,;:!?\"'()")))
		vec[int(h.Sum32())%dims]++
	}
	return vec
}

func embeddingsReply(req embeddingRequest, embedding func(text string, dims int) []float32) map[string]any {
	dims := req.Dimensions
	if dims <= 0 {
		dims = 64
	}
	if embedding == nil {
		embedding = bagOfWords
	}
	data := make([]any, len(req.Input))
	for i, text := range req.Input {
		vec := make([]float32, dims) // float32 as a real server's: half the JSON to write and read
		copy(vec, embedding(text, dims))
		var norm float64
		for _, x := range vec {
			norm += float64(x) * float64(x)
		}
		if norm == 0 {
			vec[0], norm = 1, 1
		}
		for j := range vec {
			vec[j] = float32(float64(vec[j]) / math.Sqrt(norm))
		}
		data[i] = map[string]any{"object": "embedding", "index": i, "embedding": vec}
	}
	return map[string]any{"object": "list", "data": data, "model": "fake-embedding",
		"usage": map[string]any{"prompt_tokens": 1, "total_tokens": 1}}
}
