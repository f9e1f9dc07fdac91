package app_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/docstore"
)

// SPEC B4 through the stack: the consolidation that takes MEMORY.md over
// long_term_compress_char_threshold gets it compressed by the consolidator on
// its own (the restated fact merged into its newest form), with a backup of the
// file as it was and the stamp; under the threshold nothing happens.
func TestAutomaticCompressionThroughTheStack(t *testing.T) {
	ctx := context.Background()
	start := time.Now()
	r := upStackWith(t, "AGENTMEM_MEMORY_LONG_TERM_COMPRESS_CHAR_THRESHOLD=250")
	ns := docstore.Namespace{Tenant: "acme", User: "u1"}
	docs := r.stack.Runtime().Docs
	session := func(id, text string) string {
		r.say(t, "u1", id, events.RoleUser, text)
		if _, err := r.client.EndSession(ctx, "u1", id); err != nil {
			t.Fatal(err)
		}
		r.waitIdle(t)
		return r.file(t, "u1", docstore.MemoryFile)
	}
	session("s0", "Remember that the weekly sync with finance is every Tuesday at 10:00.")
	under := session("s1", "Remember that the weekly sync with finance is every Tuesday at 10:00 in room B12.")
	backups, err := docs.Backups(ctx, ns)
	if _, stamped, _ := docs.LastLongTermCompress(ctx, ns); err != nil || len(backups) != 0 || stamped || len(under) > 250 || strings.Count(under, "weekly sync") != 2 {
		t.Fatalf("under the threshold (%d chars): backups %v (%v), stamped %v; MEMORY.md:\n%s", len(under), backups, err, stamped, under)
	}

	after := session("s2", "Remember that invoices are due on the 5th of each month.")
	if strings.Count(after, "weekly sync") != 1 || !strings.Contains(after, "room B12") || !strings.Contains(after, "Invoices are due on the 5th") {
		t.Fatalf("MEMORY.md over the threshold is not compressed (want the restated sync merged into its newest form, the invoices kept):\n%s", after)
	}
	backups, err = docs.Backups(ctx, ns)
	if err != nil || len(backups) != 1 {
		t.Fatalf("backups %v, %v; want one", backups, err)
	}
	backup, err := docs.ReadFile(ctx, ns, backups[0])
	if err != nil || !strings.HasPrefix(string(backup), under) || !strings.Contains(string(backup), "Invoices are due") || len(backup) <= 250 {
		t.Fatalf("backup %s holds %q (%v); want MEMORY.md as it was before the compression", backups[0], backup, err)
	}
	if stamp, ok, err := docs.LastLongTermCompress(ctx, ns); err != nil || !ok || stamp.Before(start) || stamp.After(time.Now()) {
		t.Fatalf("stamp %v, %v, %v; want the time of the compression", stamp, ok, err)
	}
}
