// Package llm is the adapter to any OpenAI-compatible chat-completions endpoint
// (OpenAI, vLLM, Ollama, llama.cpp server, ...). It asks for JSON, validates the reply
// against a JSON Schema and retries transient failures with exponential backoff
// (SPEC C9). Errors are typed and name the endpoint; the API key never appears in an
// error or a log line.
package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	openai "github.com/sashabaranov/go-openai"
	"go.uber.org/zap"

	"github.com/agentmem/agentmem/pkg/clock"
)

// Defaults for the zero values of Config.
const (
	DefaultTimeout    = 60 * time.Second
	DefaultMaxRetries = 3
	DefaultRetryBase  = time.Second
	// DefaultConcurrency bounds the calls in flight to the endpoint from one Client.
	DefaultConcurrency = 32
	// maxRetries bounds the backoff: RetryBase·2^10 is already 17 minutes at 1 s.
	maxRetries = 10
)

// Config configures a Client. Zero values take the defaults noted.
type Config struct {
	// BaseURL is the API root the chat-completions path is appended to, e.g.
	// https://api.openai.com/v1 or http://localhost:11434/v1.
	BaseURL string
	Model   string
	// APIKey is sent as a bearer token; empty sends none (local servers need none).
	APIKey string
	// Timeout bounds each attempt, not the whole call (default 60 s).
	Timeout time.Duration
	// MaxRetries is the number of retries after the first attempt: 0 means the
	// default 3, a negative value means none. At most 10.
	MaxRetries int
	// RetryBase is the first backoff wait, doubled on each retry (default 1 s, so
	// 1 s, 2 s, 4 s as SPEC C9 asks).
	RetryBase time.Duration
	// Concurrency is the most calls in flight at once through this Client, across
	// every step that shares it (default DefaultConcurrency): the process's
	// processors share one Client, so this is what the endpoint sees from the
	// process. A call waits for a slot within its context.
	Concurrency int
	// Observer, when set, is told about every attempt (step, outcome, tokens).
	Observer Observer
	// Guard, if set, runs every call to the endpoint (with its retries): the
	// endpoint's circuit breaker (pkg/breaker), shared with whatever else calls
	// it. Nil calls directly.
	Guard Guard

	// sleep waits between retries (default: a timer within ctx); tests replace it
	// to read the schedule without waiting it out.
	sleep func(context.Context, time.Duration) error
}

// Guard runs calls to an endpoint and may refuse them; its errors wrap call's.
type Guard interface {
	Do(ctx context.Context, call func(context.Context) error) error
}

func (c *Config) setDefaults() {
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MaxRetries == 0 {
		c.MaxRetries = DefaultMaxRetries
	}
	if c.MaxRetries < 0 {
		c.MaxRetries = 0
	}
	if c.RetryBase == 0 {
		c.RetryBase = DefaultRetryBase
	}
	if c.sleep == nil {
		c.sleep = clock.Sleep
	}
}

// Validate reports what is wrong with the configuration, if anything.
func (c Config) Validate() error {
	if _, err := EndpointOf(c.BaseURL); err != nil {
		return err
	}
	if strings.TrimSpace(c.Model) == "" {
		return fmt.Errorf("%w: model is empty", ErrInvalidConfig)
	}
	if c.Timeout < 0 {
		return fmt.Errorf("%w: timeout %s is negative", ErrInvalidConfig, c.Timeout)
	}
	if c.RetryBase < 0 {
		return fmt.Errorf("%w: retry base %s is negative", ErrInvalidConfig, c.RetryBase)
	}
	if c.MaxRetries > maxRetries {
		return fmt.Errorf("%w: max retries %d exceeds %d", ErrInvalidConfig, c.MaxRetries, maxRetries)
	}
	if c.Concurrency < 0 {
		return fmt.Errorf("%w: concurrency %d is negative", ErrInvalidConfig, c.Concurrency)
	}
	return nil
}

