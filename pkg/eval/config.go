package eval

import (
	"fmt"
	"strconv"

	"github.com/agentmem/agentmem/pkg/config"
)

// stackConfig loads the configuration of the evaluation's private stack: the
// caller's file and environment, with everything that stores or listens pinned under
// dir (config.Sandbox) and both vector K raised to maxK so a pack can hold maxK
// items.
func stackConfig(file string, environ []string, dir string, maxK int) (config.Config, error) {
	k := strconv.Itoa(maxK)
	overrides := config.Sandbox(dir)
	overrides["vector.k_episodic"] = k
	overrides["vector.k_semantic"] = k
	cfg, err := config.Load(file, config.WithOverrides(environ, overrides))
	if err != nil {
		return config.Config{}, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return cfg, nil
}

// scenarioStackConfig loads the configuration of a scenario run's private stack:
// the caller's file and environment with storage and listeners under dir, and the
// retriever's defaults otherwise (the pack an agent would get).
func scenarioStackConfig(file string, environ []string, dir string) (config.Config, error) {
	cfg, err := config.Load(file, config.WithOverrides(environ, config.Sandbox(dir)))
	if err != nil {
		return config.Config{}, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return cfg, nil
}
