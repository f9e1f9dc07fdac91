package events

import (
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// roundTrip checks that v is valid, and that marshal → unmarshal gives v back.
func roundTrip[V interface{ Validate() error }](t *rapid.T, v V) {
	if err := v.Validate(); err != nil {
		t.Fatalf("generator made an invalid %T: %v", v, err)
	}
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var got V
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatalf("unmarshal %s: %v", data, err)
	}
	if !reflect.DeepEqual(got, v) {
		t.Fatalf("round trip changed the %T\n got %#v\nwant %#v\njson %s", v, got, v, data)
	}
}

func TestEventRecordJSONRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) { roundTrip(t, genEventRecord().Draw(t, "record")) })
}

func TestTurnRecordJSONRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) { roundTrip(t, genTurnRecord().Draw(t, "turn")) })
}

func TestMemoryItemJSONRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) { roundTrip(t, genMemoryItem().Draw(t, "item")) })
}

func TestContextPackJSONRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) { roundTrip(t, genContextPack().Draw(t, "pack")) })
}

func TestSessionKeyRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		tenant, user, session := genID().Draw(t, "tenant"), genID().Draw(t, "user"), genID().Draw(t, "session")
		key, err := SessionKey(tenant, user, session)
		if err != nil {
			t.Fatal(err)
		}
		gt, gu, gs, err := ParseSessionKey(key)
		if err != nil || gt != tenant || gu != user || gs != session {
			t.Fatalf("ParseSessionKey(%q) = %q %q %q %v", key, gt, gu, gs, err)
		}
	})
	for _, bad := range []string{"", "a.b", "a.b.c.d", "a..c", "a.*.c"} {
		if _, _, _, err := ParseSessionKey(bad); !errors.Is(err, ErrInvalidRecord) {
			t.Errorf("ParseSessionKey(%q): %v", bad, err)
		}
	}
}

func TestMemoryItemIsExpired(t *testing.T) {
	created := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		item    MemoryItem
		now     time.Time
		expired bool
	}{
		{"no ttl never expires", MemoryItem{CreatedTS: created}, created.AddDate(100, 0, 0), false},
		{"before ttl", MemoryItem{CreatedTS: created, TTLSec: 60}, created.Add(59 * time.Second), false},
		{"exactly at ttl", MemoryItem{CreatedTS: created, TTLSec: 60}, created.Add(60 * time.Second), true},
		{"after ttl", MemoryItem{CreatedTS: created, TTLSec: 60}, created.Add(time.Hour), true},
		{"update renews", MemoryItem{CreatedTS: created, UpdatedTS: created.Add(time.Hour), TTLSec: 60}, created.Add(time.Hour + 30*time.Second), false},
		{"update then ttl", MemoryItem{CreatedTS: created, UpdatedTS: created.Add(time.Hour), TTLSec: 60}, created.Add(time.Hour + 61*time.Second), true},
		{"max ttl", MemoryItem{CreatedTS: created, TTLSec: MaxTTLSec}, created.AddDate(99, 0, 0), false},
		{"negative ttl treated as none", MemoryItem{CreatedTS: created, TTLSec: -5}, created.Add(time.Hour), false},
		{"other time zone", MemoryItem{CreatedTS: created, TTLSec: 60}, created.Add(61 * time.Second).In(time.FixedZone("X", 5*3600)), true},
	} {
		if got := tc.item.IsExpired(tc.now); got != tc.expired {
			t.Errorf("%s: IsExpired = %v, want %v", tc.name, got, tc.expired)
		}
	}
	if _, ok := (MemoryItem{}).ExpiresAt(); ok {
		t.Error("an item without ttl must have no expiry")
	}
}

