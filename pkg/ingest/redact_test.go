package ingest_test

import (
	"context"
	"strings"
	"testing"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/ingest"
	"github.com/agentmem/agentmem/pkg/records"
)

// Every episode of a batch holds its texts cleaned of credentials, the message's
// own and those of its context: a text said twice in a batch, and one that is
// the context of the next messages, is cleaned each time it is used (ingest
// cleans each distinct text of a batch once and reuses it).
func TestEveryEpisodeOfABatchIsCleaned(t *testing.T) {
	const secret = "hunter2hunter2"
	r, w := newIngest(t, ingest.Config{})
	said := "Remember: the staging password is " + secret
	batch := []events.Envelope{observation("u1", said), observation("u1", said), observation("u1", "Remember: my team meets on Tuesdays")}
	for i, err := range w.HandleBatch(context.Background(), batch) {
		if err != nil {
			t.Fatalf("observation %d: %v", i, err)
		}
	}
	bySource := map[string]string{}
	for _, e := range r.episodes(t, "u1") {
		src := records.StringList(e.Metadata[records.MetaSourceEventIDs])
		bySource[src[len(src)-1]] = e.Text
	}
	for i, env := range batch {
		text, ok := bySource[env.ID]
		if !ok {
			t.Fatalf("no episode of observation %d; episodes by source %v", i, bySource)
		}
		if strings.Contains(text, secret) || !strings.Contains(text, "[REDACTED:") {
			t.Errorf("episode of observation %d is %q: want the password redacted", i, text)
		}
	}
}
