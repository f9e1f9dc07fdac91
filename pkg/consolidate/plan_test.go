package consolidate

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/agentmem/agentmem/pkg/records"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

const testDims = 16

var t0 = time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)

// axis is the unit vector along dimension i.
func axis(i int) []float32 {
	v := make([]float32, testDims)
	v[i] = 1
	return v
}

// atCosine returns a unit vector whose cosine with axis(i) is c: c·e_i + sin·e_j
// for two orthonormal axes, so thresholds are hit exactly rather than through an
// embedder.
func atCosine(i, j int, c float64) []float32 {
	v := make([]float32, testDims)
	v[i] = float32(c)
	v[j] = float32(math.Sqrt(1 - c*c))
	return v
}

// cosineGen draws cosines everywhere in [-1, 1], with extra weight at and around
// both thresholds.
func cosineGen() *rapid.Generator[float64] {
	return rapid.OneOf(
		rapid.Float64Range(-1, 1),
		rapid.SampledFrom([]float64{0.85, 0.65, 0.8499, 0.8501, 0.6499, 0.6501, 1, 0}),
		rapid.Float64Range(0.6, 0.9),
	)
}

// gapGen draws time gaps around both windows.
func gapGen() *rapid.Generator[time.Duration] {
	return rapid.OneOf(
		rapid.SampledFrom([]time.Duration{0, 30 * time.Minute, 30*time.Minute + time.Second,
			7 * 24 * time.Hour, 7*24*time.Hour + time.Second}),
		rapid.Map(rapid.Int64Range(-8*24*3600, 8*24*3600), func(s int64) time.Duration { return time.Duration(s) * time.Second }),
	)
}

// testID is a record id; with this seed testID(1) < testID(2), which pairGen
// relies on (an action's A has the smaller id).
func testID(i int) string { return vectorstore.DeterministicID("plan-test", fmt.Sprint(i)) }

// pairGen draws two episodic records with a controlled cosine, speaker, chats and
// time gap.
func pairGen(t *rapid.T) (a, b vectorstore.Record, cos float64) {
	cos = cosineGen().Draw(t, "cos")
	whoB := rapid.SampledFrom([]string{"user", "user", "Caroline"}).Draw(t, "whoB")
	chatB := rapid.SampledFrom([]string{"c1", "c1", "c2"}).Draw(t, "chatB")
	gap := gapGen().Draw(t, "gap")
	a = vectorstore.Record{ID: testID(1), MemoryType: vectorstore.Episodic, Who: "user", ChatID: "c1", TS: t0, Vector: axis(0), Text: "a"}
	b = vectorstore.Record{ID: testID(2), MemoryType: vectorstore.Episodic, Who: whoB, ChatID: chatB, TS: t0.Add(gap), Vector: atCosine(0, 1, cos), Text: "b"}
	return a, b, cos
}

// hardRulesOracle restates SPEC C7 independently of HardRulesPass.
func hardRulesOracle(a, b vectorstore.Record) bool {
	gap := a.TS.Sub(b.TS)
	if gap < 0 {
		gap = -gap
	}
	if a.Who != b.Who {
		return false
	}
	if a.ChatID == b.ChatID {
		return gap <= 30*time.Minute
	}
	return gap <= 7*24*time.Hour
}

