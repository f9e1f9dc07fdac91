package processor

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentmem/agentmem/pkg/records"
)

// goldenExtraTexts add to decisionTable's texts what its rules see in the wild:
// several sentences, capitals and names, typographic quotes, case folds that
// change a letter's length (İ) or map outside ASCII (K, ſ), combining marks,
// invalid UTF-8, irregular spacing, and a context message long enough to shorten.
var goldenExtraTexts = []string{
	"I have been leading the sales forecast project for 12 months.",
	"My sister moved to Lisbon last spring. I prefer bar charts for the weekly report!",
	"I’m moving to İstanbul next week; my wife’s family lives there.",
	"’Tis true: I ʼveʼ KNOWN my ſister for YEARS, we are close.",
	"Zoë’s café in São Paulo — I work there as a barista since 2024",
	"I  moved\tto\n\nBerlin   last year , what should I see?",
	"bad \xff\xfe utf8 \xc3 I like hiking in the Alps",
	"You live in Berlin. Your sister is called Ana. You can call her.",
	"so, I think I'll be going to the gym tomorrow, is that ok?",
	"  I love e\u0301te\u0301 and Ⅻ and ٣ cats and my daughter’s drawings.  ",
	"Remember: I prefer  metric   units, please.",
	"I exported the table: " + strings.Repeat("rows of data, region north; ", 40),
	"",
}

// updateGolden rewrites testdata/rule_episodes.golden from the current rules:
// go test ./pkg/processor -run TestRuleEpisodesGolden -update-golden
var updateGolden = flag.Bool("update-golden", false, "rewrite testdata/rule_episodes.golden")

// goldenFile holds the rule decider's episodes and the episodic records built from
// them over decisionTable and goldenExtraTexts. Episodes are stored and their ids
// deduplicate redeliveries, so a change of what the rules write (text, context,
// metadata, id) must be deliberate: review the file's diff and commit it with the
// change.
const goldenFile = "testdata/rule_episodes.golden"

func TestRuleEpisodesGolden(t *testing.T) {
	texts := goldenExtraTexts
	for _, tc := range decisionTable {
		texts = append(texts, tc.text)
	}
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	var h bytes.Buffer
	for i, text := range texts {
		for _, who := range []struct{ role, name string }{{"user", ""}, {"assistant", ""}, {"speaker", "Caroline"}} {
			obs := records.Observation{Role: who.role, Who: who.name, Text: text, TS: at.Add(time.Duration(i) * time.Minute), ChatID: "s-1"}
			if i%2 == 0 {
				// Half the observations come from events, with meta and context.
				obs.EventID = fmt.Sprintf("ev-%d", i)
				obs.Meta = map[string]any{"dia_id": fmt.Sprintf("D1:%d", i), "n": json.Number("1.50")}
				for j := max(0, i-2); j < i; j++ {
					obs.Before = append(obs.Before, records.Utterance{Role: "user", Who: who.name, Text: texts[j] + " " + goldenExtraTexts[0],
						EventID: fmt.Sprintf("ev-%d", j), Meta: map[string]any{"dia_id": fmt.Sprintf("D1:%d", j)}})
				}
			}
			ep, err := RuleDecider{}.Decide(context.Background(), obs)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&h, "%+v\n", ep)
			if !ep.Write {
				continue
			}
			rec := records.EpisodeRecord("acme", "u1", obs, ep)
			md, err := json.Marshal(rec.Metadata)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&h, "%s\n%q\n%q\n%s\n", rec.ID, rec.Text, records.EpisodeStatement(obs, ep), md)
		}
	}
	if *updateGolden {
		if err := os.WriteFile(goldenFile, h.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(goldenFile)
	if err != nil {
		t.Fatal(err)
	}
	if got := h.Bytes(); !bytes.Equal(got, want) {
		gotLines, wantLines := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		for i := range min(len(gotLines), len(wantLines)) {
			if gotLines[i] != wantLines[i] {
				t.Fatalf("the rules' episodes changed (%s line %d; -update-golden rewrites it):\n got %s\nwant %s", goldenFile, i+1, gotLines[i], wantLines[i])
			}
		}
		t.Fatalf("the rules' episodes changed: %d lines, %s has %d (-update-golden rewrites it)", len(gotLines), goldenFile, len(wantLines))
	}
}