func TestRecordValidateNamesFieldAndRule(t *testing.T) {
	started := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	item := func(mutate func(*MemoryItem)) MemoryItem {
		m := MemoryItem{Scope: ScopeUser, Kind: ItemPreference, Key: "chart_style", Content: "bar charts", Confidence: 0.8}
		mutate(&m)
		return m
	}
	turn := func(mutate func(*TurnRecord)) TurnRecord {
		tr := TurnRecord{TurnID: "t1", SessionKey: "acme.u1.s1", Status: TurnOK, StartedTS: started, FinishedTS: started.Add(time.Second)}
		mutate(&tr)
		return tr
	}
	event := func(mutate func(*EventRecord)) EventRecord {
		r := EventRecord{EventID: "e1", TS: started, SessionKey: "acme.u1.s1", SchemaVersion: 1, Type: TypeObservation,
			Obs: &Observation{Role: RoleUser, Text: "hi"}}
		mutate(&r)
		return r
	}
	pack := func(mutate func(*ContextPack)) ContextPack {
		p := ContextPack{Tenant: "acme", UserID: "u1", Persona: []MemoryItem{item(func(m *MemoryItem) { m.Scope = ScopePersona })}}
		mutate(&p)
		p.Recount()
		return p
	}
	for _, tc := range []struct {
		name string
		v    interface{ Validate() error }
		want string
	}{
		{"confidence above 1", item(func(m *MemoryItem) { m.Confidence = 1.5 }), "confidence is 1.5; it must be between 0 and 1"},
		{"confidence NaN", item(func(m *MemoryItem) { m.Confidence = math.NaN() }), "confidence is NaN"},
		{"negative confidence", item(func(m *MemoryItem) { m.Confidence = -0.1 }), "confidence is -0.1"},
		{"unknown scope", item(func(m *MemoryItem) { m.Scope = "team" }), "scope is \"team\""},
		{"unknown kind", item(func(m *MemoryItem) { m.Kind = "rumor" }), "kind is \"rumor\""},
		{"key with dot", item(func(m *MemoryItem) { m.Key = "chart.style" }), "key \"chart.style\""},
		{"session scope without session", item(func(m *MemoryItem) { m.Scope = ScopeSession }), "session_id is empty (required for scope session)"},
		{"user scope with session", item(func(m *MemoryItem) { m.SessionID = "s1" }), "session_id must be empty for scope user"},
		{"negative ttl", item(func(m *MemoryItem) { m.TTLSec = -1 }), "ttl_sec is -1"},
		{"empty content", item(func(m *MemoryItem) { m.Content = "" }), "content is required"},
		{"updated before created", item(func(m *MemoryItem) { m.CreatedTS, m.UpdatedTS = started, started.Add(-time.Second) }), "updated_ts is before created_ts"},
		{"turn status", turn(func(tr *TurnRecord) { tr.Status = "done" }), "status is \"done\""},
		{"turn without key", turn(func(tr *TurnRecord) { tr.SessionKey = "" }), "session_key is \"\""},
		{"running turn finished", turn(func(tr *TurnRecord) { tr.Status = TurnRunning }), "finished_ts must be empty while status is running"},
		{"ok turn unfinished", turn(func(tr *TurnRecord) { tr.FinishedTS = time.Time{} }), "finished_ts is required once status is ok"},
		{"turn tool call", turn(func(tr *TurnRecord) { tr.ToolCalls = []ToolCall{{Name: "a"}, {}} }), "tool_calls[1].name is required"},
		{"event version", event(func(r *EventRecord) { r.SchemaVersion = 0 }), "schema_version is 0"},
		{"event obs role", event(func(r *EventRecord) { r.Obs.Role = "bot" }), "obs.role is \"bot\""},
		{"event type", event(func(r *EventRecord) { r.Type = TypeMemoryHit }), "type is \"memory_hit\""},
		{"event gate NaN", event(func(r *EventRecord) { r.Gate = &Gate{Score: math.Inf(1)} }), "gate.score is +Inf"},
		{"pack wrong scope", pack(func(p *ContextPack) { p.Persona[0].Scope = ScopeUser }), "persona[0].scope is \"user\"; items of persona have scope \"persona\""},
		{"pack wrong kind", pack(func(p *ContextPack) { p.Chunks = []PackItem{{Kind: PackKindCore, Text: "x"}} }), "chunks[0].kind is \"core\""},
		{"pack episodic without id", pack(func(p *ContextPack) { p.EpisodicItems = []PackItem{{Kind: PackKindEpisodic, Text: "x"}} }), "episodic_items[0].id is empty"},
		{"pack provenance", pack(func(p *ContextPack) {
			p.Core = &PackItem{Kind: PackKindCore, Text: "x", Source: Provenance{EventIDs: []string{"e 1"}}}
		}), "core.source.event_ids[0]"},
		{"pack stale counts", func() ContextPack { p := pack(func(*ContextPack) {}); p.Counts.Persona = 0; return p }(), "counts is"},
	} {
		err := tc.v.Validate()
		if !errors.Is(err, ErrInvalidRecord) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Validate() = %v; want ErrInvalidRecord saying %q", tc.name, err, tc.want)
		}
	}
}

func TestRecountCountsEveryList(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := genContextPack().Draw(t, "pack")
		c := p.Counts
		lists := []int{c.Persona, c.UserProfile, c.SessionItems, c.EpisodicItems, c.SemanticItems, c.Core,
			c.Topics, c.Chunks, c.DailyNotes, c.RecentEvents, c.RecentTurns}
		sum := 0
		for _, n := range lists {
			sum += n
		}
		if c.Total != sum || c.Persona != len(p.Persona) || c.RecentTurns != len(p.RecentTurns) || (c.Core == 1) != (p.Core != nil) {
			t.Fatalf("counts %+v do not match the pack", c)
		}
		p.Chunks = append(p.Chunks, PackItem{Kind: PackKindChunk, Text: "one more"})
		if err := p.Validate(); !errors.Is(err, ErrInvalidRecord) {
			t.Fatalf("a pack whose counts are stale must be invalid, got %v", err)
		}
		p.Recount()
		if err := p.Validate(); err != nil {
			t.Fatalf("after Recount: %v", err)
		}
	})
}
