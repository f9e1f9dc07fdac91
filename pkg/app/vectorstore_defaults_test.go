package app_test

import (
	"testing"

	"github.com/agentmem/agentmem/pkg/config"
	"github.com/agentmem/agentmem/pkg/vectorstore/embedded"
)

// The configuration's default bound on the embedded store's loaded records is
// the store's own (config cannot import the store, which brings SQLite).
func TestVectorStoreDefaults(t *testing.T) {
	if got := config.Default().Vector.MaxLoadedRecords; got != embedded.DefaultMaxLoadedRecords {
		t.Fatalf("vector.max_loaded_records defaults to %d, the embedded store to %d", got, embedded.DefaultMaxLoadedRecords)
	}
}
