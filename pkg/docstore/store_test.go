package docstore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/docstore"
)

func TestConfigValidate(t *testing.T) {
	b := newFilesystem(t, t.TempDir())
	for _, cfg := range []docstore.Config{
		{AutoLoadLines: -1},
		{MaxLines: -5},
		{MaxLines: 100, TargetLines: 101},
		{TargetLines: -1},
	} {
		if _, err := docstore.New(cfg, b, nil); err == nil {
			t.Fatalf("New(%+v) accepted an invalid config", cfg)
		}
	}
	if _, err := docstore.New(docstore.Config{}, nil, nil); err == nil {
		t.Fatal("New accepted a nil backend")
	}
	// A small MaxLines pulls the default target down with it.
	if _, err := docstore.New(docstore.Config{MaxLines: 50}, b, nil); err != nil {
		t.Fatalf("New with MaxLines 50: %v", err)
	}
}

func TestValidateNameAcceptsTheLayout(t *testing.T) {
	for _, name := range []string{
		"MEMORY.md", "file_patterns.md", "user_prefs.md", "policy_overrides.json", ".last_longterm_compress",
		"202611/20261123.md", "202402/20240229.md",
		"backups/20261123_101500_MEMORY.md", "backups/20261123_101500_12_MEMORY.md",
		"backups/20261123_101500_user_prefs.md", "backups/20261123_101500_20261122.md",
		"policy_snapshots/20261123_101500.json", "policy_snapshots/20261123_101500_3.json",
	} {
		if err := docstore.ValidateName(name); err != nil {
			t.Errorf("ValidateName(%q) = %v", name, err)
		}
	}
	for _, name := range []string{
		"202302/20230229.md",                   // no such day
		"backups/20261123_101500_0_MEMORY.md",  // sequence 0 is written without suffix
		"backups/20261123_101500_01_MEMORY.md", // non-canonical sequence
		"backups/20261123_256100_MEMORY.md",    // no such time
		"backups/20261123_101500_policy_overrides.json",
		"policy_snapshots/20261123_101500.md",
		"memory.md", "topics/file_patterns.md",
	} {
		if err := docstore.ValidateName(name); !errors.Is(err, docstore.ErrInvalidPath) {
			t.Errorf("ValidateName(%q) = %v, want ErrInvalidPath", name, err)
		}
	}
}

func TestNamespaceValidateWrapsBothSentinels(t *testing.T) {
	err := docstore.Namespace{Tenant: "a.b", User: "u"}.Validate()
	if !errors.Is(err, docstore.ErrInvalidNamespace) || !errors.Is(err, events.ErrInvalidID) {
		t.Fatalf("Validate = %v; want ErrInvalidNamespace and events.ErrInvalidID", err)
	}
	if err := (docstore.Namespace{Tenant: "acme", User: "u_1-x"}).Validate(); err != nil {
		t.Fatalf("valid namespace rejected: %v", err)
	}
}

func TestLastCompressStampIsUTC(t *testing.T) {
	s := newFSStore(t, t.TempDir(), nil)
	local := time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("X", -7200))
	if err := s.SetLastLongTermCompress(t.Context(), acme, local); err != nil {
		t.Fatal(err)
	}
	data, err := s.ReadFile(t.Context(), acme, docstore.LastCompressFile)
	if err != nil || string(data) != "2026-01-02T05:04:05Z\n" {
		t.Fatalf("stamp file = %q, %v", data, err)
	}
}
