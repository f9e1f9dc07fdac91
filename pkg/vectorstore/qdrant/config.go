package qdrant

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"regexp"
	"strconv"
	"time"

	"google.golang.org/grpc"

	ctxclock "github.com/agentmem/agentmem/pkg/clock"
)

// Defaults applied by New to zero-valued Config fields.
const (
	DefaultAddr       = "localhost:6334"
	DefaultCollection = "memories"
	DefaultTimeout    = 10 * time.Second
)

// Config configures the Qdrant store.
type Config struct {
	// Addr is host:port of Qdrant's gRPC API (not the REST port 6333); default
	// DefaultAddr.
	Addr string
	// APIKey is sent on every call as the "api-key" header; empty sends none. It never
	// appears in errors or logs.
	APIKey string
	// UseTLS dials with TLS (system roots unless CAFile is set). Without TLS an API
	// key travels in clear text, which New logs as a warning.
	UseTLS bool
	// CAFile is a PEM bundle of the CAs that sign the server's certificate; setting
	// it implies UseTLS.
	CAFile string
	// Collection is the collection name; default DefaultCollection.
	Collection string
	// Dimensions is the dense vector length. Required; an existing collection with
	// another length makes New fail with vectorstore.ErrDimension.
	Dimensions int
	// SkipCreate makes New only check an existing collection (created by an operator)
	// instead of creating a missing one and its payload indexes. The zero value,
	// false, creates: the collection is managed by the service unless told otherwise.
	SkipCreate bool
	// Timeout bounds each call to Qdrant (a context deadline that is earlier wins);
	// default DefaultTimeout.
	Timeout time.Duration
	// GrpcOptions are extra dial options, applied after the adapter's own (tests use
	// grpc.WithContextDialer to reach an in-process server).
	GrpcOptions []grpc.DialOption
	// Retries is how many times a call that failed transiently (unreachable,
	// overloaded) is repeated: 0 means DefaultRetries, negative none.
	Retries int
	// RetryBase is the wait before the first retry, doubled before each next one;
	// default DefaultRetryBase (1 s, 2 s, 4 s).
	RetryBase time.Duration

	// sleep waits between retries; tests replace it to read the schedule.
	sleep func(context.Context, time.Duration) error
}

func (c *Config) setDefaults() {
	if c.Addr == "" {
		c.Addr = DefaultAddr
	}
	if c.Collection == "" {
		c.Collection = DefaultCollection
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	switch {
	case c.Retries == 0:
		c.Retries = DefaultRetries
	case c.Retries < 0:
		c.Retries = 0
	}
	if c.RetryBase == 0 {
		c.RetryBase = DefaultRetryBase
	}
	if c.sleep == nil {
		c.sleep = ctxclock.Sleep
	}
}

// collectionName is what Qdrant accepts as a collection name without quoting
// trouble in URLs and snapshots.
var collectionName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,255}$`)

// Validate reports configuration errors, all at once.
func (c Config) Validate() error {
	var errs []error
	if _, _, err := c.hostPort(); err != nil {
		errs = append(errs, err)
	}
	if !collectionName.MatchString(c.Collection) {
		errs = append(errs, fmt.Errorf("Collection %q: want 1-255 of [A-Za-z0-9_.-]", c.Collection))
	}
	if c.Dimensions < 1 {
		errs = append(errs, fmt.Errorf("Dimensions is %d, want > 0", c.Dimensions))
	}
	if c.Timeout < 0 {
		errs = append(errs, fmt.Errorf("Timeout is %s, want >= 0", c.Timeout))
	}
	if c.RetryBase < 0 {
		errs = append(errs, fmt.Errorf("RetryBase is %s, want >= 0", c.RetryBase))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return nil
}

// hostPort splits Addr for the client, which takes them separately.
func (c Config) hostPort() (string, int, error) {
	host, p, err := net.SplitHostPort(c.Addr)
	if err != nil {
		return "", 0, fmt.Errorf("Addr %q: want host:port: %w", c.Addr, err)
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 1 || port > 65535 {
		return "", 0, fmt.Errorf("Addr %q: port %q is not in 1-65535", c.Addr, p)
	}
	if host == "" {
		return "", 0, fmt.Errorf("Addr %q: empty host", c.Addr)
	}
	return host, port, nil
}

// tlsConfig is the client TLS configuration, nil when TLS is off.
func (c Config) tlsConfig() (*tls.Config, error) {
	if !c.UseTLS && c.CAFile == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("%w: CAFile: %w", ErrInvalidConfig, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%w: CAFile %s holds no PEM certificate", ErrInvalidConfig, c.CAFile)
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}