func TestPlanThresholdsMergeIffCosineAtLeast085AndHardRulesSeparateBandNothingBelow065(t *testing.T) {
	th := DefaultThresholds()
	rapid.Check(t, func(t *rapid.T) {
		a, b, cos := pairGen(t)
		sim := Similarity(a.Vector, b.Vector)
		if math.Abs(sim-cos) > 1e-6 {
			t.Fatalf("constructed cosine %v, measured %v", cos, sim)
		}
		if got, want := HardRulesPass(a, b, th), hardRulesOracle(a, b); got != want {
			t.Fatalf("HardRulesPass = %v, want %v (who %q/%q, chat %q/%q, gap %s)", got, want, a.Who, b.Who, a.ChatID, b.ChatID, b.TS.Sub(a.TS))
		}
		plan := Plan([]vectorstore.Record{b, a}, th)
		switch {
		case sim >= 0.85 && hardRulesOracle(a, b):
			if len(plan) != 1 || plan[0].Kind != ActionMerge {
				t.Fatalf("cos %v, hard rules pass: plan %v, want one merge", sim, plan)
			}
		case sim >= 0.65:
			if len(plan) != 1 || plan[0].Kind != ActionSeparate {
				t.Fatalf("cos %v, hard rules %v: plan %v, want one separate", sim, hardRulesOracle(a, b), plan)
			}
		default:
			if len(plan) != 0 {
				t.Fatalf("cos %v below 0.65: plan %v, want nothing", sim, plan)
			}
		}
		if len(plan) == 1 && (plan[0].A.ID != a.ID || plan[0].B.ID != b.ID || plan[0].Similarity != sim) {
			t.Fatalf("action %+v: want A=%s B=%s similarity %v", plan[0], a.ID, b.ID, sim)
		}
	})
}

// A cosine exactly at a threshold is in the band above it: merged at Merge,
// separated at Separate. The default thresholds are not float32 values, so the
// property above never hits one exactly; these vectors' cosines with axis(0) are
// exactly 1/2 and 1/4.
func TestPlanThresholdsIncludeTheirBoundary(t *testing.T) {
	th := Thresholds{Merge: 0.5, Separate: 0.25}.withDefaults()
	spread := func(n int) []float32 { // n equal components of unit norm
		v := make([]float32, testDims)
		for i := range n {
			v[i] = float32(1 / math.Sqrt(float64(n)))
		}
		return v
	}
	a := vectorstore.Record{ID: testID(1), MemoryType: vectorstore.Episodic, Who: "user", ChatID: "c1", TS: t0, Vector: axis(0), Text: "a"}
	for _, c := range []struct {
		n    int
		cos  float64
		want ActionKind
	}{{4, 0.5, ActionMerge}, {16, 0.25, ActionSeparate}} {
		b := a
		b.ID, b.Vector, b.Text = testID(2), spread(c.n), "b"
		if sim := Similarity(a.Vector, b.Vector); sim != c.cos {
			t.Fatalf("cosine %v, want exactly %v", sim, c.cos)
		}
		if plan := Plan([]vectorstore.Record{a, b}, th); len(plan) != 1 || plan[0].Kind != c.want {
			t.Errorf("cosine exactly %v: plan %v, want one %v", c.cos, plan, c.want)
		}
	}
}

// episodesGen draws up to 14 episodic records whose vectors cluster around a few
// directions, so plans have merges, separations and untouched records.
func episodesGen(t *rapid.T) []vectorstore.Record {
	n := rapid.IntRange(0, 14).Draw(t, "n")
	recs := make([]vectorstore.Record, n)
	for i := range recs {
		dir := rapid.IntRange(0, 3).Draw(t, "dir")
		recs[i] = vectorstore.Record{
			ID:         testID(i),
			MemoryType: vectorstore.Episodic,
			Who:        rapid.SampledFrom([]string{"user", "user", "Caroline"}).Draw(t, "who"),
			ChatID:     rapid.SampledFrom([]string{"c1", "c2", "c3"}).Draw(t, "chat"),
			TS:         t0.Add(time.Duration(rapid.Int64Range(0, 10*24*3600).Draw(t, "sec")) * time.Second),
			Vector:     atCosine(2*dir, 2*dir+1, rapid.SampledFrom([]float64{1, 0.99, 0.95, 0.9, 0.8, 0.7}).Draw(t, "c")),
			Text:       fmt.Sprintf("memory %d", i),
			HitCount:   rapid.IntRange(0, 5).Draw(t, "hits"),
		}
	}
	return recs
}

