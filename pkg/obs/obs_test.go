package obs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

func startServer(t *testing.T, reg *prometheus.Registry) *Server {
	t.Helper()
	return startServerWith(t, ServerConfig{Listen: "127.0.0.1:0"}, reg)
}

func startServerWith(t *testing.T, cfg ServerConfig, reg *prometheus.Registry) *Server {
	t.Helper()
	s, err := NewServer(cfg, reg, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return s
}

func get(t *testing.T, s *Server, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + s.Addr() + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

func TestHealthzIsOKWhileServing(t *testing.T) {
	s := startServer(t, prometheus.NewRegistry())
	s.AddReadyCheck("never", func(context.Context) error { return errors.New("down") })
	if code, _ := get(t, s, "/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz = %d, want 200 even when not ready", code)
	}
}

func TestReadyzNamesFailingChecksUntilTheyPass(t *testing.T) {
	s := startServer(t, prometheus.NewRegistry())
	var natsUp atomic.Bool
	s.AddReadyCheck("nats", func(context.Context) error {
		if !natsUp.Load() {
			return errors.New("not connected")
		}
		return nil
	})
	s.AddReadyCheck("store", func(context.Context) error { return nil })

	code, body := get(t, s, "/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "nats: not connected") || strings.Contains(body, "store") {
		t.Fatalf("/readyz = %d %q, want 503 naming only nats", code, body)
	}
	natsUp.Store(true)
	if code, body := get(t, s, "/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz = %d %q after the check passes, want 200", code, body)
	}
}

func TestReadyzCheckGetsDeadline(t *testing.T) {
	s := startServerWith(t, ServerConfig{Listen: "127.0.0.1:0", CheckTimeout: 50 * time.Millisecond}, prometheus.NewRegistry())
	s.AddReadyCheck("slow", func(ctx context.Context) error {
		<-ctx.Done()
		return ctx.Err()
	})
	code, body := get(t, s, "/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "slow: context deadline exceeded") {
		t.Fatalf("/readyz = %d %q, want 503 with the slow check timed out", code, body)
	}
}

