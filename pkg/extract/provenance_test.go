package extract_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmem/agentmem/pkg/bus/bustest"
	"github.com/agentmem/agentmem/pkg/extract"
)

// A provenance record of the shape before sources paired sessions with users
// (two lists) is read as sources, and a forget reaches it: with one user, its
// sessions are that user's; with several, which session was whose is unknown,
// so the sessions go and each user stays a source of its own until forgotten.
func TestForgetReachesProvenanceOfTheOldShape(t *testing.T) {
	_, _, js := bustest.Provisioned(t)
	ctx := context.Background()
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: extract.DefaultStateBucket})
	if err != nil {
		t.Fatal(err)
	}
	const single, several, untouched = "Rename the column to Date.", "Pass the dates as YYYY-MM-DD.", "Quote the sheet name."
	for content, record := range map[string]string{
		single:    `{"category":"general","content":"` + single + `","sessions":["s1","s3"],"users":["u1"]}`,
		several:   `{"category":"general","content":"` + several + `","sessions":["s1","s2"],"users":["u1","u2"]}`,
		untouched: `{"category":"general","content":"` + untouched + `","sessions":["s9"],"users":["u9"]}`,
	} {
		if _, err := kv.Put(ctx, extract.LearnedKey("acme", "a1", content), []byte(record)); err != nil {
			t.Fatal(err)
		}
	}
	read := func(content string) extract.LearnedProvenance {
		t.Helper()
		p, err := extract.ReadProvenance(ctx, js, nil, "", "acme", "a1", content)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	if p := read(single); !slices.Equal(p.Sources, []extract.LearnedSource{{UserID: "u1", SessionID: "s1"}, {UserID: "u1", SessionID: "s3"}}) {
		t.Fatalf("old record of one user reads as %+v", p.Sources)
	}
	if p := read(several); !slices.Equal(p.Sources, []extract.LearnedSource{{UserID: "u1"}, {UserID: "u2"}}) {
		t.Fatalf("old record of two users reads as %+v", p.Sources)
	}

	changed, err := extract.ForgetLearnedFrom(ctx, js, nil, "", "acme", "u1")
	if err != nil || changed != 2 {
		t.Fatalf("forget u1: %d records changed, %v; want 2", changed, err)
	}
	if p := read(single); len(p.Sources) != 0 || p.Forgotten != 2 || p.Content != single {
		t.Errorf("old record of u1 alone after forgetting u1: %+v", p)
	}
	if p := read(several); !slices.Equal(p.Sources, []extract.LearnedSource{{UserID: "u2"}}) || p.Forgotten != 1 {
		t.Errorf("old record of u1 and u2 after forgetting u1: %+v", p)
	}
	// The rewritten records hold no trace of u1 in either shape.
	for _, content := range []string{single, several} {
		e, err := kv.Get(ctx, extract.LearnedKey("acme", "a1", content))
		if err != nil {
			t.Fatal(err)
		}
		if raw := string(e.Value()); slices.ContainsFunc([]string{`"u1"`, `"s1"`, `"s3"`}, func(s string) bool { return strings.Contains(raw, s) }) {
			t.Errorf("after forgetting u1 the record still names u1 or a session of theirs: %s", raw)
		}
	}
	if p := read(untouched); !slices.Equal(p.Sources, []extract.LearnedSource{{UserID: "u9", SessionID: "s9"}}) || p.Forgotten != 0 {
		t.Errorf("another user's old record after forgetting u1: %+v", p)
	}
}
