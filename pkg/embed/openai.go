package embed

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	openai "github.com/sashabaranov/go-openai"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
)

// Defaults for OpenAIConfig.
const (
	DefaultOpenAIBatchSize = 64
	// DefaultOpenAIConcurrency: an ingest batch of 128 texts is two requests of
	// 64, answered in one round trip.
	DefaultOpenAIConcurrency = 4
	DefaultOpenAIRetries     = 3
	DefaultOpenAIRetryBase   = time.Second
)

// OpenAIConfig configures the OpenAI-compatible embedder.
type OpenAIConfig struct {
	// BaseURL of the API including the version, e.g. "https://api.openai.com/v1" or
	// "http://localhost:11434/v1". Required.
	BaseURL string
	// Model is the embedding model name. Required.
	Model string
	// APIKey is sent as a bearer token; may be empty for local servers. It never
	// appears in errors or logs.
	APIKey string
	// Dimensions is the expected vector length. It is sent as the request's
	// "dimensions" (for models that can shorten their output) and every returned
	// vector is checked against it. Required.
	Dimensions int
	// BatchSize is the most texts sent in one request; default 64.
	BatchSize int
	// Concurrency is how many requests of one Embed call are in flight at once
	// (more texts than BatchSize); default DefaultOpenAIConcurrency.
	Concurrency int
	// Retries is how many times a transient failure (connection error, 429, 5xx) is
	// retried; default 3, negative disables retries.
	Retries int
	// RetryBase is the first retry delay, doubled on every retry: 1 s, 2 s, 4 s by
	// default. Tests shorten it.
	RetryBase time.Duration
	// HTTPClient overrides the HTTP client (timeouts, proxies, TLS); default has a
	// 60 s timeout.
	HTTPClient *http.Client
}

func (c *OpenAIConfig) setDefaults() {
	if c.BatchSize == 0 {
		c.BatchSize = DefaultOpenAIBatchSize
	}
	if c.Concurrency == 0 {
		c.Concurrency = DefaultOpenAIConcurrency
	}
	if c.Retries == 0 {
		c.Retries = DefaultOpenAIRetries
	}
	if c.Retries < 0 {
		c.Retries = 0
	}
	if c.RetryBase == 0 {
		c.RetryBase = DefaultOpenAIRetryBase
	}
	if c.HTTPClient == nil {
		// The default transport keeps 2 idle connections per host: requests in
		// flight beyond that would each open (and close) a connection.
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = max(t.MaxIdleConnsPerHost, 8*c.Concurrency)
		c.HTTPClient = &http.Client{Timeout: 60 * time.Second, Transport: t}
	}
}

// Validate reports configuration errors.
func (c OpenAIConfig) Validate() error {
	var errs []error
	if c.BaseURL == "" {
		errs = append(errs, errors.New("BaseURL is required"))
	} else if !strings.HasPrefix(c.BaseURL, "http://") && !strings.HasPrefix(c.BaseURL, "https://") {
		errs = append(errs, errors.New("BaseURL must start with http:// or https://"))
	}
	if c.Model == "" {
		errs = append(errs, errors.New("Model is required"))
	}
	if c.Dimensions < 1 {
		errs = append(errs, fmt.Errorf("Dimensions is %d, want > 0", c.Dimensions))
	}
	if c.BatchSize < 1 {
		errs = append(errs, fmt.Errorf("BatchSize is %d, want > 0", c.BatchSize))
	}
	if c.Concurrency < 1 {
		errs = append(errs, fmt.Errorf("Concurrency is %d, want > 0", c.Concurrency))
	}
	if c.RetryBase < 0 {
		errs = append(errs, fmt.Errorf("RetryBase is %s, want >= 0", c.RetryBase))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: openai embedder: %w", ErrInvalidConfig, err)
	}
	return nil
}

// OpenAI embeds through an OpenAI-compatible /embeddings endpoint. Safe for
// concurrent use.
type OpenAI struct {
	cfg    OpenAIConfig
	client *openai.Client
	logger *zap.Logger
	// endpoint is BaseURL without user info, query or fragment: the form errors
	// and logs show. secrets are what redact removes from server messages.
	endpoint string
	secrets  []string
}

// NewOpenAI returns an embedder for cfg. It does not contact the endpoint.
func NewOpenAI(cfg OpenAIConfig, logger *zap.Logger) (*OpenAI, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	cfg.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	endpoint, secrets, err := redactURL(cfg.BaseURL)
	if err != nil {
		return nil, err
	}
	if cfg.APIKey != "" {
		secrets = append(secrets, cfg.APIKey)
	}
	oc := openai.DefaultConfig(cfg.APIKey)
	oc.BaseURL = cfg.BaseURL
	oc.HTTPClient = cfg.HTTPClient
	return &OpenAI{
		cfg:      cfg,
		client:   openai.NewClientWithConfig(oc),
		logger:   logger.With(zap.String("endpoint", endpoint), zap.String("model", cfg.Model)),
		endpoint: endpoint,
		secrets:  secrets,
	}, nil
}

// redactURL returns raw without user info, query and fragment, and the
// credentials it held (user info, password, user name), longest first.
func redactURL(raw string) (string, []string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		// url.Parse quotes its input: name no part of it.
		return "", nil, fmt.Errorf("%w: openai embedder: BaseURL does not parse as a URL", ErrInvalidConfig)
	}
	var secrets []string
	if u.User != nil {
		secrets = append(secrets, u.User.String())
		if p, ok := u.User.Password(); ok && p != "" {
			secrets = append(secrets, p)
		}
		if n := u.User.Username(); n != "" {
			secrets = append(secrets, n+":***", n+"@")
		}
	}
	u.User, u.RawQuery, u.ForceQuery, u.Fragment = nil, "", false, ""
	return u.String(), secrets, nil
}

