package eval

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/app/apptest"
	"github.com/agentmem/agentmem/pkg/bus/bustest"
)

// fixture is a tiny LoCoMo-format file: two conversations, three sessions, 17
// turns, nine questions with every kind of evidence defect and one adversarial
// question.
const fixture = `[
 {"sample_id": "conv-a",
  "conversation": {
   "speaker_a": "Alice", "speaker_b": "Bob",
   "session_2_date_time": "10:37 am on 27 June, 2023",
   "session_2": [
    {"speaker": "Alice", "dia_id": "D2:1", "text": "I ran my first marathon in Boston yesterday and finished in four hours."},
    {"speaker": "Bob", "dia_id": "D2:2", "text": "Congratulations! Biscuit chewed my favourite hiking boots."},
    {"speaker": "Alice", "dia_id": "D2:3", "text": "I am planning a trip to Kyoto to see the temples in autumn."},
    {"speaker": "Bob", "dia_id": "D2:4", "text": "I bought a sailboat and named it Seabreeze.", "blip_caption": "a photo of a white sailboat in a harbor"},
    {"speaker": "Alice", "dia_id": "D2:5", "text": "Talk soon!"}
   ],
   "session_1_date_time": "1:56 pm on 8 May, 2023",
   "session_1": [
    {"speaker": "Alice", "dia_id": "D1:1", "text": "Hi Bob! How have you been?"},
    {"speaker": "Bob", "dia_id": "D1:2", "text": "Great! I adopted a golden retriever puppy named Biscuit last week."},
    {"speaker": "Alice", "dia_id": "D1:3", "text": "That is wonderful. I started learning the violin in March."},
    {"speaker": "Bob", "dia_id": "D1:4", "text": "I work as a marine biologist studying coral reefs in Hawaii."},
    {"speaker": "Alice", "dia_id": "D1:5", "text": "My sister Clara lives in Lisbon and teaches chemistry at a school."},
    {"speaker": "Bob", "dia_id": "D1:6", "text": "See you soon!"}
   ]},
  "qa": [
   {"question": "What is the name of Bob's puppy?", "answer": "Biscuit", "evidence": ["D1:2"], "category": 4},
   {"question": "When did Alice run her first marathon?", "answer": "26 June 2023", "evidence": ["D2:1"], "category": 2},
   {"question": "Which instrument does Alice learn and which race did she run?", "answer": "violin, marathon", "evidence": ["D1:3; D2:1"], "category": 1},
   {"question": "Where does Alice's sister live?", "answer": "Lisbon", "evidence": ["D:1:5"], "category": 4},
   {"question": "What did Bob name his sailboat?", "answer": "Seabreeze", "evidence": ["D2:4", "D"], "category": 4},
   {"question": "What does Bob study in Hawaii?", "answer": "coral reefs", "evidence": ["D1:4", "D9:9"], "category": 4},
   {"question": "Would Bob like cats?", "answer": "unclear", "evidence": [], "category": 3},
   {"question": "What did Alice name her puppy?", "adversarial_answer": "Biscuit", "evidence": ["D1:2"], "category": 5}
  ]},
 {"sample_id": "conv-b",
  "conversation": {
   "speaker_a": "Carol", "speaker_b": "Dan",
   "session_1_date_time": "7:55 pm on 9 June, 2023",
   "session_1": [
    {"speaker": "Carol", "dia_id": "D1:1", "text": "I just got a job as a pastry chef in Montreal."},
    {"speaker": "Dan", "dia_id": "D1:2", "text": "I grow tomatoes and peppers in my rooftop garden."},
    {"speaker": "Carol", "dia_id": "D1:3", "text": "My brother Ethan collects vintage typewriters."},
    {"speaker": "Dan", "dia_id": "D1:4", "text": "I am learning Portuguese because my wife is from Porto."},
    {"speaker": "Carol", "dia_id": "D1:5", "text": "Nice!"},
    {"speaker": "Dan", "dia_id": "D1:6", "text": "Bye for now."}
   ]},
  "qa": [
   {"question": "Where does Carol work as a pastry chef?", "answer": "Montreal", "evidence": ["D1:1"], "category": 4}
  ]}
]`

