package mcpserver

import (
	"bufio"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/client"
)

// Identity is who an HTTP request speaks for.
type Identity struct{ Tenant, User string }

// Tokens maps bearer tokens to identities. Only SHA-256 digests of the tokens are
// kept, so neither a dump nor a log of it reveals one.
type Tokens struct {
	byDigest map[[sha256.Size]byte]Identity
}

// ParseTokens reads one token per line: `<token> <tenant> <user>`, separated by
// spaces or tabs; blank lines and lines starting with # are skipped. An error names
// the line (never the token).
func ParseTokens(r io.Reader) (*Tokens, error) {
	t := &Tokens{byDigest: map[[sha256.Size]byte]Identity{}}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 3 {
			return nil, fmt.Errorf("%w: tokens line %d: want `<token> <tenant> <user>`, got %d fields", ErrInvalidConfig, n, len(f))
		}
		if len(f[0]) < 16 {
			return nil, fmt.Errorf("%w: tokens line %d: the token is shorter than 16 characters", ErrInvalidConfig, n)
		}
		if err := events.ValidateID("tenant", f[1]); err != nil {
			return nil, fmt.Errorf("%w: tokens line %d: %w", ErrInvalidConfig, n, err)
		}
		if err := events.ValidateID("user", f[2]); err != nil {
			return nil, fmt.Errorf("%w: tokens line %d: %w", ErrInvalidConfig, n, err)
		}
		d := sha256.Sum256([]byte(f[0]))
		if _, dup := t.byDigest[d]; dup {
			return nil, fmt.Errorf("%w: tokens line %d: the token is already used by an earlier line", ErrInvalidConfig, n)
		}
		t.byDigest[d] = Identity{Tenant: f[1], User: f[2]}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: read tokens: %w", ErrInvalidConfig, err)
	}
	if len(t.byDigest) == 0 {
		return nil, fmt.Errorf("%w: no tokens", ErrInvalidConfig)
	}
	return t, nil
}

// Lookup returns the identity of an Authorization header value ("Bearer <token>").
func (t *Tokens) Lookup(authorization string) (Identity, bool) {
	token, ok := strings.CutPrefix(authorization, "Bearer ")
	if !ok || token == "" {
		return Identity{}, false
	}
	id, ok := t.byDigest[sha256.Sum256([]byte(strings.TrimSpace(token)))]
	return id, ok
}

type identityKey struct{}

// HTTPConfig configures Handler.
type HTTPConfig struct {
	// Tokens authenticates every request; required.
	Tokens *Tokens
	// NewClient returns the agentmem client of a tenant; required. It is called once
	// per tenant.
	NewClient func(tenant string) (*client.Client, error)
	// Agent is Config.Agent of every server.
	Agent bool
}

// Handler serves MCP over streamable HTTP (stateless: every request carries its
// bearer token, and its identity picks the server). A request without a known
// token is answered 401 before any MCP processing.
func Handler(cfg HTTPConfig, logger *zap.Logger) (http.Handler, error) {
	if cfg.Tokens == nil || cfg.NewClient == nil {
		return nil, fmt.Errorf("%w: HTTPConfig needs Tokens and NewClient", ErrInvalidConfig)
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	var (
		mu      sync.Mutex
		servers = map[Identity]*mcp.Server{}
		clients = map[string]*client.Client{}
	)
	serverFor := func(id Identity) (*mcp.Server, error) {
		mu.Lock()
		defer mu.Unlock()
		if s, ok := servers[id]; ok {
			return s, nil
		}
		cl, ok := clients[id.Tenant]
		if !ok {
			var err error
			if cl, err = cfg.NewClient(id.Tenant); err != nil {
				return nil, fmt.Errorf("client for tenant %s: %w", id.Tenant, err)
			}
			clients[id.Tenant] = cl
		}
		s, err := New(Config{User: id.User, Agent: cfg.Agent}, cl, logger)
		if err != nil {
			return nil, err
		}
		servers[id] = s
		return s, nil
	}
	mcpHandler := mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		id, _ := r.Context().Value(identityKey{}).(Identity)
		s, err := serverFor(id)
		if err != nil {
			logger.Error("mcp server", zap.String("tenant", id.Tenant), zap.String("user", id.User), zap.Error(err))
			return nil
		}
		return s
	}, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	protect := http.NewCrossOriginProtection()
	return protect.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok := cfg.Tokens.Lookup(r.Header.Get("Authorization"))
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="agentmem"`)
			http.Error(w, "unauthorized: send Authorization: Bearer <token> with a token of the tokens file", http.StatusUnauthorized)
			return
		}
		mcpHandler.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), identityKey{}, id)))
	})), nil
}
