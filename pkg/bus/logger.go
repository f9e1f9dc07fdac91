package bus

import (
	"github.com/ThreeDotsLabs/watermill"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// zapAdapter is a watermill.LoggerAdapter over zap. Watermill 1.5.1 ships only std and
// slog adapters, and zap's slog handler lives in the separate go.uber.org/zap/exp
// module, so this small adapter is hand-written.
type zapAdapter struct{ l *zap.Logger }

// NewWatermillLogger adapts logger for Watermill. zap has no trace level: Watermill's
// Trace messages (one per message handled) are logged at debug level. Its lines
// carry no stack trace: the stack would be Watermill's router goroutine, never the
// handler's (a panic's stack is in the recovered error already).
func NewWatermillLogger(logger *zap.Logger) watermill.LoggerAdapter {
	if logger == nil {
		logger = zap.NewNop()
	}
	return zapAdapter{l: logger.WithOptions(zap.AddStacktrace(zapcore.InvalidLevel))}
}

// retryMessages are the Error lines Watermill logs for a handler failure that
// is retried, in process (the Retry middleware) or by redelivery (the Router,
// after a nack): a worker's ordinary retries, logged at warn level. What gives up
// (a dead letter, a stopped worker) has its own line.
var retryMessages = map[string]bool{
	"Handler returned error":   true,
	"Error occurred, retrying": true,
}

func (a zapAdapter) Error(msg string, err error, fields watermill.LogFields) {
	level := zap.ErrorLevel
	if retryMessages[msg] {
		level = zap.WarnLevel
	}
	a.log(level, msg, fields, zap.Error(err))
}

func (a zapAdapter) Info(msg string, fields watermill.LogFields) {
	a.log(zap.InfoLevel, msg, fields)
}

func (a zapAdapter) Debug(msg string, fields watermill.LogFields) {
	a.log(zap.DebugLevel, msg, fields)
}

func (a zapAdapter) Trace(msg string, fields watermill.LogFields) {
	a.log(zap.DebugLevel, msg, fields)
}

// log converts fields only for an enabled level: the Router traces every message,
// on a fresh goroutine each, and Core().Enabled is cheaper than Check, whose frame
// alone grows such a goroutine's stack.
func (a zapAdapter) log(level zapcore.Level, msg string, fields watermill.LogFields, extra ...zap.Field) {
	if !a.l.Core().Enabled(level) {
		return
	}
	if ce := a.l.Check(level, msg); ce != nil {
		ce.Write(append(zapFields(fields), extra...)...)
	}
}

func (a zapAdapter) With(fields watermill.LogFields) watermill.LoggerAdapter {
	return zapAdapter{l: a.l.With(zapFields(fields)...)}
}

func zapFields(fields watermill.LogFields) []zap.Field {
	out := make([]zap.Field, 0, len(fields)+1) // +1: room for the error
	for k, v := range fields {
		out = append(out, zap.Any(k, v))
	}
	return out
}