func parseFixture(t *testing.T) []Conversation {
	t.Helper()
	convs, err := ParseLoCoMo(strings.NewReader(fixture))
	if err != nil {
		t.Fatalf("ParseLoCoMo: %v", err)
	}
	return convs
}

func TestParseLoCoMo(t *testing.T) {
	convs := parseFixture(t)
	if len(convs) != 2 {
		t.Fatalf("got %d conversations, want 2", len(convs))
	}
	a := convs[0]
	if a.SampleID != "conv-a" || len(a.Sessions) != 2 || len(a.Questions) != 8 || len(a.Turns()) != 11 {
		t.Fatalf("conv-a: id %q, %d sessions, %d questions, %d turns", a.SampleID, len(a.Sessions), len(a.Questions), len(a.Turns()))
	}
	s1, s2 := a.Sessions[0], a.Sessions[1]
	if s1.Number != 1 || s2.Number != 2 {
		t.Errorf("sessions out of order: %d, %d", s1.Number, s2.Number)
	}
	if want := time.Date(2023, time.May, 8, 13, 56, 0, 0, time.UTC); !s1.DateParsed || !s1.Start.Equal(want) {
		t.Errorf("session 1 starts %v (parsed %v), want %v", s1.Start, s1.DateParsed, want)
	}
	if got, want := s2.Turns[3].Text, "I bought a sailboat and named it Seabreeze. [shares a photo: a photo of a white sailboat in a harbor]"; got != want {
		t.Errorf("photo turn text = %q, want %q", got, want)
	}
	if got := a.Turns()[1].Line(); got != "Bob: Great! I adopted a golden retriever puppy named Biscuit last week." {
		t.Errorf("Line = %q", got)
	}
	if q := a.Questions[7]; q.Category != Adversarial || !slices.Equal(q.Evidence, []string{"D1:2"}) {
		t.Errorf("adversarial question = %+v", q)
	}

	for _, bad := range []string{`{"not": "a list"}`, `[{"sample_id": "x", "conversation": {"session_1": "text"}}]`, `nope`} {
		if _, err := ParseLoCoMo(strings.NewReader(bad)); !errors.Is(err, ErrInvalidData) {
			t.Errorf("ParseLoCoMo(%s) = %v, want ErrInvalidData", bad, err)
		}
	}
}

