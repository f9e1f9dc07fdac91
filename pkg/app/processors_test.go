package app

import (
	"testing"

	"go.uber.org/zap"
)

// The processors are built once per Runtime and shared by its components.
func TestProcessorsAreBuiltOncePerRuntime(t *testing.T) {
	rt := &Runtime{Logger: zap.NewNop()}
	first, err := rt.processors()
	if err != nil {
		t.Fatal(err)
	}
	again, err := rt.processors()
	if err != nil {
		t.Fatal(err)
	}
	if first.extractor != again.extractor {
		t.Fatal("a second component got processors of its own")
	}
	if other, _ := (&Runtime{Logger: zap.NewNop()}).processors(); other.extractor == first.extractor {
		t.Fatal("two runtimes share processors")
	}
}
