package bus

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"go.uber.org/zap"

	"github.com/agentmem/agentmem/pkg/natsauth"
)

// Reconnect backoff: doubling from reconnectBase up to reconnectMax, with jitter so
// that a fleet of workers does not reconnect in lockstep after a server restart.
const (
	reconnectBase = 250 * time.Millisecond
	reconnectMax  = 10 * time.Second
)

// TLSConfig names the PEM files of a TLS client connection.
type TLSConfig struct {
	// CAFile verifies the server; empty uses the system roots.
	CAFile string
	// CertFile and KeyFile are the client certificate for mutual TLS; both or neither.
	CertFile, KeyFile string
	// ServerName overrides the name verified in the server certificate.
	ServerName string
}

func (c TLSConfig) enabled() bool {
	return c.CAFile != "" || c.CertFile != "" || c.KeyFile != "" || c.ServerName != ""
}

// ConnConfig configures a client connection. Set at most one authentication method:
// CredsFile (JWT + nkey seed), NKeyFile (nkey seed), User/Password, or Token.
type ConnConfig struct {
	// URL is one server URL or a comma-separated list; required unless InProcess is set.
	URL string
	// CredsFile is a .creds file (user JWT and nkey seed).
	CredsFile string
	// NKeyFile is a file holding a user nkey seed.
	NKeyFile string
	// User and Password authenticate with a username and password.
	User, Password string
	// Token authenticates with a token.
	Token string
	// TLS enables TLS when any of its fields is set.
	TLS TLSConfig
	// InProcess connects in-process to an embedded server instead of URL.
	InProcess *server.Server
	// Name identifies the connection in the server's monitoring (/connz).
	Name string
	// OnRefused, when set, is called with each permission violation the server
	// reports (nats.ErrPermissionViolation): a request it refused is never
	// answered, so a client that waits for one learns of the refusal only here.
	OnRefused func(error)
}

// Validate reports configuration errors. It does not read the files it names.
func (c ConnConfig) Validate() error {
	if c.URL == "" && c.InProcess == nil {
		return fmt.Errorf("%w: connection: URL is empty and no in-process server is set", ErrInvalidConfig)
	}
	methods := 0
	for _, set := range []bool{c.CredsFile != "", c.NKeyFile != "", c.User != "" || c.Password != "", c.Token != ""} {
		if set {
			methods++
		}
	}
	if methods > 1 {
		return fmt.Errorf("%w: connection: set only one of CredsFile, NKeyFile, User/Password and Token", ErrInvalidConfig)
	}
	if c.Password != "" && c.User == "" {
		return fmt.Errorf("%w: connection: Password is set without User", ErrInvalidConfig)
	}
	if (c.TLS.CertFile == "") != (c.TLS.KeyFile == "") {
		return fmt.Errorf("%w: connection: TLS CertFile and KeyFile must be set together", ErrInvalidConfig)
	}
	return nil
}