func TestParseSessionDate(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Time
		ok   bool
	}{
		{"1:56 pm on 8 May, 2023", time.Date(2023, 5, 8, 13, 56, 0, 0, time.UTC), true},
		{"10:37 AM on 27 June, 2023", time.Date(2023, 6, 27, 10, 37, 0, 0, time.UTC), true},
		{"  7:55  pm on 9 June, 2023 ", time.Date(2023, 6, 9, 19, 55, 0, 0, time.UTC), true},
		{"9 June 2023", time.Date(2023, 6, 9, 0, 0, 0, 0, time.UTC), true},
		{"sometime in June", time.Time{}, false},
		{"", time.Time{}, false},
	} {
		got, ok := parseSessionDate(tc.in)
		if ok != tc.ok || !got.Equal(tc.want) {
			t.Errorf("parseSessionDate(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestUndatedSessionFollowsPrevious(t *testing.T) {
	convs, err := ParseLoCoMo(strings.NewReader(`[{"sample_id": "x", "conversation": {
		"session_1_date_time": "1:56 pm on 8 May, 2023", "session_1": [{"speaker": "A", "dia_id": "D1:1", "text": "hi"}],
		"session_2_date_time": "???", "session_2": [{"speaker": "B", "dia_id": "D2:1", "text": "yo"}]}, "qa": []}]`))
	if err != nil {
		t.Fatal(err)
	}
	s := convs[0].Sessions
	if s[1].DateParsed || !s[1].Start.Equal(s[0].Start.Add(24*time.Hour)) {
		t.Errorf("undated session 2 starts %v (parsed %v), want a day after %v", s[1].Start, s[1].DateParsed, s[0].Start)
	}
}

func TestParseEvidence(t *testing.T) {
	known := func(id string) bool { return id != "D9:9" }
	for _, tc := range []struct {
		name string
		in   []string
		want []string
		st   EvidenceStats
	}{
		{"well formed", []string{"D1:2", "D10:3"}, []string{"D1:2", "D10:3"}, EvidenceStats{IDs: 2}},
		{"semicolon joined", []string{"D8:6; D9:17"}, []string{"D8:6", "D9:17"}, EvidenceStats{IDs: 2, Joined: 1}},
		{"space and comma joined", []string{"D1:1 D1:2,D1:3"}, []string{"D1:1", "D1:2", "D1:3"}, EvidenceStats{IDs: 3, Joined: 1}},
		{"extra colon repaired", []string{"D:11:26"}, []string{"D11:26"}, EvidenceStats{IDs: 1, Repaired: 1}},
		{"bare D dropped", []string{"D", "D2:4"}, []string{"D2:4"}, EvidenceStats{IDs: 1, Bare: 1}},
		{"unknown turn dropped", []string{"D1:4", "D9:9"}, []string{"D1:4"}, EvidenceStats{IDs: 1, Unknown: 1}},
		{"ambiguous dropped", []string{"D1:2:3", "x7:1"}, nil, EvidenceStats{Malformed: 2}},
		{"duplicate once", []string{"D1:2", "D01:2"}, []string{"D1:2"}, EvidenceStats{IDs: 1, Duplicate: 1}},
		{"empty", nil, nil, EvidenceStats{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, st := ParseEvidence(tc.in, known)
			if !slices.Equal(got, tc.want) || st != tc.st {
				t.Errorf("ParseEvidence(%q) = %q, %+v; want %q, %+v", tc.in, got, st, tc.want, tc.st)
			}
		})
	}
}

var canonical = regexp.MustCompile(`^D(0|[1-9][0-9]*):(0|[1-9][0-9]*)$`)

// Whatever the evidence strings, ParseEvidence returns only canonical, known,
// distinct ids, accounts for each of them, and is a fixed point on its own output.
func TestParseEvidenceReturnsOnlyCanonicalKnownIDs(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		token := rapid.OneOf(
			rapid.StringMatching(`D[0-9]{1,3}:[0-9]{1,3}`),
			rapid.StringMatching(`[Dd]?[:;, -]{0,2}[0-9]{0,3}[:;, -]{0,2}[0-9]{0,3}`),
			rapid.String(),
		)
		raw := rapid.SliceOfN(rapid.Custom(func(t *rapid.T) string {
			return strings.Join(rapid.SliceOfN(token, 0, 3).Draw(t, "tokens"), rapid.SampledFrom([]string{"; ", ",", " ", ""}).Draw(t, "sep"))
		}), 0, 5).Draw(t, "evidence")
		unknownSession := rapid.IntRange(0, 9).Draw(t, "unknownSession")
		known := func(id string) bool { return !strings.HasPrefix(id, "D"+string(rune('0'+unknownSession))+":") }

		ids, st := ParseEvidence(raw, known)
		if st.IDs != len(ids) {
			t.Fatalf("IDs = %d but %d ids returned", st.IDs, len(ids))
		}
		seen := map[string]bool{}
		for _, id := range ids {
			if !canonical.MatchString(id) || !known(id) || seen[id] {
				t.Fatalf("ParseEvidence(%q) returned %q (canonical %v, known %v, repeated %v)", raw, id, canonical.MatchString(id), known(id), seen[id])
			}
			seen[id] = true
		}
		again, st2 := ParseEvidence(ids, known)
		if !slices.Equal(again, ids) || st2 != (EvidenceStats{IDs: len(ids)}) {
			t.Fatalf("reparsing %q gave %q, %+v", ids, again, st2)
		}
	})
}