func TestPlanEachRecordInAtMostOneActionAndMergesObeyTimeAndWhoConstraints(t *testing.T) {
	th := DefaultThresholds()
	rapid.Check(t, func(t *rapid.T) {
		recs := episodesGen(t)
		plan := Plan(recs, th)
		used := map[string]bool{}
		for _, act := range plan {
			for _, id := range []string{act.A.ID, act.B.ID} {
				if used[id] {
					t.Fatalf("record %s is in two actions: %v", id, plan)
				}
				used[id] = true
			}
			if act.A.ID >= act.B.ID {
				t.Fatalf("action ids not ordered: %s, %s", act.A.ID, act.B.ID)
			}
			switch act.Kind {
			case ActionMerge:
				if act.A.Who != act.B.Who {
					t.Fatalf("merge across speakers %q and %q", act.A.Who, act.B.Who)
				}
				gap := act.A.TS.Sub(act.B.TS).Abs()
				if act.A.ChatID == act.B.ChatID && gap > 30*time.Minute {
					t.Fatalf("same-chat merge %s apart", gap)
				}
				if gap > 7*24*time.Hour {
					t.Fatalf("cross-chat merge %s apart", gap)
				}
				if act.Similarity < 0.85 {
					t.Fatalf("merge at cosine %v", act.Similarity)
				}
			case ActionSeparate:
				if act.Similarity < 0.65 || (act.Similarity >= 0.85 && HardRulesPass(act.A, act.B, th)) {
					t.Fatalf("separate at cosine %v (hard rules %v)", act.Similarity, HardRulesPass(act.A, act.B, th))
				}
			default:
				t.Fatalf("unknown action %v", act.Kind)
			}
		}
		// Greedy leaves no pair above the separate threshold with both records free.
		for i := range recs {
			for j := i + 1; j < len(recs); j++ {
				if !used[recs[i].ID] && !used[recs[j].ID] && Similarity(recs[i].Vector, recs[j].Vector) >= th.Separate {
					t.Fatalf("records %d and %d are similar, both free, and not paired", i, j)
				}
			}
		}
	})
}

func TestPlanIsDeterministicWhateverTheInputOrder(t *testing.T) {
	th := DefaultThresholds()
	rapid.Check(t, func(t *rapid.T) {
		recs := episodesGen(t)
		shuffled := slices.Clone(recs)
		for i := len(shuffled) - 1; i > 0; i-- {
			j := rapid.IntRange(0, i).Draw(t, "swap")
			shuffled[i], shuffled[j] = shuffled[j], shuffled[i]
		}
		p1, p2 := Plan(recs, th), Plan(shuffled, th)
		if len(p1) != len(p2) {
			t.Fatalf("plans differ in length: %d vs %d", len(p1), len(p2))
		}
		for i := range p1 {
			if p1[i].Kind != p2[i].Kind || p1[i].A.ID != p2[i].A.ID || p1[i].B.ID != p2[i].B.ID || p1[i].Similarity != p2[i].Similarity {
				t.Fatalf("action %d differs: %+v vs %+v", i, p1[i], p2[i])
			}
		}
		for i := 1; i < len(p1); i++ {
			if p1[i].Similarity > p1[i-1].Similarity {
				t.Fatalf("actions not by descending similarity: %v then %v", p1[i-1].Similarity, p1[i].Similarity)
			}
		}
	})
}

func TestPlanSkipsPairsSeparatedFromEachOther(t *testing.T) {
	a := vectorstore.Record{ID: testID(1), Who: "user", ChatID: "c1", TS: t0, Vector: axis(0)}
	b := vectorstore.Record{ID: testID(2), Who: "user", ChatID: "c2", TS: t0, Vector: atCosine(0, 1, 0.7)}
	a.Metadata = map[string]any{records.MetaSeparatedFromIDs: []any{b.ID}}
	if plan := Plan([]vectorstore.Record{a, b}, DefaultThresholds()); len(plan) != 1 {
		t.Fatalf("half-separated pair: plan %v, want it separated again", plan)
	}
	b.Metadata = map[string]any{records.MetaSeparatedFromIDs: []string{a.ID}}
	if plan := Plan([]vectorstore.Record{a, b}, DefaultThresholds()); len(plan) != 0 {
		t.Fatalf("separated pair planned again: %v", plan)
	}
}

