// Package inspector is agentmem's web inspector: server-rendered HTML pages over the
// memory of every tenant and user (Markdown files, episodic and semantic memories
// with their history and provenance, session timelines, the dead-letter stream, the
// policy and its snapshots, a live tail of events, and what a context request would
// return).
//
// It holds no memory logic: what the retriever answers is asked over NATS with
// pkg/client (get, history, search, context, session archive), exactly as the CLI
// does; what no endpoint lists is read with the stores' own read APIs (tenants and
// users from the event stream's subjects, the DocStore and the vector store, so
// that memory written by append, MCP or import is listed too; sessions from the
// subjects; the DocStore for files and policy snapshots, the vector store's Scroll
// for the memory list, pkg/bus for dead letters). Memory content is only ever rendered through html/template escaping.
package inspector

import (
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/agentmem/agentmem/pkg/client"
	"github.com/agentmem/agentmem/pkg/docstore"
	"github.com/agentmem/agentmem/pkg/eventstore"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// Prefix is the path the inspector is served under.
const Prefix = "/ui/"

// ErrInvalidConfig reports a Config or Deps that cannot work.
var ErrInvalidConfig = errors.New("inspector: invalid config")

//go:embed assets templates
var files embed.FS

// Config configures the inspector.
type Config struct {
	// Password, when set, is required as the HTTP basic-auth password (any user
	// name). When empty, only clients on a loopback address are served.
	Password string
	// EventStream and DLQStream name the JetStream streams; required.
	EventStream, DLQStream string
	// ListLimit bounds every list on a page (memories, events, dead letters);
	// default 500.
	ListLimit int
	// Hosts are the host names, besides loopback ones, a request's Host header
	// may name (exact, case-insensitive, port ignored): http.ui_hosts.
	Hosts []string
}

func (c Config) withDefaults() Config {
	if c.ListLimit == 0 {
		c.ListLimit = 500
	}
	return c
}

// Validate reports what is wrong with c.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	if c.EventStream == "" || c.DLQStream == "" {
		errs = append(errs, fmt.Errorf("%w: EventStream and DLQStream are required", ErrInvalidConfig))
	}
	if c.ListLimit < 0 {
		errs = append(errs, fmt.Errorf("%w: ListLimit %d is negative", ErrInvalidConfig, c.ListLimit))
	}
	return errors.Join(errs...)
}

// Deps are the connection and the stores the inspector reads.
type Deps struct {
	Conn    *nats.Conn
	JS      jetstream.JetStream
	Docs    *docstore.Store
	Events  *eventstore.Store
	Vectors vectorstore.Store
}

// Inspector is the http.Handler of every page under Prefix.
type Inspector struct {
	cfg    Config
	deps   Deps
	logger *zap.Logger
	pages  map[string]*template.Template
	mux    *http.ServeMux

	// csrf is the token every state-changing form carries: random per process,
	// so only a page the inspector rendered (same origin, right Host) knows it.
	csrf string

	mu      sync.Mutex
	clients map[string]*client.Client
}

// New builds the inspector.
func New(cfg Config, deps Deps, logger *zap.Logger) (*Inspector, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Conn == nil || deps.JS == nil || deps.Docs == nil || deps.Events == nil || deps.Vectors == nil {
		return nil, fmt.Errorf("%w: Deps needs Conn, JS, Docs, Events and Vectors", ErrInvalidConfig)
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	token := make([]byte, 32)
	if _, err := rand.Read(token); err != nil {
		return nil, fmt.Errorf("inspector: csrf token: %w", err)
	}
	csrf := hex.EncodeToString(token)
	pages, err := parsePages(csrf)
	if err != nil {
		return nil, err
	}
	in := &Inspector{cfg: cfg, deps: deps, logger: logger.Named("inspector"), pages: pages, csrf: csrf, clients: map[string]*client.Client{}}
	in.routes()
	return in, nil
}

// client returns the RPC client of a tenant.
func (in *Inspector) client(tenant string) (*client.Client, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if c, ok := in.clients[tenant]; ok {
		return c, nil
	}
	c, err := client.New(in.deps.Conn, client.Config{Tenant: tenant, AgentID: "agentmem-inspector"})
	if err != nil {
		return nil, err
	}
	in.clients[tenant] = c
	return c, nil
}

// ServeHTTP checks the Host, authenticates the request, then serves the page.
// State-changing requests (POST) must also come from the inspector's own origin
// and carry its CSRF token.
func (in *Inspector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !in.knownHost(r.Host) {
		// A DNS-rebinding page reaches a loopback server under its own name: the
		// browser then treats it as same-origin, so only the Host tells it apart.
		http.Error(w, fmt.Sprintf("forbidden: host %q is not a loopback name nor in http.ui_hosts", r.Host), http.StatusForbidden)
		return
	}
	if !in.authorized(r) {
		if in.cfg.Password == "" {
			http.Error(w, "forbidden: the inspector has no password (http.ui_password_file), so it only serves loopback clients", http.StatusForbidden)
			return
		}
		w.Header().Set("WWW-Authenticate", `Basic realm="agentmem inspector", charset="UTF-8"`)
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("X-Frame-Options", "DENY")
	in.mux.ServeHTTP(w, r)
}

// knownHost reports whether the Host header names a loopback host (localhost,
// *.localhost, a loopback IP) or one of cfg.Hosts.
func (in *Inspector) knownHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"), "."))
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return true
	}
	return slices.ContainsFunc(in.cfg.Hosts, func(h string) bool { return strings.EqualFold(h, host) })
}

// checkCSRF refuses a POST whose form does not carry the inspector's token.
func (in *Inspector) checkCSRF(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && subtle.ConstantTimeCompare([]byte(r.PostFormValue(csrfField)), []byte(in.csrf)) != 1 {
			http.Error(w, "forbidden: missing or wrong CSRF token (reload the page and submit again)", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// csrfField is the form field that carries the CSRF token.
const csrfField = "csrf"

func (in *Inspector) authorized(r *http.Request) bool {
	if in.cfg.Password != "" {
		_, pw, ok := r.BasicAuth()
		return ok && subtle.ConstantTimeCompare([]byte(pw), []byte(in.cfg.Password)) == 1
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// parsePages parses every page; a form writes its CSRF token with {{csrf}}.
func parsePages(csrf string) (map[string]*template.Template, error) {
	names, err := fs.Glob(files, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("inspector: templates: %w", err)
	}
	pages := map[string]*template.Template{}
	for _, name := range names {
		if name == "templates/layout.html" {
			continue
		}
		t, err := template.New("layout.html").Funcs(funcs).Funcs(template.FuncMap{"csrf": func() string { return csrf }}).ParseFS(files, "templates/layout.html", name)
		if err != nil {
			return nil, fmt.Errorf("inspector: parse %s: %w", name, err)
		}
		pages[name[len("templates/"):len(name)-len(".html")]] = t
	}
	return pages, nil
}