// Endpoint is the base URL requests go to, without credentials.
func (o *OpenAI) Endpoint() string { return o.endpoint }

// Model is the embedding model's name.
func (o *OpenAI) Model() string { return o.cfg.Model }

// Dimensions implements Embedder.
func (o *OpenAI) Dimensions() int { return o.cfg.Dimensions }

// Name implements Embedder.
func (o *OpenAI) Name() string { return fmt.Sprintf("openai:%s:%d", o.cfg.Model, o.cfg.Dimensions) }

// Embed implements Embedder: texts are sent in batches of BatchSize, up to
// Concurrency of them at once, each batch retried on transient errors. Errors
// wrap ErrUnavailable, ErrRejected or ErrDimension and name the endpoint, never
// the key.
func (o *OpenAI) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(o.cfg.Concurrency)
	for start := 0; start < len(texts); start += o.cfg.BatchSize {
		end := min(start+o.cfg.BatchSize, len(texts))
		g.Go(func() error {
			vecs, err := o.embedBatch(gctx, texts[start:end])
			copy(out[start:end], vecs)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}

func (o *OpenAI) embedBatch(ctx context.Context, batch []string) ([][]float32, error) {
	req := openai.EmbeddingRequestStrings{
		Input:      batch,
		Model:      openai.EmbeddingModel(o.cfg.Model),
		Dimensions: o.cfg.Dimensions,
	}
	delay := o.cfg.RetryBase
	for attempt := 0; ; attempt++ {
		res, err := o.client.CreateEmbeddings(ctx, req)
		if err == nil {
			return o.check(res, len(batch))
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrUnavailable, o.endpoint, ctx.Err())
		}
		if !transient(err) {
			return nil, &statusError{status: httpStatus(err), err: fmt.Errorf("%w: %s: %s", ErrRejected, o.endpoint, o.redact(err))}
		}
		if attempt >= o.cfg.Retries {
			return nil, fmt.Errorf("%w: %s after %d attempts: %s", ErrUnavailable, o.endpoint, attempt+1, o.redact(err))
		}
		o.logger.Warn("embedding request failed, retrying",
			zap.Int("attempt", attempt+1), zap.Duration("delay", delay), zap.String("error", o.redact(err)))
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("%w: %s: %w", ErrUnavailable, o.endpoint, ctx.Err())
		case <-t.C:
		}
		delay *= 2
	}
}

// check validates a response: one vector per input, each of the configured length.
func (o *OpenAI) check(res openai.EmbeddingResponse, n int) ([][]float32, error) {
	if len(res.Data) != n {
		return nil, fmt.Errorf("%w: %s returned %d embeddings for %d inputs", ErrRejected, o.endpoint, len(res.Data), n)
	}
	out := make([][]float32, n)
	for _, d := range res.Data {
		if d.Index < 0 || d.Index >= n || out[d.Index] != nil {
			return nil, fmt.Errorf("%w: %s returned embedding index %d for %d inputs", ErrRejected, o.endpoint, d.Index, n)
		}
		if len(d.Embedding) != o.cfg.Dimensions {
			return nil, fmt.Errorf("%w: %s returned %d dimensions for input %d, configured %d",
				ErrDimension, o.endpoint, len(d.Embedding), d.Index, o.cfg.Dimensions)
		}
		out[d.Index] = d.Embedding
	}
	return out, nil
}

// transient reports whether a failed request may succeed when repeated: the
// endpoint was unreachable, throttled us (429) or failed itself (5xx).
func transient(err error) bool {
	var apiErr *openai.APIError
	if errors.As(err, &apiErr) {
		return retryableStatus(apiErr.HTTPStatusCode)
	}
	var reqErr *openai.RequestError
	if errors.As(err, &reqErr) {
		return retryableStatus(reqErr.HTTPStatusCode)
	}
	// Anything else is a transport failure (refused, reset, timeout) or an
	// undecodable body from a proxy in between: worth another try.
	return true
}

// httpStatus is the HTTP status of a failed request, 0 without a response.
func httpStatus(err error) int {
	var apiErr *openai.APIError
	if errors.As(err, &apiErr) {
		return apiErr.HTTPStatusCode
	}
	var reqErr *openai.RequestError
	if errors.As(err, &reqErr) {
		return reqErr.HTTPStatusCode
	}
	return 0
}

// statusError keeps the HTTP status of a rejected request for HTTPStatus.
type statusError struct {
	status int
	err    error
}

func (e *statusError) Error() string { return e.err.Error() }
func (e *statusError) Unwrap() error { return e.err }

// HTTPStatus returns the HTTP status with which the endpoint rejected a request
// (err wraps ErrRejected), or 0: 401 and 403 tell a key it refuses, 404 a model
// it does not have.
func HTTPStatus(err error) int {
	var se *statusError
	if errors.As(err, &se) {
		return se.status
	}
	return 0
}

func retryableStatus(code int) bool {
	return code == http.StatusTooManyRequests || code >= 500
}

// redact renders err without the API key and the base URL's user info: some
// servers echo the key they rejected in their error message, the transport's
// errors quote the URL, and errors end up in logs.
func (o *OpenAI) redact(err error) string {
	msg := err.Error()
	for _, s := range o.secrets {
		msg = strings.ReplaceAll(msg, s, "[redacted]")
	}
	return msg
}
