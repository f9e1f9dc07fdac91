package app_test

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/agentmem/agentmem/pkg/app"
	"github.com/agentmem/agentmem/pkg/bus/bustest"
	"github.com/agentmem/agentmem/pkg/config"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// vector.max_loaded_records reaches the embedded store: with a bound of one
// record, reading a second user's memory drops the first user's partition.
func TestVectorMaxLoadedRecordsReachesTheStore(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg, err := config.Load("", []string{"AGENTMEM_DATA_DIR=" + t.TempDir(), "AGENTMEM_HTTP_LISTEN=", "AGENTMEM_VECTOR_MAX_LOADED_RECORDS=1"})
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zapcore.DebugLevel)
	rt, err := app.NewRuntime(ctx, cfg, bustest.StartServer(t), zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	vec := make([]float32, rt.Embedder.Dimensions())
	vec[0] = 1
	for _, user := range []string{"u1", "u2"} {
		rec := vectorstore.Record{ID: vectorstore.DeterministicID(user), Tenant: "acme", UserID: user, MemoryType: vectorstore.Episodic,
			Text: "tea with " + user, Vector: vec, TS: time.Now()}
		if err := rt.Vectors.Upsert(ctx, rec); err != nil {
			t.Fatal(err)
		}
		if got, err := rt.Vectors.Get(ctx, "acme", user, rec.ID); err != nil || len(got) != 1 {
			t.Fatalf("Get %s: %v %v", user, got, err)
		}
	}
	if n := logs.FilterMessage("partition evicted").Len(); n != 1 {
		t.Fatalf("%d partitions evicted, want u1's (a bound of 1 record)", n)
	}
}
