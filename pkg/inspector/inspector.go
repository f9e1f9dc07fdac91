// Package inspector is agentmem's web inspector: server-rendered HTML pages over the
// memory of every tenant and user (Markdown files, episodic and semantic memories
// with their history and provenance, session timelines, the dead-letter stream, the
// policy and its snapshots, a live tail of events, and what a context request would
// return).
//
// It holds no memory logic: what the retriever answers is asked over NATS with
// pkg/client (get, history, search, context, session archive), exactly as the CLI
// does; what no endpoint lists is read with the stores' own read APIs (the event
// stream's subjects for tenants, users and sessions, the DocStore for files and
// policy snapshots, the vector store's Scroll for the memory list, pkg/bus for dead
// letters). Memory content is only ever rendered through html/template escaping.
package inspector

import (
	"crypto/subtle"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net"
	"net/http"
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
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	in := &Inspector{cfg: cfg, deps: deps, logger: logger.Named("inspector"), pages: pages, clients: map[string]*client.Client{}}
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

// ServeHTTP authenticates the request, then serves the page. State-changing
// requests (POST) must also come from the inspector's own origin.
func (in *Inspector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
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

func parsePages() (map[string]*template.Template, error) {
	names, err := fs.Glob(files, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("inspector: templates: %w", err)
	}
	pages := map[string]*template.Template{}
	for _, name := range names {
		if name == "templates/layout.html" {
			continue
		}
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(files, "templates/layout.html", name)
		if err != nil {
			return nil, fmt.Errorf("inspector: parse %s: %w", name, err)
		}
		pages[name[len("templates/"):len(name)-len(".html")]] = t
	}
	return pages, nil
}
