package retrieve

import (
	"context"
	"fmt"
	"testing"

	"pgregory.net/rapid"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/docstore"
	"github.com/agentmem/agentmem/pkg/redact/redacttest"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// What a caller writes through append, add, update, item.save and item.update
// is stored without the credentials in it: MEMORY.md, the daily note and every
// vector record (memories and items) hold markers, never the values, and the
// replies say what was stored.
func TestPropertyWriteRPCsRedactCredentials(t *testing.T) {
	r := newRig(t)
	r.start(Config{})
	ctx := context.Background()
	n := 0
	rapid.Check(t, func(rt *rapid.T) {
		n++
		user := fmt.Sprintf("u%d", n)
		s := redacttest.Sentence().Draw(rt, "secret")
		leak := func(where, text string) {
			if v := s.Leaks(text); v != "" {
				rt.Fatalf("%s holds %q: %q", where, v, text)
			}
		}
		ok[events.AppendReply](t, r.call(events.EndpointAppend, events.AppendRequest{UserID: user, Content: s.Text}))
		today := ok[events.AppendReply](t, r.call(events.EndpointAppend, events.AppendRequest{UserID: user, Content: s.Text, Slot: events.SlotToday}))
		for _, f := range []string{docstore.MemoryFile, today.File} {
			b, err := r.docs.ReadFile(ctx, docstore.Namespace{Tenant: tenant, User: user}, f)
			must(t, err)
			leak(f, string(b))
		}
		add := ok[events.AddReply](t, r.call(events.EndpointAdd, events.AddRequest{UserID: user, Text: "Export settings"}))
		up := ok[events.Memory](t, r.call(events.EndpointUpdate, events.UpdateRequest{UserID: user, ID: add.MemoryIDs[0], Text: s.Text}))
		leak("update reply", up.Text)
		ok[events.AddReply](t, r.call(events.EndpointAdd, events.AddRequest{UserID: user, Text: s.Text, MemoryType: events.MemorySemantic}))
		item := events.MemoryItem{Scope: events.ScopeUser, Kind: events.ItemFact, Key: "export", Content: s.Text, Confidence: 1}
		saved := ok[events.MemoryItem](t, r.call(events.EndpointItemSave, events.ItemRequest{UserID: user, Item: item}))
		leak("item.save reply", saved.Content)
		item.Key = "export2"
		ok[events.MemoryItem](t, r.call(events.EndpointItemSave, events.ItemRequest{UserID: user, Item: events.MemoryItem{Scope: events.ScopeUser, Kind: events.ItemFact, Key: "export2", Content: "placeholder", Confidence: 1}}))
		ok[events.MemoryItem](t, r.call(events.EndpointItemUpdate, events.ItemRequest{UserID: user, Item: item}))
		recs, _, err := r.vectors.Scroll(ctx, vectorstore.Filter{Tenant: tenant, UserID: user}, "", 100)
		must(t, err)
		if len(recs) != 4 {
			rt.Fatalf("%d records, want 4 (two memories, two items)", len(recs))
		}
		for _, rec := range recs {
			leak(string(rec.MemoryType)+" record", rec.Text+fmt.Sprint(rec.Metadata))
		}
	})
}