func TestRecallAtK(t *testing.T) {
	items := []Item{
		{DiaIDs: []string{"D1:1"}},
		{},                                 // no provenance: takes a rank, finds nothing
		{DiaIDs: []string{"D1:3", "D2:1"}}, // a merged memory names two turns
		{DiaIDs: []string{"D1:1"}},         // a repeat adds nothing
		{DiaIDs: []string{"D3:3"}},
	}
	for _, tc := range []struct {
		evidence []string
		k        int
		want     float64
		ok       bool
	}{
		{[]string{"D1:1"}, 1, 1, true},
		{[]string{"D1:1", "D2:1"}, 2, 0.5, true},
		{[]string{"D1:1", "D2:1"}, 3, 1, true},
		{[]string{"D1:3", "D2:1", "D3:3", "D9:9"}, 4, 0.5, true},
		{[]string{"D1:3", "D2:1", "D3:3", "D9:9"}, 50, 0.75, true},
		{[]string{"D9:9"}, 50, 0, true},
		{nil, 5, 0, false},
	} {
		got, ok := RecallAtK(tc.evidence, items, tc.k)
		if got != tc.want || ok != tc.ok {
			t.Errorf("RecallAtK(%q, k=%d) = %v, %v; want %v, %v", tc.evidence, tc.k, got, ok, tc.want, tc.ok)
		}
	}
}

