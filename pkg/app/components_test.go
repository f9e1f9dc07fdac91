package app_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/agentmem/agentmem/pkg/app"
)

// Components, derived from the registry, names the four components in start order,
// and a name outside it is ErrUnknownComponent, to Component and to Serve.
func TestComponentRegistry(t *testing.T) {
	if want := []string{app.Ingest, app.Extractor, app.Consolidator, app.Retriever}; !slices.Equal(app.Components, want) {
		t.Fatalf("Components = %v, want %v", app.Components, want)
	}
	rt := &app.Runtime{}
	if _, err := rt.Component(context.Background(), "indexer"); !errors.Is(err, app.ErrUnknownComponent) {
		t.Fatalf("Component(indexer) = %v, want ErrUnknownComponent", err)
	}
	if err := app.Serve(context.Background(), rt, []string{"indexer"}, nil); !errors.Is(err, app.ErrUnknownComponent) {
		t.Fatalf("Serve(indexer) = %v, want ErrUnknownComponent", err)
	}
}
