// Package obs is the observability every agentmem binary shares: the zap logger and its
// standard fields, the Prometheus metrics of a message worker, and the HTTP server for
// /metrics, /healthz and /readyz.
package obs

import (
	"errors"
	"fmt"
	"os"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// ErrInvalidConfig is wrapped by every configuration error of this package.
var ErrInvalidConfig = errors.New("obs: invalid config")

// Log formats.
const (
	FormatJSON    = "json"
	FormatConsole = "console"
)

// LogConfig selects the log level (debug, info, warn, error; default info) and the
// format (json or console; default json).
type LogConfig struct {
	Level  string
	Format string
}

// Validate reports an unknown level or format.
func (c LogConfig) Validate() error {
	_, _, err := c.parse()
	return err
}

func (c LogConfig) parse() (zapcore.Level, zapcore.Encoder, error) {
	level := zapcore.InfoLevel
	if c.Level != "" {
		l, err := zapcore.ParseLevel(c.Level)
		if err != nil || l > zapcore.ErrorLevel {
			// dpanic/panic/fatal would silence errors, which no deployment wants.
			return 0, nil, fmt.Errorf("%w: log level %q: want debug, info, warn or error", ErrInvalidConfig, c.Level)
		}
		level = l
	}
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	switch c.Format {
	case "", FormatJSON:
		return level, zapcore.NewJSONEncoder(enc), nil
	case FormatConsole:
		enc.EncodeLevel = zapcore.CapitalLevelEncoder // readable columns for humans
		return level, zapcore.NewConsoleEncoder(enc), nil
	default:
		return 0, nil, fmt.Errorf("%w: log format %q: want %s or %s", ErrInvalidConfig, c.Format, FormatJSON, FormatConsole)
	}
}

// NewLogger builds the process logger, writing to stderr.
func NewLogger(cfg LogConfig) (*zap.Logger, error) {
	return newLogger(cfg, zapcore.Lock(os.Stderr))
}

func newLogger(cfg LogConfig, out zapcore.WriteSyncer) (*zap.Logger, error) {
	level, enc, err := cfg.parse()
	if err != nil {
		return nil, err
	}
	core := zapcore.NewCore(enc, out, level)
	return zap.New(core, zap.AddCaller(), zap.AddStacktrace(zapcore.ErrorLevel), zap.ErrorOutput(out)), nil
}

// Standard field keys, so that logs of every worker can be filtered the same way.
const (
	KeyWorker   = "worker"
	KeyTenant   = "tenant"
	KeyUser     = "user"
	KeySession  = "session"
	KeyEventID  = "event_id"
	KeyMemoryID = "memory_id"
)

// Worker is the worker name field.
func Worker(s string) zap.Field { return zap.String(KeyWorker, s) }

// Tenant is the tenant ID field.
func Tenant(s string) zap.Field { return zap.String(KeyTenant, s) }

// User is the user ID field.
func User(s string) zap.Field { return zap.String(KeyUser, s) }

// Session is the session ID field.
func Session(s string) zap.Field { return zap.String(KeySession, s) }

// EventID is the event (envelope) ID field.
func EventID(s string) zap.Field { return zap.String(KeyEventID, s) }

// MemoryID is the ID field of a memory (an episodic or semantic record).
func MemoryID(s string) zap.Field { return zap.String(KeyMemoryID, s) }
