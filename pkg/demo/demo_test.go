package demo_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentmem/agentmem/pkg/demo"
	"github.com/agentmem/agentmem/pkg/markdown"
)

// The README's first command: the sample conversation becomes entries in the right
// files (chit-chat becomes nothing) and a follow-up question gets the relevant topics.
func TestDemoBuildsMemoryAndContext(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	res, err := demo.Run(ctx, t.TempDir(), &out, nil)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	want := map[string][]string{
		"file_patterns.md": {"sales_2026.csv", "region", "4998"},
		"user_prefs.md":    {"bar chart", "EUR"},
		"MEMORY.md":        {"KeyError", "fiscal year"},
	}
	total := 0
	for file, words := range want {
		es, perrs := markdown.ParseEntries(res.Files[file])
		if len(es) == 0 || len(perrs) > 0 {
			t.Fatalf("%s: %d entries, errors %v:\n%s", file, len(es), perrs, res.Files[file])
		}
		total += len(es)
		for _, w := range words {
			if !strings.Contains(res.Files[file], w) {
				t.Errorf("%s lacks %q:\n%s", file, w, res.Files[file])
			}
		}
	}
	if strings.Contains(strings.ToLower(strings.Join([]string{res.Files["MEMORY.md"], res.Files["user_prefs.md"]}, "")), "good morning") {
		t.Errorf("chit-chat was remembered")
	}
	if res.Pack.Counts.Topics != 2 {
		t.Errorf("topics in the pack = %d, want both (the query is about a file and a chart)", res.Pack.Counts.Topics)
	}
	for _, w := range []string{"region", "bar chart", "fiscal year"} {
		if !strings.Contains(res.Pack.Prompt, w) {
			t.Errorf("the context pack's prompt lacks %q:\n%s", w, res.Pack.Prompt)
		}
	}
	if !strings.Contains(out.String(), "== context pack") {
		t.Errorf("demo output lacks the context pack:\n%s", out.String())
	}
}
