package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// officialLoCoMo is three samples in the form of snap-research/locomo's
// data/locomo10.json: numeric and adversarial answers, and the turn fields the
// evaluation does not read (img_url, query, re-download).
const officialLoCoMo = `[
 {"sample_id": "conv-26", "qa": [
   {"question": "When did Caroline go to the support group?", "answer": "7 May 2023", "evidence": ["D1:1"], "category": 2},
   {"question": "In which year?", "answer": 2022, "evidence": ["D1:2"], "category": 2},
   {"question": "What did Caroline realize?", "evidence": ["D1:2"], "category": 5, "adversarial_answer": "self-care"}],
  "conversation": {"speaker_a": "Caroline", "speaker_b": "Melanie",
   "session_1_date_time": "1:56 pm on 8 May, 2023",
   "session_1": [
    {"speaker": "Caroline", "dia_id": "D1:1", "text": "I went to a support group yesterday."},
    {"speaker": "Melanie", "dia_id": "D1:2", "text": "Look!", "img_url": ["https://example.org/a.jpg"], "blip_caption": "a photo of a dog", "query": "dog", "re-download": true}]},
  "event_summary": {}, "observation": {}, "session_summary": {}},
 {"sample_id": "conv-30", "qa": [], "conversation": {"speaker_a": "Jon", "speaker_b": "Gina",
   "session_1_date_time": "4:04 pm on 20 January, 2023", "session_1": [{"speaker": "Jon", "dia_id": "D1:1", "text": "Hi."}]}},
 {"sample_id": "conv-41", "qa": [], "conversation": {"speaker_a": "A", "speaker_b": "B",
   "session_1_date_time": "4:04 pm on 20 January, 2023", "session_1": [{"speaker": "A", "dia_id": "D1:1", "text": "Hello."}]}}
]`

// Issue 35: eval locomo takes the official file as it is, and --samples keeps
// the named conversations in file order (the split BENCHMARKS.md measures on);
// a name the file lacks is refused, naming what it has.
func TestLoadLoCoMoOfficialFileAndSamples(t *testing.T) {
	path := filepath.Join(t.TempDir(), "locomo10.json")
	if err := os.WriteFile(path, []byte(officialLoCoMo), 0o644); err != nil {
		t.Fatal(err)
	}
	ids := func(samples string) ([]string, error) {
		convs, err := loadLoCoMo(path, samples)
		var out []string
		for _, c := range convs {
			out = append(out, c.SampleID)
		}
		return out, err
	}
	all, err := ids("")
	if err != nil || !slices.Equal(all, []string{"conv-26", "conv-30", "conv-41"}) {
		t.Fatalf("the official format = %v, %v", all, err)
	}
	convs, _ := loadLoCoMo(path, "")
	if q := convs[0].Questions; len(q) != 3 || q[2].Evidence[0] != "D1:2" || !strings.Contains(convs[0].Sessions[0].Turns[1].Text, "a photo of a dog") {
		t.Errorf("conv-26 parsed as %+v", convs[0])
	}
	if got, err := ids("conv-41, conv-26"); err != nil || !slices.Equal(got, []string{"conv-26", "conv-41"}) {
		t.Errorf("--samples conv-41,conv-26 = %v, %v; want conv-26, conv-41", got, err)
	}
	if _, err := ids("conv-26,conv-99"); err == nil || !strings.Contains(err.Error(), "no sample conv-99 (it has conv-26, conv-30, conv-41)") {
		t.Errorf("--samples with an unknown id = %v", err)
	}
	if out, err := run(t, "eval", "locomo", "--data", path, "--samples", "conv-99"); err == nil || !strings.Contains(err.Error(), "conv-99") {
		t.Errorf("eval locomo --samples conv-99 = %v\n%s", err, out)
	}
}

// Issue 31: eval fleet takes its size from the flags and prints the four
// figures as JSON; a fleet too small for a hand-over is refused, naming why.
func TestEvalFleetCommand(t *testing.T) {
	out, err := run(t, "eval", "fleet", "--agents", "4", "--users", "6", "--tenants", "2", "--sessions", "2", "--seed", "3", "--json", "--data-dir", t.TempDir())
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{`"agents": 4`, `"users": 6`, `"seed": 3`, `"handover_recall": 1`, `"agent_knowledge_recall": 1`, `"tenant_knowledge_recall": 1`, `"leaks": 0`} {
		if !strings.Contains(out, want) {
			t.Fatalf("output lacks %s:\n%s", want, out)
		}
	}
	if out, err := run(t, "eval", "fleet", "--agents", "3", "--tenants", "2"); err == nil || !strings.Contains(err.Error(), "Agents is 3") {
		t.Fatalf("--agents 3 of 2 tenants: %v\n%s", err, out)
	}
}