func TestMetricsExposesRegisteredCounterAndWorkerMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "test_things_total", Help: "things"})
	reg.MustRegister(c)
	c.Add(3)
	ingest, err := NewMetrics(reg, "ingest")
	if err != nil {
		t.Fatal(err)
	}
	// A second worker in the same process shares the collectors.
	extractor, err := NewMetrics(reg, "extractor")
	if err != nil {
		t.Fatal(err)
	}
	ingest.ObserveMessage(OutcomeOK, 20*time.Millisecond)
	ingest.ObserveMessage(OutcomeOK, 30*time.Millisecond)
	extractor.ObserveMessage(OutcomeRetry, time.Second)
	extractor.DeadLetter("malformed")

	s := startServer(t, reg)
	code, body := get(t, s, "/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics = %d", code)
	}
	for _, want := range []string{
		"test_things_total 3",
		`agentmem_messages_processed_total{outcome="ok",worker="ingest"} 2`,
		`agentmem_messages_processed_total{outcome="dead_letter",worker="ingest"} 0`,
		`agentmem_messages_processed_total{outcome="retry",worker="extractor"} 1`,
		`agentmem_handler_duration_seconds_count{outcome="ok",worker="ingest"} 2`,
		`agentmem_dead_letters_total{reason="malformed",worker="extractor"} 1`,
		// A dead letter is also a message handled, with that outcome.
		`agentmem_messages_processed_total{outcome="dead_letter",worker="extractor"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

func TestNewMetricsRejectsBadInput(t *testing.T) {
	if _, err := NewMetrics(nil, "w"); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("nil registerer: %v", err)
	}
	if _, err := NewMetrics(prometheus.NewRegistry(), ""); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("empty worker: %v", err)
	}
	reg := prometheus.NewRegistry()
	// Same name, different labels: a real conflict, reported rather than panicking.
	reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Namespace: "agentmem", Name: "messages_processed_total", Help: "x"}))
	if _, err := NewMetrics(reg, "w"); err == nil {
		t.Error("conflicting registration accepted")
	}
}

func TestServerLifecycle(t *testing.T) {
	if _, err := NewServer(ServerConfig{Listen: "no-port"}, prometheus.NewRegistry(), nil); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("bad listen: %v", err)
	}
	if _, err := NewServer(ServerConfig{Listen: ":0"}, nil, nil); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("nil registry: %v", err)
	}
	disabled, err := NewServer(ServerConfig{}, prometheus.NewRegistry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := disabled.Start(); err != nil || disabled.Addr() != "" {
		t.Errorf("disabled server: Start %v, Addr %q", err, disabled.Addr())
	}
	if err := disabled.Shutdown(context.Background()); err != nil {
		t.Errorf("disabled shutdown: %v", err)
	}

	s := startServer(t, prometheus.NewRegistry())
	if err := s.Start(); !errors.Is(err, ErrServerStarted) {
		t.Errorf("second Start: %v", err)
	}
	addr := s.Addr()
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get("http://" + addr + "/healthz"); err == nil {
		t.Error("server still answers after Shutdown")
	}
}

func TestLoggerLevelsAndFormats(t *testing.T) {
	for _, tc := range []struct {
		cfg     LogConfig
		enabled zapcore.Level
		below   zapcore.Level
	}{
		{LogConfig{}, zapcore.InfoLevel, zapcore.DebugLevel},
		{LogConfig{Level: "debug"}, zapcore.DebugLevel, zapcore.DebugLevel - 1},
		{LogConfig{Level: "WARN", Format: "console"}, zapcore.WarnLevel, zapcore.InfoLevel},
		{LogConfig{Level: "error", Format: "json"}, zapcore.ErrorLevel, zapcore.WarnLevel},
	} {
		l, err := NewLogger(tc.cfg)
		if err != nil {
			t.Fatalf("%+v: %v", tc.cfg, err)
		}
		if !l.Core().Enabled(tc.enabled) || l.Core().Enabled(tc.below) {
			t.Errorf("%+v: enabled(%v)=%v enabled(%v)=%v", tc.cfg, tc.enabled, l.Core().Enabled(tc.enabled), tc.below, l.Core().Enabled(tc.below))
		}
	}
	for _, bad := range []LogConfig{{Level: "verbose"}, {Level: "fatal"}, {Format: "xml"}} {
		if _, err := NewLogger(bad); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%+v: error %v, want ErrInvalidConfig", bad, err)
		}
		if err := bad.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%+v: Validate %v", bad, err)
		}
	}
}

func TestLoggerWritesStandardFields(t *testing.T) {
	var buf bytes.Buffer
	l, err := newLogger(LogConfig{Format: FormatJSON}, zapcore.AddSync(&buf))
	if err != nil {
		t.Fatal(err)
	}
	l.Info("handled", Worker("ingest"), Tenant("acme"), User("u1"), Session("s1"), EventID("01JD"), MemoryID("m1"))
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatalf("json format produced %q: %v", buf.String(), err)
	}
	want := map[string]string{"worker": "ingest", "tenant": "acme", "user": "u1", "session": "s1", "event_id": "01JD", "memory_id": "m1", "msg": "handled", "level": "info"}
	for k, v := range want {
		if rec[k] != v {
			t.Errorf("field %s = %v, want %q (record %v)", k, rec[k], v, rec)
		}
	}

	buf.Reset()
	l, err = newLogger(LogConfig{Format: FormatConsole}, zapcore.AddSync(&buf))
	if err != nil {
		t.Fatal(err)
	}
	l.Info("handled", Tenant("acme"))
	if line := buf.String(); json.Valid([]byte(line)) || !strings.Contains(line, "\tINFO\t") || !strings.Contains(line, `{"tenant": "acme"}`) {
		t.Errorf("console format produced %q", line)
	}
}
