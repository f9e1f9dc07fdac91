package app_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"slices"
	"testing"
)

// components are the packages of the stream workers and the retriever. Each is
// wired by pkg/app alone: none may import another, directly or through any other
// package, so a worker can change (or be deployed) without the others.
var components = []string{
	"github.com/agentmem/agentmem/pkg/ingest",
	"github.com/agentmem/agentmem/pkg/extract",
	"github.com/agentmem/agentmem/pkg/consolidate",
	"github.com/agentmem/agentmem/pkg/retrieve",
}

// knownLayeringViolations are the imports between components not yet removed,
// as "importer -> imported". The test fails for any other, and for one of these
// that is gone, so the list only shrinks.
var knownLayeringViolations = []string{}

// TestComponentsDoNotImportEachOther reads every component's dependencies (the
// transitive closure, tests excluded) from go list -deps.
func TestComponentsDoNotImportEachOther(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command:", err)
	}
	var found []string
	for _, c := range components {
		for _, dep := range deps(t, c) {
			if dep != c && slices.Contains(components, dep) {
				found = append(found, c+" -> "+dep)
			}
		}
	}
	for _, v := range found {
		if !slices.Contains(knownLayeringViolations, v) {
			t.Errorf("component imports another: %s", v)
		}
	}
	for _, v := range knownLayeringViolations {
		if !slices.Contains(found, v) {
			t.Errorf("%s is gone: remove it from knownLayeringViolations", v)
		}
	}
}

// deps is pkg and every package it imports, directly or not, as go list -deps
// -json prints them.
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-json=ImportPath", pkg)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v\n%s", pkg, err, stderr.String())
	}
	var paths []string
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct{ ImportPath string }
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		paths = append(paths, p.ImportPath)
	}
	if !slices.Contains(paths, pkg) {
		t.Fatalf("go list -deps %s does not list the package itself: %q", pkg, paths)
	}
	return paths
}
