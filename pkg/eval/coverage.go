package eval

import (
	"context"
	"fmt"

	"github.com/agentmem/agentmem/pkg/records"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// storedDiaIDs returns the dia ids in the provenance of every episodic and semantic
// memory of a user: the turns agentmem kept in some form. A question's evidence
// outside this set can never be recalled, whatever the ranking; the share inside it
// is the report's coverage, the ceiling of agentmem's recall.
func storedDiaIDs(ctx context.Context, vs vectorstore.Store, tenant, user string) (map[string]bool, error) {
	f := vectorstore.Filter{Tenant: tenant, UserID: user, MemoryTypes: []vectorstore.MemoryType{vectorstore.Episodic, vectorstore.Semantic}}
	ids := map[string]bool{}
	offset := ""
	for {
		recs, next, err := vs.Scroll(ctx, f, offset, 500)
		if err != nil {
			return nil, fmt.Errorf("eval: list memories of %s: %w", tenant, err)
		}
		for _, r := range recs {
			for _, m := range records.MapList(r.Metadata[records.MetaSourceMeta]) {
				if id, ok := m[MetaDiaID].(string); ok {
					ids[id] = true
				}
			}
		}
		if next == "" {
			return ids, nil
		}
		offset = next
	}
}
