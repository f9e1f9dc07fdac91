package obs

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
)

// ErrServerStarted is returned by a second Start.
var ErrServerStarted = errors.New("obs: server already started")

// ServerConfig configures the operations HTTP server.
type ServerConfig struct {
	// Listen is "host:port" (port 0 picks a free port); "" disables the server.
	Listen string
	// CheckTimeout bounds each readiness check; default 5s.
	CheckTimeout time.Duration
}

// Validate reports a malformed listen address or a negative timeout.
func (c ServerConfig) Validate() error {
	if c.Listen != "" {
		if _, _, err := net.SplitHostPort(c.Listen); err != nil {
			return fmt.Errorf("%w: listen address %q: %v", ErrInvalidConfig, c.Listen, err)
		}
	}
	if c.CheckTimeout < 0 {
		return fmt.Errorf("%w: check timeout %s is negative", ErrInvalidConfig, c.CheckTimeout)
	}
	return nil
}

// Server serves /metrics (the given registry), /healthz (200 while the process serves
// HTTP at all) and /readyz (200 only when every readiness check passes, else 503 naming
// the failing checks).
type Server struct {
	cfg    ServerConfig
	logger *zap.Logger
	http   *http.Server
	mux    *http.ServeMux

	mu     sync.Mutex
	checks map[string]func(context.Context) error
	ln     net.Listener
	served chan struct{} // closed when the serve goroutine returns
}

// NewServer builds the server; it does not listen until Start.
func NewServer(cfg ServerConfig, reg *prometheus.Registry, logger *zap.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if reg == nil {
		return nil, fmt.Errorf("%w: nil prometheus registry", ErrInvalidConfig)
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	if cfg.CheckTimeout == 0 {
		cfg.CheckTimeout = 5 * time.Second
	}
	s := &Server{cfg: cfg, logger: logger, checks: map[string]func(context.Context) error{}}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg, ErrorLog: zap.NewStdLog(logger)}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeText(w, http.StatusOK, "ok\n")
	})
	mux.HandleFunc("GET /readyz", s.serveReady)
	s.http = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	s.mux = mux
	return s, nil
}

// Handle serves handler for pattern (http.ServeMux syntax) beside the probes and
// metrics, e.g. the web inspector under /ui/. Call it before Start.
func (s *Server) Handle(pattern string, handler http.Handler) {
	s.mux.Handle(pattern, handler)
}

// AddReadyCheck registers a readiness check; a check of the same name is replaced.
// check must honour its context's deadline.
func (s *Server) AddReadyCheck(name string, check func(context.Context) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checks[name] = check
}

func (s *Server) serveReady(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	names := make([]string, 0, len(s.checks))
	for name := range s.checks {
		names = append(names, name)
	}
	checks := make([]func(context.Context) error, len(names))
	sort.Strings(names)
	for i, name := range names {
		checks[i] = s.checks[name]
	}
	s.mu.Unlock()

	// Checks run concurrently so that one slow dependency does not hide the others
	// behind the probe's own timeout.
	errs := make([]error, len(checks))
	var wg sync.WaitGroup
	for i, check := range checks {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(r.Context(), s.cfg.CheckTimeout)
			defer cancel()
			errs[i] = check(ctx)
		})
	}
	wg.Wait()

	var failed strings.Builder
	for i, err := range errs {
		if err != nil {
			fmt.Fprintf(&failed, "%s: %v\n", names[i], err)
		}
	}
	if failed.Len() > 0 {
		s.logger.Warn("not ready", zap.String("failed", strings.TrimSpace(failed.String())))
		writeText(w, http.StatusServiceUnavailable, "not ready\n"+failed.String())
		return
	}
	writeText(w, http.StatusOK, "ready\n")
}

func writeText(w http.ResponseWriter, code int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(body))
}

// Start listens on the configured address and serves in the background; Addr is known
// when it returns. With Listen "" it does nothing.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln != nil {
		return ErrServerStarted
	}
	if s.cfg.Listen == "" {
		return nil
	}
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("obs: listen on %s: %w", s.cfg.Listen, err)
	}
	s.ln = ln
	s.served = make(chan struct{})
	go func() {
		defer close(s.served)
		if err := s.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.logger.Error("operations HTTP server stopped", zap.String("addr", ln.Addr().String()), zap.Error(err))
		}
	}()
	s.logger.Info("operations HTTP server listening", zap.String("addr", ln.Addr().String()))
	return nil
}

// Addr is the address actually listened on, or "" before Start or when disabled.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// Shutdown stops accepting requests, waits for in-flight ones until ctx ends, and
// waits for the serve goroutine. It is a no-op if the server never started.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	served := s.served
	s.mu.Unlock()
	if served == nil {
		return nil
	}
	if err := s.http.Shutdown(ctx); err != nil {
		return fmt.Errorf("obs: shutdown: %w", err)
	}
	select {
	case <-served:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("obs: shutdown: %w", ctx.Err())
	}
}

// NewRegistry returns a registry with the Go runtime and process collectors, the usual
// base for a binary's /metrics.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}
