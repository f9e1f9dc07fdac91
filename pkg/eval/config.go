package eval

import (
	"fmt"
	"path/filepath"
	"strconv"

	"github.com/agentmem/agentmem/pkg/config"
)

// stackConfig loads the configuration of the evaluation's private stack: the
// caller's file and environment, with everything that stores or listens pinned under
// dir (so an evaluation never writes into a real deployment's Qdrant collection or
// JetStream) and both vector K raised to maxK so a pack can hold maxK items.
func stackConfig(file string, environ []string, dir string, maxK int) (config.Config, error) {
	k := strconv.Itoa(maxK)
	overrides := map[string]string{
		"data_dir":                dir,
		"memory.dir":              filepath.Join(dir, "memory"),
		"memory.backend":          config.MemoryBackendFilesystem,
		"vector.backend":          config.VectorBackendEmbedded,
		"vector.path":             filepath.Join(dir, "vectors.db"),
		"nats.embedded.store_dir": filepath.Join(dir, "nats"),
		"nats.embedded.listen":    "",
		"http.listen":             "",
		"vector.k_episodic":       k,
		"vector.k_semantic":       k,
	}
	cfg, err := config.Load(file, config.WithOverrides(environ, overrides))
	if err != nil {
		return config.Config{}, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return cfg, nil
}
