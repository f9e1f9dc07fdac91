package app

import (
	"testing"

	"github.com/agentmem/agentmem/pkg/config"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// The semantic embedders (USE-lite, remote) get the hybrid recall; only the
// lexical local one ranks by BM25 alone.
func TestRankModeFollowsTheEmbedder(t *testing.T) {
	for provider, want := range map[string]vectorstore.Mode{
		config.EmbedProviderLocal:   vectorstore.Sparse,
		config.EmbedProviderUSELite: vectorstore.Hybrid,
		config.EmbedProviderOpenAI:  vectorstore.Hybrid,
	} {
		if got := rankMode(config.Embed{Provider: provider}); got != want {
			t.Errorf("rankMode(%q) = %v, want %v", provider, got, want)
		}
	}
}
