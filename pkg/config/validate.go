package config

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/policy"
	"go.uber.org/zap/zapcore"
)

// problems collects FieldErrors so that Validate reports everything at once.
type problems []error

func (p *problems) add(key, format string, args ...any) {
	*p = append(*p, &FieldError{Key: key, Reason: fmt.Sprintf(format, args...)})
}

func (p *problems) oneOf(key, v string, allowed ...string) {
	if !slices.Contains(allowed, v) {
		p.add(key, "must be one of %s, got %q", strings.Join(allowed, ", "), v)
	}
}

func (p *problems) atLeast(key string, v, lowest int) {
	if v < lowest {
		p.add(key, "must be >= %d, got %d", lowest, v)
	}
}

func (p *problems) positive(key string, d time.Duration) {
	if d <= 0 {
		p.add(key, "must be a positive duration, got %s", d)
	}
}

// hostPort accepts "" (the caller decides what empty means) or "host:port".
func (p *problems) hostPort(key, v string) {
	if v == "" {
		return
	}
	if _, _, err := net.SplitHostPort(v); err != nil {
		p.add(key, "must be host:port, got %q", v)
	}
}

func (p *problems) url(key, v string, schemes ...string) {
	u, err := url.Parse(v)
	if err != nil || u.Host == "" || !slices.Contains(schemes, u.Scheme) {
		p.add(key, "must be a URL with scheme %s and a host, got %q", strings.Join(schemes, " or "), redactedURL(v, u, err))
	}
}

// redactedURL is v as an error may show it: without user info (credentials),
// and not at all when it does not parse (it may hold them anywhere).
func redactedURL(v string, u *url.URL, err error) string {
	switch {
	case err != nil && strings.Contains(v, "@"):
		return "[unparseable URL with credentials]"
	case err != nil || u.User == nil:
		return v
	}
	c := *u
	c.User = url.User("[redacted]")
	return c.String()
}

func (p *problems) notBoth(keyA string, a bool, keyB string, b bool) {
	if a && b {
		p.add(keyA, "cannot be set together with %s", keyB)
	}
}

func (p *problems) tls(prefix string, t TLS) {
	if (t.CertFile == "") != (t.KeyFile == "") {
		p.add(prefix+".cert_file", "and %s.key_file must be set together", prefix)
	}
}

// quotas checks the default quotas and each tenant's overrides.
func (p *problems) quotas(q Quotas) {
	limits := func(prefix string, rate *float64, counts map[string]*int) {
		if r := rate; r != nil && (math.IsNaN(*r) || math.IsInf(*r, 0) || *r < 0) {
			p.add(prefix+"events_per_second", "must be a number >= 0 (0 is no limit), got %v", *r)
		}
		for key, v := range counts {
			if v != nil && *v < 0 {
				p.add(prefix+key, "must be >= 0 (0 is no limit), got %d", *v)
			}
		}
	}
	limits("quotas.", &q.EventsPerSecond, map[string]*int{"events_burst": &q.EventsBurst, "memories": &q.Memories, "markdown_bytes": &q.MarkdownBytes})
	for t, o := range q.Tenants {
		prefix := "quotas.tenants." + t + "."
		if err := events.ValidateID("tenant", t); err != nil {
			p.add("quotas.tenants", "names %q, which is not a tenant id: %v", t, err)
			continue
		}
		limits(prefix, o.EventsPerSecond, map[string]*int{"events_burst": o.EventsBurst, "memories": o.Memories, "markdown_bytes": o.MarkdownBytes})
	}
}