func TestPackItemsOrder(t *testing.T) {
	prov := func(ids ...string) events.Provenance {
		p := events.Provenance{}
		for _, id := range ids {
			p.Meta = append(p.Meta, map[string]any{MetaDiaID: id, "speaker": "x"})
		}
		return p
	}
	pack := events.ContextPack{
		EpisodicItems: []events.PackItem{{ID: "e1", Score: 0.9, Text: "abcd", Source: prov("D1:1")}, {ID: "e2", Score: 0.5, Context: []string{"A: hello", "B: hi there"}, Source: prov("D1:2")}},
		SemanticItems: []events.PackItem{{ID: "s1", Score: 0.7, Source: prov("D2:1", "D2:2", "D2:1")}, {ID: "s0", Score: 0.5, Source: prov("D2:3")}},
		Chunks:        []events.PackItem{{ID: "MEMORY.md#L1-2", Score: 9, Text: "abcde"}},
		Core:          &events.PackItem{Text: "core", Source: prov("D9:9")},
	}
	got := PackItems(pack)
	want := []Item{
		{DiaIDs: []string{"D1:1"}, Tokens: 1},
		{DiaIDs: []string{"D2:1", "D2:2"}},
		{DiaIDs: []string{"D1:2"}, Tokens: 2 + 3}, // ties by id: e2 before s0; the context shown with it counts
		{DiaIDs: []string{"D2:3"}},
		{Tokens: 2},
	}
	if len(got) != len(want) {
		t.Fatalf("PackItems = %+v, want %+v", got, want)
	}
	for i := range want {
		if !slices.Equal(got[i].DiaIDs, want[i].DiaIDs) || got[i].Tokens != want[i].Tokens {
			t.Errorf("item %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestBaselines(t *testing.T) {
	a := parseFixture(t)[0]
	for _, b := range []struct {
		name string
		r    Retriever
	}{{"bm25 turns", NewTurnsBM25(a)}, {"MEMORY.md chunks", NewMemoryFileChunks(a)}} {
		t.Run(b.name, func(t *testing.T) {
			for q, want := range map[string]string{
				"What is the name of Bob's puppy?": "D1:2",
				"What did Bob name his sailboat?":  "D2:4",
				"Where does Alice's sister live?":  "D1:5",
			} {
				items := b.r.Retrieve(q, 3)
				if len(items) == 0 || !slices.Contains(items[0].DiaIDs, want) || items[0].Tokens == 0 {
					t.Errorf("Retrieve(%q) = %+v, want %s first", q, items, want)
				}
			}
			if items := b.r.Retrieve("Alice Bob", 50); len(items) > 50 {
				t.Errorf("Retrieve returned %d items for limit 50", len(items))
			}
		})
	}

	m := NewMemoryFileChunks(a)
	if !strings.Contains(m.Doc(), "## Session 2 (27 June 2023)\n\nAlice: I ran my first marathon") {
		t.Errorf("MEMORY.md lacks the session heading before its first turn:\n%s", m.Doc())
	}
	// Every turn is found in exactly one chunk, and no chunk names a turn twice.
	all := m.Retrieve("Alice Bob", 1000)
	var ids []string
	for _, it := range all {
		ids = append(ids, it.DiaIDs...)
	}
	slices.Sort(ids)
	var turns []string
	for _, tr := range a.Turns() {
		turns = append(turns, tr.DiaID)
	}
	slices.Sort(turns)
	if !slices.Equal(ids, turns) {
		t.Errorf("chunks name turns %q, want each of %q once", ids, turns)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, ks := range [][]int{{0, 5}, {5, 5}, {10, 5}, {5, events.MaxLimit + 1}} {
		if _, err := New(Config{Ks: ks}, nil); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "Ks") {
			t.Errorf("New(Ks %v) = %v, want ErrInvalidConfig naming Ks", ks, err)
		}
	}
	if _, err := New(Config{IdleTimeout: -time.Second}, nil); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("negative IdleTimeout accepted: %v", err)
	}
	if _, err := New(Config{}, nil); err != nil {
		t.Errorf("defaults rejected: %v", err)
	}
}

func TestTenantIDs(t *testing.T) {
	got := tenantIDs([]Conversation{{SampleID: "conv-26"}, {SampleID: "conv 26/x"}, {SampleID: "conv-26"}, {SampleID: ""}})
	want := []string{"conv-26", "conv-26-x", "conv-26-3", "4"}
	if !slices.Equal(got, want) {
		t.Errorf("tenantIDs = %q, want %q", got, want)
	}
	for _, id := range got {
		if err := events.ValidateID("tenant", id); err != nil {
			t.Error(err)
		}
	}
}

// The whole evaluation on the fixture: the real pipeline in-process, replay,
// consolidation, context packs, baselines, report.
func TestRunEndToEnd(t *testing.T) {
	convs := parseFixture(t)
	var progress, traces bytes.Buffer
	dir := t.TempDir()
	ev, err := New(Config{Ks: []int{1, 5, 50}, DataDir: dir, Progress: &progress, IdleTimeout: time.Minute, Questions: &traces}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := ev.Run(ctx, convs)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}

	// Issue 28: the questions only look at the memory (record_hits false).
	if hits := publishedHits(t, dir); hits != 0 {
		t.Errorf("the questions published %d memory_hit events, want none", hits)
	}
	if rep.Embedder != "local-hash-v2-384" || rep.Fusion != "keyword only" {
		t.Errorf("embedder %q, fusion %q; want the local embedder's name and keyword recall", rep.Embedder, rep.Fusion)
	}
	if rep.Conversations != 2 || rep.Sessions != 3 || rep.Turns != 17 || rep.UndatedSessions != 0 {
		t.Errorf("counts: %d conversations, %d sessions, %d turns, %d undated", rep.Conversations, rep.Sessions, rep.Turns, rep.UndatedSessions)
	}
	q := rep.Questions
	if q.Total != 9 || q.NoEvidence != 1 || q.Scored != 7 || q.ScoredAdversarial != 1 || q.PerCategory["single-hop"] != 5 {
		t.Errorf("questions = %+v", q)
	}
	if e := rep.Evidence; e.Joined != 1 || e.Repaired != 1 || e.Bare != 1 || e.Unknown != 1 || e.IDs != 9 {
		t.Errorf("evidence stats = %+v", e)
	}
	var names []string
	for _, s := range rep.Systems {
		names = append(names, s.Name)
		for _, k := range []string{"1", "5", "50"} {
			if v, ok := s.Recall[k]; !ok || v < 0 || v > 100 {
				t.Errorf("%s recall@%s = %v, %v", s.Name, k, v, ok)
			}
		}
		if s.Recall["1"] > s.Recall["5"] || s.Recall["5"] > s.Recall["50"] {
			t.Errorf("%s recall falls with k: %v", s.Name, s.Recall)
		}
		if _, ok := s.PerCategory["adversarial"]; !ok {
			t.Errorf("%s has no adversarial row: %v", s.Name, s.PerCategory)
		}
	}
	if !slices.Equal(names, []string{SystemAgentmem, SystemBM25Turns, SystemMemoryFile}) {
		t.Errorf("systems = %q", names)
	}
	if rep.Anchor.Name != SystemDragon || rep.Anchor.Recall["5"] != 58.8 || rep.Anchor.Recall["50"] != 84.8 {
		t.Errorf("anchor = %+v", rep.Anchor)
	}
	if _, ok := rep.Anchor.Recall["1"]; ok {
		t.Errorf("anchor invents a recall@1: %v", rep.Anchor.Recall)
	}
	if rep.ContextTokensMean <= 0 || rep.ConversationTokensMean <= 0 || rep.EvidenceStoredPercent <= 0 {
		t.Errorf("tokens: context %v, conversation %v; evidence stored %v", rep.ContextTokensMean, rep.ConversationTokensMean, rep.EvidenceStoredPercent)
	}

	// The puppy is named in one first-person turn: agentmem must find it in its
	// first five items.
	found := false
	for _, r := range rep.PerQuestion {
		if r.Question == "What is the name of Bob's puppy?" {
			found = true
			if got := r.Recall[SystemAgentmem][1]; got != 1 {
				t.Errorf("agentmem recall@5 of the puppy question = %v, want 1", got)
			}
		}
	}
	if !found || len(rep.PerQuestion) != 9 {
		t.Errorf("per-question results: %d, puppy question found %v", len(rep.PerQuestion), found)
	}

	// --questions: a JSON line per question; the puppy's has its evidence turn
	// and the first item holding it, and the question without usable evidence
	// says so.
	lines := strings.Split(strings.TrimSpace(traces.String()), "\n")
	if len(lines) != 9 {
		t.Fatalf("%d question traces, want 9:\n%s", len(lines), traces.String())
	}
	unscored := 0
	for _, l := range lines {
		var tr QuestionTrace
		if err := json.Unmarshal([]byte(l), &tr); err != nil {
			t.Fatalf("trace %q: %v", l, err)
		}
		if tr.RecallAt10 < 0 {
			unscored++
			continue
		}
		if len(tr.Items) == 0 || len(tr.Items) > 10 || len(tr.Evidence) == 0 {
			t.Errorf("trace of %q: %d items, evidence %v", tr.Question, len(tr.Items), tr.Evidence)
		}
		if tr.Question == "What is the name of Bob's puppy?" {
			for id, text := range tr.Evidence {
				rank := tr.EvidenceRanks[id]
				if !strings.HasPrefix(text, "Bob: ") || rank < 1 || rank > 5 || !slices.Contains(tr.Items[rank-1].DiaIDs, id) || tr.RecallAt10 != 1 {
					t.Errorf("puppy trace: evidence %s %q at rank %d, items %+v", id, text, rank, tr.Items)
				}
			}
		}
	}
	if unscored != 1 {
		t.Errorf("%d traces without usable evidence, want 1", unscored)
	}

	for _, want := range []string{"[1/2] conv-a: replaying session 2/2", "[2/2] conv-b: 1/1 questions"} {
		if !strings.Contains(progress.String(), want) {
			t.Errorf("progress lacks %q:\n%s", want, progress.String())
		}
	}
	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"R@50", "agentmem", "bm25-turns", "memory-md-chunks", "paper-dragon (paper)", "Category 5 adversarial", "1 bare \"D\"", "long-term compression (dry run)", "session summaries: 0 sessions"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
	data, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"systems", "anchor", "context_tokens_mean", "context_tokens_at_k", "context_share_percent_at_k", "conversation_tokens_mean", "evidence", "questions"} {
		if _, ok := back[key]; !ok {
			t.Errorf("JSON lacks %q: %s", key, data)
		}
	}
}

// publishedHits counts the memory_hit events in the event stream of the stack
// whose data is in dir, started again on it.
func publishedHits(t *testing.T, dir string) int {
	t.Helper()
	st, _ := apptest.Up(t, "AGENTMEM_DATA_DIR="+dir)
	n := 0
	for _, e := range bustest.StreamEvents(t, st.Runtime().JS, "mem.") {
		if e.Type == events.TypeMemoryHit {
			n++
		}
	}
	return n
}
