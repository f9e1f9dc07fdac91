package markdown

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

func entryAt(day, minute int, content string) string {
	return FormatEntry(Entry{Time: time.Date(2025, 1, day, 10, minute, 0, 0, time.UTC), Category: CategoryGeneral, Content: content})
}

func TestTrimToCapacity(t *testing.T) {
	e1, e2, e3 := entryAt(1, 0, "one"), entryAt(2, 0, "two"), entryAt(3, 0, "three") // 5 lines each
	tests := []struct {
		name          string
		doc           string
		max, target   int
		want          string
		wantDropped   int
		wantMaxLength int
	}{
		{name: "empty doc", doc: "", max: 0, target: 0, want: ""},
		{name: "at capacity is a no-op", doc: e1 + "\n" + e2, max: 11, target: 1, want: e1 + "\n" + e2},
		{name: "only preamble over capacity", doc: "a\nb\nc\n", max: 1, target: 1, want: "a\nb\nc\n"},
		{name: "drops oldest first", doc: e1 + "\n" + e2 + "\n" + e3, max: 16, target: 12, want: e2 + "\n" + e3, wantDropped: 1},
		{name: "age not position decides", doc: e3 + "\n" + e1 + "\n" + e2, max: 11, target: 11, want: e3 + "\n" + e2, wantDropped: 1},
		{name: "preamble kept, all blocks dropped when needed", doc: "# Memory\n\n" + e1 + "\n" + e2, max: 3, target: 1, want: "# Memory\n\n", wantDropped: 2},
		{name: "long-term section is a block", doc: "## 2024-12-31\n\nold fact\n\n" + e1, max: 5, target: 5, want: e1, wantDropped: 1},
		{name: "note under entry goes with it", doc: e1 + "\nnote\n\n" + e2, max: 6, target: 6, want: e2, wantDropped: 1},
		{name: "bad header date is oldest", doc: e1 + "\n### [2025-02-30 10:00] general\n\nx\n\n---\n", max: 6, target: 6, want: e1 + "\n", wantDropped: 1},
		{name: "CRLF", doc: strings.ReplaceAll(e1+"\n"+e2, "\n", "\r\n"), max: 6, target: 6, want: strings.ReplaceAll(e2, "\n", "\r\n"), wantDropped: 1},
		{name: "target above max is clamped", doc: e1 + "\n" + e2, max: 6, target: 100, want: e2, wantDropped: 1},
		{name: "negative limits", doc: e1, max: -1, target: -5, want: "", wantDropped: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, dropped := TrimToCapacity(tt.doc, tt.max, tt.target)
			if got != tt.want || dropped != tt.wantDropped {
				t.Errorf("TrimToCapacity = %q, %d; want %q, %d", got, dropped, tt.want, tt.wantDropped)
			}
		})
	}
}

func TestTrimToCapacitySpecDefaults(t *testing.T) {
	var es []Entry
	for i := range 150 { // 150 entries of 5 lines + separators: 899 lines
		es = append(es, Entry{Time: time.Date(2025, 1, 1, 0, i, 0, 0, time.UTC), Category: CategoryGeneral, Content: fmt.Sprintf("fact %d", i)})
	}
	doc := "# MEMORY\n\n" + FormatEntries(es)
	got, dropped := TrimToCapacity(doc, 500, 400)
	if n := CountLines(got); n > 400 {
		t.Fatalf("%d lines left, want <= 400", n)
	}
	kept, errs := ParseEntries(got)
	if len(errs) != 0 || len(kept)+dropped != len(es) || !sameEntries(kept, es[dropped:]) {
		t.Fatalf("kept %d entries (errors %v) after dropping %d; want the newest %d", len(kept), errs, dropped, len(es)-dropped)
	}
	if !strings.HasPrefix(got, "# MEMORY\n\n") {
		t.Errorf("preamble lost")
	}
}

// TestPropertyCapacityKeepsNewestWholeEntries covers SPEC A7/A11: the bound holds when it
// can, the kept entries are exactly the newest in their original order, and blocks are
// never split.
func TestPropertyCapacityKeepsNewestWholeEntries(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		preamble := rapid.SampledFrom([]string{"", "# Memory\n", "# Memory\n\nWritten by hand.\n"}).Draw(t, "preamble")
		es := rapid.SliceOfN(rapid.Custom(func(t *rapid.T) Entry {
			e := genEntry(t)
			// A small time range makes equal timestamps common, to exercise position order.
			e.Time = time.Date(2025, 1, 1, 0, rapid.IntRange(0, 5).Draw(t, "minute"), 0, 0, time.UTC)
			return e
		}), 0, 12).Draw(t, "entries")
		doc := AppendBlock(preamble, FormatEntries(es))
		maxLines := rapid.IntRange(0, CountLines(doc)+5).Draw(t, "max")
		target := rapid.IntRange(0, maxLines).Draw(t, "target")

		got, dropped := TrimToCapacity(doc, maxLines, target)
		if CountLines(doc) <= maxLines {
			if got != doc || dropped != 0 {
				t.Fatalf("doc within capacity was changed")
			}
			return
		}
		// Over target is allowed only when the preamble alone is: then every entry is gone.
		if CountLines(got) > target && (dropped != len(es) || !strings.HasPrefix(doc, got)) {
			t.Fatalf("%d lines left, target %d, %d of %d entries dropped", CountLines(got), target, dropped, len(es))
		}
		kept, errs := ParseEntries(got)
		if len(errs) != 0 {
			t.Fatalf("trimming split an entry: %v\n%s", errs, got)
		}
		if len(kept)+dropped != len(es) {
			t.Fatalf("kept %d + dropped %d != %d entries", len(kept), dropped, len(es))
		}
		// The kept entries are the original list minus the `dropped` oldest (stable by position).
		oldest := make(map[int]bool)
		for range dropped {
			o := -1
			for i, e := range es {
				if !oldest[i] && (o < 0 || e.Time.Before(es[o].Time)) {
					o = i
				}
			}
			oldest[o] = true
		}
		var want []Entry
		for i, e := range es {
			if !oldest[i] {
				want = append(want, e)
			}
		}
		if !sameEntries(kept, want) {
			t.Fatalf("kept %+v, want the newest %+v", kept, want)
		}
		if !strings.HasPrefix(got, preamble) {
			t.Fatalf("preamble lost: %q", got)
		}
	})
}

func TestPropertySplitBlocksTilesTheDocument(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		doc := rapid.SampledFrom([]string{"", "# Title\n\n", "note\n"}).Draw(t, "preamble")
		for i := range rapid.IntRange(0, 6).Draw(t, "n") {
			if rapid.Bool().Draw(t, "section") {
				doc = AppendBlock(doc, legacySection(time.Date(2025, 1, 1+i, 0, 0, 0, 0, time.UTC), rapid.StringMatching(`[a-z ]{1,20}`).Draw(t, "text")))
			} else {
				doc = AppendBlock(doc, FormatEntry(Entry{Time: time.Date(2025, 1, 1+i, 10, 0, 0, 0, time.UTC), Category: CategoryGeneral, Content: rapid.StringMatching(`[a-z]{1,20}`).Draw(t, "content")}))
			}
		}
		pre, blocks := SplitBlocks(doc)
		got := pre
		for _, b := range blocks {
			got += b.Text
		}
		if got != doc {
			t.Fatalf("blocks do not tile the document:\n%q\n%q", got, doc)
		}
	})
}
