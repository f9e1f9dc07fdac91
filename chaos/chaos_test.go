package chaos

import (
	"os"
	"testing"
)

// TestMain removes the binaries the tests built.
func TestMain(m *testing.M) {
	code := m.Run()
	if builtBinaries.dir != "" {
		_ = os.RemoveAll(builtBinaries.dir)
	}
	os.Exit(code)
}

// TestChaos is the bounded chaos run of `go test ./...` and CI: 5 rounds of 600
// observations (a few thousand messages with the session ends), 2 to 3 kills
// each. See the package documentation.
func TestChaos(t *testing.T) {
	run(t, params{rounds: 5, messages: 600, kills: [2]int{2, 3}, publishers: 4})
}