// Connect opens a client connection that reconnects forever with jittered exponential
// backoff and logs disconnects, reconnects and asynchronous errors. The initial
// connection is not retried: a wrong address or credential fails fast with an error
// wrapping ErrConnect that names the URL (credentials removed). Close it with
// nc.Drain() so that in-flight messages are processed before the socket closes.
func Connect(cfg ConnConfig, logger *zap.Logger) (*nats.Conn, error) {
	target := redactURL(cfg.URL)
	if cfg.InProcess != nil {
		target = "in-process server " + cfg.InProcess.Name()
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("%w to %s: %w", ErrConnect, target, err)
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	log := logger.With(zap.String("nats_connection", cfg.Name))
	opts, err := connOptions(cfg, log)
	if err != nil {
		return nil, fmt.Errorf("%w to %s: %w", ErrConnect, target, err)
	}
	nc, err := nats.Connect(cfg.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("%w to %s: %w", ErrConnect, target, err)
	}
	if cfg.InProcess != nil {
		// An in-process connection reports the server's configured client URL,
		// which need not be the port it listens on (or any port at all).
		log.Info("nats connected", zap.String("server", target))
	} else {
		log.Info("nats connected", zap.String("url", nc.ConnectedUrlRedacted()))
	}
	return nc, nil
}

func connOptions(cfg ConnConfig, log *zap.Logger) ([]nats.Option, error) {
	opts := []nats.Option{
		nats.Name(cfg.Name),
		nats.MaxReconnects(-1),
		nats.CustomReconnectDelay(reconnectDelay),
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			if err == nil {
				// Close: every CLI command ends so, and a warning there would be noise.
				log.Debug("nats disconnected on close")
				return
			}
			log.Warn("nats disconnected", zap.String("url", nc.ConnectedUrlRedacted()), zap.Error(err))
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("nats reconnected", zap.String("url", nc.ConnectedUrlRedacted()))
		}),
		nats.ClosedHandler(func(nc *nats.Conn) {
			if err := nc.LastError(); err != nil {
				log.Warn("nats connection closed", zap.Error(err))
				return
			}
			log.Info("nats connection closed")
		}),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			fields := []zap.Field{zap.Error(err)}
			if sub != nil {
				fields = append(fields, zap.String("subject", sub.Subject))
			}
			if errors.Is(err, nats.ErrPermissionViolation) {
				// The credential's rule, not a fault: a warning, without a stack.
				log.Warn("refused by the credential's permissions", fields...)
				if cfg.OnRefused != nil {
					cfg.OnRefused(err)
				}
				return
			}
			log.Error("nats async error", fields...)
		}),
	}
	if cfg.InProcess != nil {
		opts = append(opts, nats.InProcessServer(cfg.InProcess))
	}
	switch {
	case cfg.CredsFile != "":
		// The credential and, for a tenant's, the inbox prefix it is limited to.
		credOpts, err := natsauth.ClientOptions(cfg.CredsFile)
		if err != nil {
			return nil, err
		}
		opts = append(opts, credOpts...)
	case cfg.NKeyFile != "":
		opt, err := nats.NkeyOptionFromSeed(cfg.NKeyFile)
		if err != nil {
			return nil, fmt.Errorf("nkey seed file %s: %w", cfg.NKeyFile, err)
		}
		opts = append(opts, opt)
	case cfg.User != "":
		opts = append(opts, nats.UserInfo(cfg.User, cfg.Password))
	case cfg.Token != "":
		opts = append(opts, nats.Token(cfg.Token))
	}
	if cfg.TLS.enabled() {
		tc, err := clientTLS(cfg.TLS)
		if err != nil {
			return nil, err
		}
		opts = append(opts, nats.Secure(tc))
	}
	return opts, nil
}

func clientTLS(c TLSConfig) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.ServerName}
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("TLS CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("TLS CA file %s holds no PEM certificate", c.CAFile)
		}
		tc.RootCAs = pool
	}
	if c.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("TLS client certificate: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

func reconnectDelay(attempts int) time.Duration {
	d := reconnectMax
	if attempts < 16 { // beyond that the shift would only overflow past the cap
		d = min(reconnectBase<<attempts, reconnectMax)
	}
	// ±20% jitter.
	return d - d/5 + rand.N(2*d/5+1)
}

// redactURL drops the user info of every URL in a comma-separated list, so that
// errors and logs never carry a password or token embedded in the URL.
func redactURL(urls string) string {
	parts := strings.Split(urls, ",")
	for i, p := range parts {
		u, err := url.Parse(strings.TrimSpace(p))
		if err != nil || u.Host == "" {
			// Unparseable or scheme-less ("host:4222"): keep only what follows an '@'.
			if at := strings.LastIndex(p, "@"); at >= 0 {
				p = p[at+1:]
			}
			parts[i] = strings.TrimSpace(p)
			continue
		}
		u.User = nil
		parts[i] = u.String()
	}
	return strings.Join(parts, ",")
}