// CallBudget is the longest one CompleteJSON call may take once it holds a slot:
// every attempt at Timeout plus the backoff between them. Zero values take the
// defaults, as in New.
func (c Config) CallBudget() time.Duration {
	c.setDefaults()
	backoff := c.RetryBase * time.Duration(1<<c.MaxRetries-1) // base·(1+2+…+2^(r-1))
	return time.Duration(c.MaxRetries+1)*c.Timeout + backoff
}

// EndpointOf returns the base URL without user info, query or fragment: the form
// that is safe to put in errors and logs.
func EndpointOf(baseURL string) (string, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return "", fmt.Errorf("%w: base URL: %v", ErrInvalidConfig, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("%w: base URL %q is not an absolute http(s) URL", ErrInvalidConfig, u.Redacted())
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String(), nil
}

// Client calls one model on one endpoint. It is safe for concurrent use.
type Client struct {
	cfg      Config
	endpoint string
	api      *openai.Client
	logger   *zap.Logger

	slots    chan struct{} // one token per call in flight
	observer Observer

	mu      sync.Mutex
	schemas map[string]*jsonschema.Schema // compiled once per schema text

	// secrets are what redact removes: the key and the base URL's user info.
	secrets []string
}

// New returns a Client for cfg. A nil logger logs nothing.
func New(cfg Config, logger *zap.Logger) (*Client, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	endpoint, err := EndpointOf(cfg.BaseURL)
	if err != nil {
		return nil, err
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	oc := openai.DefaultConfig(cfg.APIKey)
	oc.BaseURL = cfg.BaseURL
	// No client-wide timeout: each attempt gets its own deadline from Config.Timeout.
	// As many idle connections as calls in flight: the default transport keeps
	// 2, and every call beyond them would open (and close) a connection.
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = max(t.MaxIdleConnsPerHost, cfg.Concurrency)
	oc.HTTPClient = &http.Client{Transport: t}
	return &Client{
		secrets:  secretsOf(cfg),
		cfg:      cfg,
		endpoint: endpoint,
		api:      openai.NewClientWithConfig(oc),
		logger:   logger.With(zap.String("llm_endpoint", endpoint), zap.String("llm_model", cfg.Model)),
		schemas:  make(map[string]*jsonschema.Schema),
		slots:    make(chan struct{}, cfg.Concurrency),
		observer: cfg.Observer,
	}, nil
}

// Config returns the client's configuration with its defaults applied.
func (c *Client) Config() Config { return c.cfg }

// Endpoint returns the base URL calls go to, without credentials.
func (c *Client) Endpoint() string { return c.endpoint }

// CompleteJSON sends the system and user prompts, asks for a JSON object, validates
// the reply against schema (a JSON Schema document) and unmarshals it into out,
// which must be a non-nil pointer.
//
// Failures are *EndpointError values wrapping ErrUnavailable (after retries),
// ErrRequest, ErrBadReply or, when ctx ends first, the context's error; with a
// Guard, wrapped in its error, and a call it refused wraps ErrUnavailable.
func (c *Client) CompleteJSON(ctx context.Context, system, user string, schema []byte, out any) error {
	if v := reflect.ValueOf(out); v.Kind() != reflect.Pointer || v.IsNil() {
		return fmt.Errorf("%w: out must be a non-nil pointer, got %T", ErrInvalidArgument, out)
	}
	sch, err := c.compile(schema)
	if err != nil {
		return err
	}
	select {
	case c.slots <- struct{}{}:
	case <-ctx.Done():
		return c.fail(0, fmt.Errorf("llm call abandoned waiting for one of %d slots: %w", cap(c.slots), ctx.Err()))
	}
	defer func() { <-c.slots }()
	step := StepOf(ctx)
	var (
		content string
		usage   openai.Usage
	)
	if c.cfg.Guard == nil {
		content, usage, err = c.complete(ctx, step, system, user)
	} else {
		called := false
		err = c.cfg.Guard.Do(ctx, func(ctx context.Context) (err error) {
			called = true
			content, usage, err = c.complete(ctx, step, system, user)
			return err
		})
		var ee *EndpointError
		if err != nil && !called && !errors.As(err, &ee) {
			// Refused without a call (circuit open): still ErrUnavailable to callers.
			err = fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
	}
	if err != nil {
		return err
	}
	if err := decode(content, sch, out); err != nil {
		c.observe(step, OutcomeBadReply, usage)
		c.logger.Debug("llm reply rejected", zap.Error(err), zap.String("reply", c.redact(content)))
		return c.fail(0, fmt.Errorf("%w: %v", ErrBadReply, err))
	}
	c.observe(step, OutcomeOK, usage)
	return nil
}

// complete runs the chat completion with retries and returns the reply text and the
// token usage of the attempt that answered; each failed attempt is observed here,
// the answered one by the caller once it knows whether the reply is usable.
func (c *Client) complete(ctx context.Context, step, system, user string) (string, openai.Usage, error) {
	req := openai.ChatCompletionRequest{
		Model: c.cfg.Model,
		Messages: []openai.ChatCompletionMessage{
			{Role: openai.ChatMessageRoleSystem, Content: system},
			{Role: openai.ChatMessageRoleUser, Content: user},
		},
		// The field is omitempty, so a plain 0 would be dropped and the server default
		// (1) used; the smallest non-zero float is sent instead and means 0 in effect.
		Temperature: math.SmallestNonzeroFloat32,
		// json_object rather than json_schema: far more OpenAI-compatible servers
		// support it, and the reply is validated against the schema here anyway.
		ResponseFormat: &openai.ChatCompletionResponseFormat{Type: openai.ChatCompletionResponseFormatTypeJSONObject},
	}
	var (
		lastErr    string
		lastStatus int
	)
	for attempt := 0; attempt <= c.cfg.MaxRetries; attempt++ {
		if attempt > 0 {
			wait := c.cfg.RetryBase << (attempt - 1)
			c.logger.Warn("llm call failed, retrying",
				zap.Int("attempt", attempt), zap.Duration("wait", wait), zap.String("error", lastErr))
			if err := c.cfg.sleep(ctx, wait); err != nil {
				return "", openai.Usage{}, c.fail(lastStatus, fmt.Errorf("%w (last attempt: %s)", err, lastErr))
			}
		}
		actx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
		resp, err := c.api.CreateChatCompletion(actx, req)
		cancel()
		if err == nil {
			if len(resp.Choices) == 0 {
				c.observe(step, OutcomeBadReply, resp.Usage)
				return "", openai.Usage{}, c.fail(0, fmt.Errorf("%w: reply has no choices", ErrBadReply))
			}
			return resp.Choices[0].Message.Content, resp.Usage, nil
		}
		if ctx.Err() != nil {
			c.observe(step, OutcomeCanceled, openai.Usage{})
			return "", openai.Usage{}, c.fail(0, fmt.Errorf("llm call abandoned: %w", ctx.Err()))
		}
		kind, status := classify(err)
		detail := c.redact(err.Error())
		if kind != ErrUnavailable {
			outcome := OutcomeRejected
			if kind == ErrBadReply {
				outcome = OutcomeBadReply
			}
			c.observe(step, outcome, openai.Usage{})
			return "", openai.Usage{}, c.fail(status, fmt.Errorf("%w: %s", kind, detail))
		}
		c.observe(step, OutcomeUnavailable, openai.Usage{})
		lastErr, lastStatus = detail, status
	}
	return "", openai.Usage{}, c.fail(lastStatus, fmt.Errorf("%w after %d attempts: %s", ErrUnavailable, c.cfg.MaxRetries+1, lastErr))
}

// ObserveFallback tells the Observer that step used its offline twin in place
// of the model's answer (an unparsable or off-schema reply, or an unavailable
// endpoint), as outcome OutcomeFallback.
func (c *Client) ObserveFallback(step string) { c.observe(step, OutcomeFallback, openai.Usage{}) }

func (c *Client) observe(step, outcome string, u openai.Usage) {
	if c.observer != nil {
		c.observer.ObserveLLMCall(step, outcome, u.PromptTokens, u.CompletionTokens)
	}
}

func (c *Client) fail(status int, err error) error {
	return &EndpointError{Endpoint: c.endpoint, Model: c.cfg.Model, Status: status, Err: err}
}

// redact removes the API key from text that came from the server or the transport
// (servers echo keys in "invalid key" messages) and bounds its length, since error
// bodies can be whole HTML pages.
func (c *Client) redact(s string) string {
	for _, secret := range c.secrets {
		s = strings.ReplaceAll(s, secret, "[redacted]")
	}
	return truncate(s, 300)
}

// secretsOf lists what must never be shown of cfg: the API key and the base
// URL's user info (the transport's errors quote the URL as "user:***@host").
func secretsOf(cfg Config) []string {
	var out []string
	if u, err := url.Parse(cfg.BaseURL); err == nil && u.User != nil {
		out = append(out, u.User.String())
		if p, ok := u.User.Password(); ok && p != "" {
			out = append(out, p)
		}
		if n := u.User.Username(); n != "" {
			out = append(out, n+":***", n+"@")
		}
	}
	if cfg.APIKey != "" {
		out = append(out, cfg.APIKey)
	}
	return out
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// classify maps a go-openai error to the sentinel it belongs to, and the HTTP status
// when there was a response.
func classify(err error) (error, int) {
	// Status first: a RequestError for an HTML 502 page also wraps a JSON syntax error.
	var apiErr *openai.APIError
	if errors.As(err, &apiErr) && apiErr.HTTPStatusCode != 0 {
		return byStatus(apiErr.HTTPStatusCode), apiErr.HTTPStatusCode
	}
	var reqErr *openai.RequestError
	if errors.As(err, &reqErr) {
		return byStatus(reqErr.HTTPStatusCode), reqErr.HTTPStatusCode
	}
	var syntaxErr *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &syntaxErr) || errors.As(err, &typeErr) {
		return ErrBadReply, 0 // a 2xx whose body is not a chat completion
	}
	var netErr net.Error // includes *url.Error: every transport failure
	if errors.As(err, &netErr) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return ErrUnavailable, 0
	}
	return ErrRequest, 0 // refused before sending (e.g. a model the library rejects)
}

func byStatus(status int) error {
	if status == http.StatusTooManyRequests || status >= 500 {
		return ErrUnavailable
	}
	return ErrRequest
}

// schemaURL names the in-memory resource; the compiler needs a location for $ref
// resolution inside the schema.
const schemaURL = "mem:///reply.schema.json"

func (c *Client) compile(schema []byte) (*jsonschema.Schema, error) {
	key := string(schema)
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.schemas[key]; ok {
		return s, nil
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return nil, fmt.Errorf("%w: schema is not JSON: %v", ErrInvalidArgument, err)
	}
	comp := jsonschema.NewCompiler()
	if err := comp.AddResource(schemaURL, doc); err != nil {
		return nil, fmt.Errorf("%w: schema: %v", ErrInvalidArgument, err)
	}
	s, err := comp.Compile(schemaURL)
	if err != nil {
		return nil, fmt.Errorf("%w: schema does not compile: %v", ErrInvalidArgument, err)
	}
	c.schemas[key] = s
	return s, nil
}

// fence matches a Markdown code fence, which many models wrap JSON in even when asked
// not to.
var fence = regexp.MustCompile("(?s)```[A-Za-z]*\\s*(.*?)```")

// extractJSON returns the JSON text inside a reply: the first fenced block if any,
// else the span from the first opening to the last closing bracket (models sometimes
// put prose around the object).
func extractJSON(s string) string {
	if m := fence.FindStringSubmatch(s); m != nil {
		return strings.TrimSpace(m[1])
	}
	start, end := strings.IndexAny(s, "{["), strings.LastIndexAny(s, "}]")
	if start >= 0 && end > start {
		return s[start : end+1]
	}
	return strings.TrimSpace(s)
}

func decode(content string, sch *jsonschema.Schema, out any) error {
	raw := extractJSON(content)
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(raw))
	if err != nil {
		return fmt.Errorf("reply is not JSON: %v", err)
	}
	if err := sch.Validate(inst); err != nil {
		return fmt.Errorf("reply does not match the schema: %v", err)
	}
	if err := json.Unmarshal([]byte(raw), out); err != nil {
		return fmt.Errorf("reply does not fit %T: %v", out, err)
	}
	return nil
}
