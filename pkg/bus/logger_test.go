package bus_test

import (
	"errors"
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/agentmem/agentmem/pkg/bus"
)

// A worker's retries are logged at warn level and no Watermill line carries a
// stack trace (the logger adds them at error level).
func TestWatermillRetriesAreWarnings(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	wl := bus.NewWatermillLogger(zap.New(core, zap.AddStacktrace(zapcore.ErrorLevel)))
	wl.Error("Handler returned error", errors.New("boom"), watermill.LogFields{"message_uuid": "1"})
	wl.Error("Error occurred, retrying", errors.New("boom"), nil)
	wl.Error("Cannot close router", errors.New("boom"), nil)
	want := []zapcore.Level{zapcore.WarnLevel, zapcore.WarnLevel, zapcore.ErrorLevel}
	for i, e := range logs.All() {
		if e.Level != want[i] || e.Stack != "" {
			t.Errorf("%q: level %s, stack %q; want %s without a stack", e.Message, e.Level, e.Stack, want[i])
		}
	}
}
