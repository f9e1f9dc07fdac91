package qdrant

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	qc "github.com/qdrant/go-client/qdrant"
	"go.uber.org/zap/zaptest"

	"github.com/agentmem/agentmem/pkg/vectorstore"
	"github.com/agentmem/agentmem/pkg/vectorstore/vectorstoretest"
)

// Environment of the opt-in conformance run against a real Qdrant.
const (
	envAddr   = "AGENTMEM_TEST_QDRANT_ADDR"
	envAPIKey = "AGENTMEM_TEST_QDRANT_API_KEY"
)

// TestConformance runs the vectorstore conformance suite against a real Qdrant,
// each test in a fresh collection that is dropped afterwards.
func TestConformance(t *testing.T) {
	addr := os.Getenv(envAddr)
	if addr == "" {
		t.Skip("SKIPPED: the Qdrant conformance suite did NOT run; the Qdrant backend is only " +
			"checked by request shape here. Set " + envAddr + "=host:6334 (gRPC port; and " + envAPIKey +
			" if the server needs a key) to run vectorstoretest.RunSuite against a real Qdrant.")
	}
	apiKey := os.Getenv(envAPIKey)
	host, port, err := Config{Addr: addr}.hostPort()
	if err != nil {
		t.Fatal(err)
	}
	admin, err := qc.NewClient(&qc.Config{Host: host, Port: port, APIKey: apiKey, PoolSize: 1, SkipCompatibilityCheck: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	vectorstoretest.RunSuite(t, func(t *testing.T) vectorstore.Store {
		name := randomCollection(t)
		s, err := New(context.Background(), Config{
			Addr: addr, APIKey: apiKey, Collection: name, Dimensions: vectorstoretest.Dimensions,
		}, zaptest.NewLogger(t))
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		t.Cleanup(func() {
			s.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := admin.DeleteCollection(ctx, name); err != nil {
				t.Errorf("dropping test collection %s: %v", name, err)
			}
		})
		return s
	})
}

func randomCollection(t *testing.T) string {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "agentmem_test_" + hex.EncodeToString(b)
}