// Validate reports every problem, each as a *FieldError naming its key, joined with
// errors.Join.
func (c Config) Validate() error {
	var p problems
	for key, v := range c.flatten() {
		if s, ok := v.(string); ok && isPath(key) && (s == "~" || strings.HasPrefix(s, "~/")) {
			p.add(key, "cannot expand ~ in %q: no home directory", s)
		}
	}
	if c.DataDir == "" {
		p.add("data_dir", "must not be empty")
	}

	m := c.Memory
	if m.Dir == "" {
		p.add("memory.dir", "must not be empty")
	}
	p.atLeast("memory.auto_load_lines", m.AutoLoadLines, 1)
	p.oneOf("memory.backend", m.Backend, MemoryBackendFilesystem, MemoryBackendJetStream)
	p.atLeast("memory.max_lines", m.MaxLines, 1)
	p.atLeast("memory.target_lines", m.TargetLines, 1)
	p.atLeast("memory.backups_keep", m.BackupsKeep, 1)
	p.atLeast("memory.context_window_tokens", m.ContextWindowTokens, 1)
	p.atLeast("memory.context_budget_tokens", m.ContextBudgetTokens, 0)
	if m.ContextBudgetPercent < 0 || m.ContextBudgetPercent > 100 {
		p.add("memory.context_budget_percent", "must be between 0 and 100, got %d", m.ContextBudgetPercent)
	}
	if m.ContextBudgetTokens == 0 && m.ContextBudgetPercent == 0 {
		p.add("memory.context_budget_tokens", "must be set when memory.context_budget_percent is 0")
	}
	if m.ContextBudgetTokens == 0 && m.ContextBudgetPercent > 0 && m.ContextWindowTokens*m.ContextBudgetPercent/100 < 1 {
		p.add("memory.context_budget_percent", "gives a budget under one token of memory.context_window_tokens (%d)", m.ContextWindowTokens)
	}
	if m.CompressMaxTokenLoss < 0 || m.CompressMaxTokenLoss > 100 {
		p.add("memory.compress_max_token_loss", "must be between 0 and 100, got %d", m.CompressMaxTokenLoss)
	}
	if m.TargetLines > m.MaxLines {
		p.add("memory.target_lines", "must be <= memory.max_lines (%d), got %d", m.MaxLines, m.TargetLines)
	}
	for _, e := range flattenJoined(m.Policy.Validate()) {
		var fe *policy.FieldError
		if errors.As(e, &fe) {
			p.add("memory."+fe.Field, "%s", fe.Reason)
		} else if e != nil {
			p = append(p, fmt.Errorf("%w: memory: %w", ErrInvalid, e))
		}
	}

	n := c.NATS
	for _, u := range strings.Split(n.URL, ",") {
		p.url("nats.url", strings.TrimSpace(u), "nats", "tls", "ws", "wss")
	}
	methods := 0
	for _, set := range []bool{n.CredsFile != "", n.NKeyFile != "", n.User != "", n.TokenFile != ""} {
		if set {
			methods++
		}
	}
	if methods > 1 {
		p.add("nats", "only one of creds_file, nkey_file, user (with password) and token_file may be set")
	}
	p.notBoth("nats.password", n.Password != "", "nats.password_file", n.PasswordFile != "")
	if (n.Password != "" || n.PasswordFile != "") && n.User == "" {
		p.add("nats.user", "must be set with nats.password or nats.password_file")
	}
	p.tls("nats.tls", n.TLS)
	p.hostPort("nats.embedded.listen", n.Embedded.Listen)
	if n.Stream.MaxAge < 0 {
		p.add("nats.stream.max_age", "must be >= 0 (0 is unlimited), got %s", n.Stream.MaxAge)
	}
	if n.Stream.DLQMaxAge < 0 {
		p.add("nats.stream.dlq_max_age", "must be >= 0 (0 is unlimited), got %s", n.Stream.DLQMaxAge)
	}
	for key, age := range map[string]time.Duration{"nats.stream.max_age": n.Stream.MaxAge, "nats.stream.dlq_max_age": n.Stream.DLQMaxAge} {
		if age > 0 && age < n.Stream.DuplicateWindow {
			// JetStream refuses such a stream; say so before it does.
			p.add(key, "is %s, shorter than nats.stream.duplicate_window (%s)", age, n.Stream.DuplicateWindow)
		}
	}
	p.positive("nats.stream.duplicate_window", n.Stream.DuplicateWindow)
	if r := n.Stream.Replicas; r < 1 || r > 5 {
		p.add("nats.stream.replicas", "must be between 1 and 5, got %d", r) // JetStream's own limit
	}
	p.positive("nats.consumer.ack_wait", n.Consumer.AckWait)
	p.atLeast("nats.consumer.max_deliver", n.Consumer.MaxDeliver, 1)
	for i, d := range n.Consumer.Backoff {
		if d <= 0 {
			p.add("nats.consumer.backoff", "entry %d must be a positive duration, got %s", i, d)
		}
	}
	if len(n.Consumer.Backoff) > n.Consumer.MaxDeliver {
		// JetStream rejects such a consumer; say so before it does.
		p.add("nats.consumer.backoff", "has %d entries, more than nats.consumer.max_deliver (%d)", len(n.Consumer.Backoff), n.Consumer.MaxDeliver)
	}
	if len(n.Consumer.Backoff) > 0 && n.Consumer.Backoff[0] != n.Consumer.AckWait {
		// The server makes BackOff[0] the first ack deadline whatever ack_wait says.
		p.add("nats.consumer.backoff", "first entry %s must equal nats.consumer.ack_wait (%s): it is the first delivery's ack deadline", n.Consumer.Backoff[0], n.Consumer.AckWait)
	}

	l := c.LLM
	if l.BaseURL != "" {
		p.url("llm.base_url", l.BaseURL, "http", "https")
		if l.Model == "" {
			p.add("llm.model", "must be set when llm.base_url is set")
		}
	}
	p.notBoth("llm.api_key", l.APIKey != "", "llm.api_key_file", l.APIKeyFile != "")
	p.positive("llm.timeout", l.Timeout)
	p.atLeast("llm.max_retries", l.MaxRetries, 0)
	p.atLeast("llm.concurrency", l.Concurrency, 1)
	p.atLeast("llm.decide_batch_size", l.DecideBatchSize, 1)
	if l.DecideBatchSize > MaxDecideBatchSize {
		p.add("llm.decide_batch_size", "is %d, want at most %d (one request holds every message, each up to limits.max_text_bytes)", l.DecideBatchSize, MaxDecideBatchSize)
	}
	if l.MaxRetries > MaxLLMRetries {
		p.add("llm.max_retries", "is %d, want at most %d (the backoff doubles: the last wait would be %s)", l.MaxRetries, MaxLLMRetries, time.Second<<(l.MaxRetries-1))
	}

	e := c.Embed
	p.oneOf("embed.provider", e.Provider, EmbedProviderLocal, EmbedProviderUSELite, EmbedProviderOpenAI)
	if e.Provider == EmbedProviderUSELite && e.Dimensions != USELiteDimensions {
		p.add("embed.dimensions", "is %d, want %d, the length of %s vectors", e.Dimensions, USELiteDimensions, EmbedProviderUSELite)
	}
	if e.BaseURL != "" {
		p.url("embed.base_url", e.BaseURL, "http", "https")
	}
	if e.Provider == EmbedProviderOpenAI && e.Model == "" {
		p.add("embed.model", "must be set when embed.provider is %s", EmbedProviderOpenAI)
	}
	if e.Provider == EmbedProviderOpenAI && e.BaseURL == "" {
		p.add("embed.base_url", "must be set when embed.provider is %s", EmbedProviderOpenAI)
	}
	p.notBoth("embed.api_key", e.APIKey != "", "embed.api_key_file", e.APIKeyFile != "")
	p.atLeast("embed.dimensions", e.Dimensions, 1)
	p.atLeast("embed.batch_size", e.BatchSize, 1)
	p.atLeast("embed.query_cache_size", e.QueryCacheSize, 0)

	v := c.Vector
	p.oneOf("vector.backend", v.Backend, VectorBackendEmbedded, VectorBackendQdrant)
	p.oneOf("vector.fusion", v.Fusion, FusionKeyword, FusionRRF)
	if v.Backend == VectorBackendEmbedded && v.Path == "" {
		p.add("vector.path", "must not be empty with the embedded backend")
	}
	if v.Backend == VectorBackendQdrant && v.Qdrant.Addr == "" {
		p.add("vector.qdrant.addr", "must be set with the qdrant backend")
	}
	p.hostPort("vector.qdrant.addr", v.Qdrant.Addr)
	if v.Qdrant.HTTPURL != "" {
		p.url("vector.qdrant.http_url", v.Qdrant.HTTPURL, "http", "https")
	}
	p.notBoth("vector.qdrant.api_key", v.Qdrant.APIKey != "", "vector.qdrant.api_key_file", v.Qdrant.APIKeyFile != "")
	p.tls("vector.qdrant.tls", v.Qdrant.TLS)
	if v.Collection == "" {
		p.add("vector.collection", "must not be empty")
	}
	p.atLeast("vector.k_episodic", v.KEpisodic, 1)
	p.atLeast("vector.k_semantic", v.KSemantic, 1)
	if v.MergeThreshold <= 0 || v.MergeThreshold > 1 {
		p.add("vector.merge_threshold", "must be in (0, 1], got %v", v.MergeThreshold)
	}
	if v.SeparateThreshold < 0 || v.SeparateThreshold >= v.MergeThreshold {
		p.add("vector.separate_threshold", "must be in [0, vector.merge_threshold (%v)), got %v", v.MergeThreshold, v.SeparateThreshold)
	}
	p.positive("vector.same_chat_window", v.SameChatWindow)
	p.positive("vector.cross_chat_window", v.CrossChatWindow)
	p.positive("vector.consolidate_interval", v.ConsolidateInterval)

	if ms := c.Search.MinScore; math.IsNaN(ms) || math.IsInf(ms, 0) || ms < 0 {
		p.add("search.min_score", "must be a number >= 0, got %v", ms)
	}

	in := c.Ingest
	p.atLeast("ingest.batch_size", in.BatchSize, 1)
	p.atLeast("ingest.concurrency", in.Concurrency, max(in.BatchSize, 1))
	p.positive("ingest.batch_linger", in.BatchLinger)
	p.atLeast("ingest.context_messages", in.ContextMessages, -1)

	if n := c.Limits.MaxTextBytes; n < 1 || n > MaxTextBytesCeiling {
		p.add("limits.max_text_bytes", "must be between 1 and %d (NATS's default max_payload is 1 MiB), got %d", MaxTextBytesCeiling, n)
	}
	p.positive("limits.max_clock_skew", c.Limits.MaxClockSkew)

	p.quotas(c.Quotas)

	p.hostPort("http.listen", c.HTTP.Listen)
	for _, h := range c.HTTP.UIHosts {
		// An exact host name: a port, a scheme or a wildcard here would never match
		// a request's Host, and the operator would be refused without knowing why.
		if h == "" || net.ParseIP(h) == nil && strings.ContainsAny(h, ":/*@[] \t") {
			p.add("http.ui_hosts", "must be host names or IP addresses without port, scheme or wildcard, got %q", h)
		}
	}
	if lvl, err := zapcore.ParseLevel(c.Log.Level); err != nil || lvl > zapcore.ErrorLevel {
		p.add("log.level", "must be one of debug, info, warn, error, got %q", c.Log.Level)
	}
	p.oneOf("log.format", c.Log.Format, "json", "console")
	p.atLeast("runtime.gc_min_heap_mb", c.Runtime.GCMinHeapMB, 0)

	slices.SortFunc(p, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return errors.Join(p...)
}
