//go:build chaos_long

package chaos

import (
	"os"
	"strconv"
	"testing"
)

// TestChaosLong is the long chaos run, behind the chaos_long build tag:
//
//	go test -tags chaos_long -run TestChaosLong -timeout 2h -v ./chaos/
//
// AGENTMEM_TEST_CHAOS_ROUNDS (default 30) and AGENTMEM_TEST_CHAOS_MESSAGES
// (observations per round, default 3000) size it; AGENTMEM_TEST_CHAOS_SEED
// replays a run.
func TestChaosLong(t *testing.T) {
	run(t, params{
		rounds:     envInt(t, "AGENTMEM_TEST_CHAOS_ROUNDS", 30),
		messages:   envInt(t, "AGENTMEM_TEST_CHAOS_MESSAGES", 3000),
		kills:      [2]int{3, 8},
		publishers: 8,
	})
}

func envInt(t *testing.T, key string, def int) int {
	s := os.Getenv(key)
	if s == "" {
		return def
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 1 {
		t.Fatalf("%s=%q: want a positive integer", key, s)
	}
	return v
}
