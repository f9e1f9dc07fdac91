package bus

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"

	"github.com/agentmem/agentmem/pkg/natsauth"
)

// ErrServerNotReady is returned when an embedded server does not accept connections in time.
var ErrServerNotReady = errors.New("bus: embedded nats-server not ready")

// EmbeddedConfig configures an in-process nats-server with JetStream.
type EmbeddedConfig struct {
	// StoreDir is where JetStream keeps its data. Required: the default (a temp dir
	// chosen by nats-server) would lose data across restarts and collide between tests.
	StoreDir string
	// Listen is "host:port" for a TCP listener other processes can use; empty means
	// in-process connections only. Port 0 or -1 picks a free port.
	Listen string
	// ServerName defaults to "agentmem".
	ServerName string
	// ReadyTimeout bounds the wait for the server to accept connections; default 10s.
	ReadyTimeout time.Duration
	// MonitorListen is "host:port" for the HTTP monitoring endpoints (/varz, /jsz,
	// /healthz; KEDA's JetStream scaler reads /jsz); empty means none. Port 0 picks a
	// free port; read it back with srv.MonitorAddr().
	MonitorListen string
	// Auth, when set, runs the server in operator mode trusting it (pkg/natsauth):
	// a connection without a user JWT its account signed is refused, and each user
	// has the permissions of its JWT. Nil: no authentication.
	Auth *natsauth.Trust
	// Configure, when set, is applied to the server options last: for settings this
	// config does not name (users, nkeys, TLS, limits).
	Configure func(*server.Options)
}

// Validate reports configuration errors.
func (c EmbeddedConfig) Validate() error {
	if c.StoreDir == "" {
		return fmt.Errorf("%w: embedded server: StoreDir is required", ErrInvalidConfig)
	}
	if c.Listen != "" {
		if _, _, err := net.SplitHostPort(c.Listen); err != nil {
			return fmt.Errorf("%w: embedded server: listen address %q: %w", ErrInvalidConfig, c.Listen, err)
		}
	}
	if c.MonitorListen != "" {
		if _, _, err := net.SplitHostPort(c.MonitorListen); err != nil {
			return fmt.Errorf("%w: embedded server: monitor address %q: %w", ErrInvalidConfig, c.MonitorListen, err)
		}
	}
	return nil
}

// StartEmbedded starts a JetStream-enabled nats-server in this process and waits until it
// accepts connections. Connect to it in-process with nats.InProcessServer(srv), or over TCP
// at srv.ClientURL() when Listen was set. Call srv.Shutdown() and srv.WaitForShutdown().
func StartEmbedded(cfg EmbeddedConfig) (*server.Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	opts := &server.Options{
		ServerName: cfg.ServerName,
		JetStream:  true,
		StoreDir:   cfg.StoreDir,
		NoSigs:     true,
		NoLog:      true,
		DontListen: cfg.Listen == "",
	}
	if opts.ServerName == "" {
		opts.ServerName = "agentmem"
	}
	if cfg.Listen != "" {
		host, port, err := splitListen(cfg.Listen)
		if err != nil {
			return nil, err
		}
		opts.Host, opts.Port = host, port
	}
	if cfg.MonitorListen != "" {
		host, port, err := splitListen(cfg.MonitorListen)
		if err != nil {
			return nil, err
		}
		opts.HTTPHost, opts.HTTPPort = host, port
	}
	if cfg.Auth != nil {
		if err := trustOperator(opts, *cfg.Auth); err != nil {
			return nil, err
		}
	}
	if cfg.Configure != nil {
		cfg.Configure(opts)
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("bus: embedded server: %w", err)
	}
	go srv.Start()
	timeout := cfg.ReadyTimeout
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	if !srv.ReadyForConnections(timeout) {
		srv.Shutdown()
		return nil, fmt.Errorf("%w after %s", ErrServerNotReady, timeout)
	}
	return srv, nil
}

// trustOperator configures opts for operator mode: the operator, the system account
// and a memory resolver holding every account JWT.
func trustOperator(opts *server.Options, t natsauth.Trust) error {
	op, err := t.Operator()
	if err != nil {
		return fmt.Errorf("%w: embedded server: %w", ErrInvalidConfig, err)
	}
	res := &server.MemAccResolver{}
	for pub, token := range t.AccountJWTs {
		if err := res.Store(pub, token); err != nil {
			return fmt.Errorf("%w: embedded server: account %s: %w", ErrInvalidConfig, pub, err)
		}
	}
	opts.TrustedOperators = []*jwt.OperatorClaims{op}
	opts.AccountResolver = res
	opts.SystemAccount = t.SystemAccount
	return nil
}

// splitListen parses "host:port"; port 0 becomes server.RANDOM_PORT because 0 means
// "disabled" (monitoring) or "default 4222" (clients) to nats-server.
func splitListen(addr string) (string, int, error) {
	host, port, _ := net.SplitHostPort(addr)
	p, err := strconv.Atoi(port)
	if err != nil {
		return "", 0, fmt.Errorf("%w: embedded server: port %q of %q: %w", ErrInvalidConfig, port, addr, err)
	}
	if p == 0 {
		p = server.RANDOM_PORT
	}
	return host, p, nil
}
