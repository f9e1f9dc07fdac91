package retrieve

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentmem/agentmem/events"
)

// message is a session message of about 25 tokens, i minutes after t0.
func message(i int) events.EventRecord {
	return events.EventRecord{EventID: fmt.Sprintf("m%d", i), Type: events.TypeObservation, TS: time.Unix(0, 0).Add(time.Duration(i) * time.Minute),
		Obs: &events.Observation{Role: events.RoleUser, Text: fmt.Sprintf("message %d %s", i, strings.Repeat("x", 90))}}
}

func messageIDs(list []events.EventRecord) []string {
	var out []string
	for _, e := range list {
		out = append(out, e.EventID)
	}
	return out
}

func itemIDs(list []events.PackItem) []string {
	var out []string
	for _, it := range list {
		out = append(out, it.ID)
	}
	return out
}

// A budget too small for the whole session keeps its newest messages (the list
// is oldest first) and the newest daily notes (that list is newest first).
func TestRenderKeepsTheNewest(t *testing.T) {
	pack := events.ContextPack{RecentEvents: []events.EventRecord{message(0), message(1), message(2), message(3), message(4)}}
	render(&pack, 60, noShares) // two messages of about 25 tokens and the heading
	if got := messageIDs(pack.RecentEvents); !slices.Equal(got, []string{"m3", "m4"}) || strings.Contains(pack.Prompt, "message 2") {
		t.Fatalf("kept messages %v, want the newest two [m3 m4]; prompt:\n%s", got, pack.Prompt)
	}
	note := func(day string) events.PackItem {
		return events.PackItem{ID: "202611/202611" + day + ".md", Kind: events.PackKindDailyNote, Text: "note of the " + day + "th " + strings.Repeat("n", 90)}
	}
	pack = events.ContextPack{DailyNotes: []events.PackItem{note("22"), note("21"), note("20")}}
	render(&pack, 80, noShares) // two notes of about 33 tokens and the heading
	if got := itemIDs(pack.DailyNotes); !slices.Equal(got, []string{"202611/20261122.md", "202611/20261121.md"}) {
		t.Fatalf("kept daily notes %v, want the newest two; prompt:\n%s", got, pack.Prompt)
	}
}

// A context pack cut to fit one message keeps the newest session messages and
// turns (both lists oldest first), and the best-ranked of the other lists.
func TestPackCutKeepsTheNewest(t *testing.T) {
	turns := []events.TurnRecord{{TurnID: "t0"}, {TurnID: "t1"}, {TurnID: "t2"}}
	pack := events.ContextPack{
		RecentEvents: []events.EventRecord{message(0), message(1), message(2), message(3)},
		DailyNotes:   []events.PackItem{{ID: "d22", Text: "newest"}, {ID: "d21", Text: "older"}},
		RecentTurns:  turns,
	}
	render(&pack, 10000, noShares) // as the context endpoint does before fitting the reply
	cut := packCut(pack).keep(2).(events.ContextPack)
	if got := messageIDs(cut.RecentEvents); !slices.Equal(got, []string{"m2", "m3"}) || len(cut.DailyNotes) != 0 || len(cut.RecentTurns) != 0 || !cut.Truncated {
		t.Fatalf("keep(2): messages %v, notes %v, turns %d; want [m2 m3] only", got, itemIDs(cut.DailyNotes), len(cut.RecentTurns))
	}
	cut = packCut(pack).keep(7).(events.ContextPack)
	var kept []string
	for _, tr := range cut.RecentTurns {
		kept = append(kept, tr.TurnID)
	}
	if got := itemIDs(cut.DailyNotes); !slices.Equal(got, []string{"d22", "d21"}) || !slices.Equal(kept, []string{"t2"}) || len(cut.RecentEvents) != 4 {
		t.Fatalf("keep(7): notes %v, turns %v, messages %d; want both notes, the newest turn [t2], every message", got, kept, len(cut.RecentEvents))
	}
	if len(pack.RecentEvents) != 4 || pack.RecentEvents[0].EventID != "m0" {
		t.Fatal("the cut changed the pack it was given")
	}
}

// A history cut to fit keeps the newest changes (the list is oldest first).
func TestHistoryCutKeepsTheNewest(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	reply := events.HistoryReply{ID: "mem1", Changes: []events.Change{{TS: t0, Op: "add"}, {TS: t0.Add(time.Hour), Op: "update"}, {TS: t0.Add(2 * time.Hour), Op: "delete"}}}
	cut := historyCut(reply).keep(2).(events.HistoryReply)
	if len(cut.Changes) != 2 || cut.Changes[0].Op != "update" || cut.Changes[1].Op != "delete" || cut.ID != "mem1" || !cut.Truncated {
		t.Fatalf("cut history %+v; want the newest two changes [update delete] of mem1, truncated", cut)
	}
}