func TestMergedRecordKeepsEarliestTimeAndTracksSources(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a, b, _ := pairGen(t)
		a.HitCount, b.HitCount = rapid.IntRange(0, 9).Draw(t, "ha"), rapid.IntRange(0, 9).Draw(t, "hb")
		a.Metadata = map[string]any{records.MetaSourceChatIDs: []any{"old-chat"}, records.MetaMergedFromIDs: []any{testID(7)},
			records.MetaUpdates: []any{map[string]any{records.UpdateContext: "x"}}, "custom": "kept"}
		if rapid.Bool().Draw(t, "swap") {
			a, b = b, a
		}
		m := MergedRecord(a, b, "merged", axis(3))
		// Equal times: the smaller id counts as the earlier, as documented.
		earliest := a
		if b.TS.Before(a.TS) || (b.TS.Equal(a.TS) && b.ID < a.ID) {
			earliest = b
		}
		switch {
		case !m.TS.Equal(earliest.TS) || m.ChatID != earliest.ChatID || m.Metadata[records.MetaTime] != records.FormatTime(earliest.TS):
			t.Fatalf("merged time %v chat %q, want the earliest %v %q", m.TS, m.ChatID, earliest.TS, earliest.ChatID)
		case m.HitCount != a.HitCount+b.HitCount:
			t.Fatalf("hit count %d, want %d", m.HitCount, a.HitCount+b.HitCount)
		case m.Who != a.Who || m.Text != "merged" || m.Metadata[records.MetaThing] != "merged":
			t.Fatalf("who %q text %q thing %v", m.Who, m.Text, m.Metadata[records.MetaThing])
		case m.ID != MergedRecord(b, a, "other", nil).ID || m.ID != vectorstore.DeterministicID("merge", min(a.ID, b.ID), max(a.ID, b.ID)):
			t.Fatalf("merged id %s depends on argument order or is not the deterministic one", m.ID)
		case m.Metadata["custom"] != "kept" || len(records.AnyList(m.Metadata[records.MetaUpdates])) != 1:
			t.Fatalf("metadata not carried over: %v", m.Metadata)
		}
		sources, merged := records.StringList(m.Metadata[records.MetaSourceChatIDs]), records.StringList(m.Metadata[records.MetaMergedFromIDs])
		for _, want := range []string{a.ChatID, b.ChatID, "old-chat"} {
			if !slices.Contains(sources, want) {
				t.Fatalf("source_chat_ids %v lacks %q", sources, want)
			}
		}
		for _, want := range []string{a.ID, b.ID, testID(7)} {
			if !slices.Contains(merged, want) {
				t.Fatalf("merged_from_ids %v lacks %q", merged, want)
			}
		}
		if !slices.IsSortedFunc(sources, cmp.Compare[string]) || len(slices.Compact(slices.Clone(sources))) != len(sources) {
			t.Fatalf("source_chat_ids %v not a sorted set", sources)
		}
	})
}

func TestThresholdsValidate(t *testing.T) {
	for _, th := range []Thresholds{
		{Merge: 0.6, Separate: 0.7},
		{Merge: 1.5, Separate: 0.5},
		{Merge: 0.85, Separate: 0.65, SameChatWindow: -time.Second},
	} {
		if err := th.Validate(); err == nil {
			t.Errorf("%+v: no error", th)
		}
	}
	if err := DefaultThresholds().Validate(); err != nil {
		t.Fatal(err)
	}
}
