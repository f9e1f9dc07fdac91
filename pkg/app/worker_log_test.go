package app

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/agentmem/agentmem/pkg/bus"
	"github.com/agentmem/agentmem/pkg/bus/bustest"
	"github.com/agentmem/agentmem/pkg/config"
	"github.com/agentmem/agentmem/pkg/obs"
)

// workerFields counts the worker fields of an entry.
func workerFields(e observer.LoggedEntry) int {
	n := 0
	for _, f := range e.Context {
		if f.Key == obs.KeyWorker {
			n++
		}
	}
	return n
}

// checkWorkerOnce fails when a line carries the worker field more than once, or when
// no line of the named worker, Watermill's among them, carries it.
func checkWorkerOnce(t *testing.T, logs *observer.ObservedLogs, worker string) {
	t.Helper()
	named, watermill := 0, 0
	for _, e := range logs.All() {
		switch n := workerFields(e); {
		case n > 1:
			t.Errorf("%q logs the worker field %d times: %v", e.Message, n, e.Context)
		case n == 1 && e.ContextMap()[obs.KeyWorker] == worker:
			named++
			if e.Message == "Starting handler" {
				watermill++
			}
		}
	}
	if named == 0 || watermill == 0 {
		t.Errorf("%d lines name worker %s, %d of them Watermill's; want some of each", named, worker, watermill)
	}
}

// Every line a worker logs, Watermill's included, names it once: in a worker
// binary (serveWorker) and in the all-in-one stack.
func TestWorkerFieldLoggedOnce(t *testing.T) {
	t.Run("worker binary", func(t *testing.T) {
		srv := bustest.StartServerWith(t, bus.EmbeddedConfig{StoreDir: t.TempDir(), Listen: "127.0.0.1:0"})
		cfg, err := config.Load("", []string{"AGENTMEM_NATS_URL=" + srv.ClientURL(), "AGENTMEM_DATA_DIR=" + t.TempDir(), "AGENTMEM_HTTP_LISTEN="})
		if err != nil {
			t.Fatal(err)
		}
		core, logs := observer.New(zapcore.DebugLevel)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		exit := make(chan int, 1)
		go func() { exit <- serveWorker(ctx, Ingest, cfg, zap.New(core)) }()
		bustest.Eventually(t, 30*time.Second, func() error {
			if logs.FilterMessage("ready").Len() == 0 {
				return context.DeadlineExceeded
			}
			return nil
		})
		cancel()
		if code := <-exit; code != 0 {
			t.Fatalf("exit %d", code)
		}
		checkWorkerOnce(t, logs, Ingest)
	})
	t.Run("agentmem up", func(t *testing.T) {
		cfg, err := config.Load("", []string{"AGENTMEM_DATA_DIR=" + t.TempDir(), "AGENTMEM_HTTP_LISTEN=", "AGENTMEM_NATS_EMBEDDED_LISTEN="})
		if err != nil {
			t.Fatal(err)
		}
		core, logs := observer.New(zapcore.DebugLevel)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		stack, err := Up(ctx, cfg, UpOptions{}, zap.New(core))
		if err != nil {
			t.Fatal(err)
		}
		if err := stack.Close(); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{Ingest, Extractor, Consolidator} {
			checkWorkerOnce(t, logs, name)
		}
	})
}
