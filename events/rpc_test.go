package events

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

func TestRequestValidateNamesFieldAndRule(t *testing.T) {
	item := MemoryItem{Scope: ScopeUser, Kind: ItemFact, Key: "city", Content: "lives in Lyon", Confidence: 0.9}
	ids := make([]string, MaxIDsPerReq+1)
	for i := range ids {
		ids[i] = "m1"
	}
	for _, tc := range []struct {
		name string
		req  interface{ Validate() error }
		want string // "" means valid
	}{
		{"context ok", ContextRequest{UserID: "u1", AgentID: "excel-bot", SessionID: "s2", Query: "which columns?"}, ""},
		{"context without user", ContextRequest{Query: "q"}, "user_id is empty"},
		{"context bad session", ContextRequest{UserID: "u1", SessionID: "s/2"}, "session_id \"s/2\""},
		{"context negative tokens", ContextRequest{UserID: "u1", MaxTokens: -1}, "max_tokens is -1"},
		{"search ok", SearchRequest{UserID: "u1", Query: "sales", Limit: 5, MemoryTypes: []MemoryType{MemoryEpisodic, MemoryMarkdown}}, ""},
		{"search without query", SearchRequest{UserID: "u1"}, "query is required"},
		{"search huge limit", SearchRequest{UserID: "u1", Query: "q", Limit: MaxLimit + 1}, "limit is 1001"},
		{"search bad type", SearchRequest{UserID: "u1", Query: "q", MemoryTypes: []MemoryType{MemorySemantic, "dream"}}, "memory_types[1] is \"dream\""},
		{"append ok default slot", AppendRequest{UserID: "u1", Content: "likes csv"}, ""},
		{"append today", AppendRequest{UserID: "u1", Content: "x", Slot: SlotToday}, ""},
		{"append bad slot", AppendRequest{UserID: "u1", Content: "x", Slot: "yesterday"}, "slot is \"yesterday\""},
		{"append empty", AppendRequest{UserID: "u1"}, "content is required"},
		{"topic ok", TopicRequest{UserID: "u1", Topic: "user_prefs"}, ""},
		{"topic with .md", TopicRequest{UserID: "u1", Topic: "file_patterns.md"}, ""},
		{"topic escape", TopicRequest{UserID: "u1", Topic: "../MEMORY"}, "topic is \"../MEMORY\""},
		{"session ok", SessionRequest{UserID: "u1", SessionID: "s1"}, ""},
		{"session missing", SessionRequest{UserID: "u1"}, "session_id is empty"},
		{"add ok", AddRequest{UserID: "u1", Text: "I moved to Lyon", ChatID: "c1", Who: "alice"}, ""},
		{"add semantic", AddRequest{UserID: "u1", Text: "x", MemoryType: MemorySemantic}, ""},
		{"add item type", AddRequest{UserID: "u1", Text: "x", MemoryType: MemoryItemType}, "memory_type is \"item\""},
		{"add empty", AddRequest{UserID: "u1"}, "text is required"},
		{"add bad chat", AddRequest{UserID: "u1", Text: "x", ChatID: "c.1"}, "chat_id"},
		{"get ok", GetRequest{UserID: "u1", ID: "9b2c6f0e-1d2a-4c3b-8e7f-0a1b2c3d4e5f"}, ""},
		{"get without id", GetRequest{UserID: "u1"}, "id is empty"},
		{"update ok", UpdateRequest{UserID: "u1", ID: "m1", Metadata: map[string]any{"k": "v"}}, ""},
		{"update nothing", UpdateRequest{UserID: "u1", ID: "m1"}, "text or metadata is required"},
		{"delete ok", DeleteRequest{UserID: "u1", IDs: []string{"m1", "m2"}}, ""},
		{"delete none", DeleteRequest{UserID: "u1"}, "ids must hold at least one id"},
		{"delete bad id", DeleteRequest{UserID: "u1", IDs: []string{"m1", "*"}}, "ids[1]"},
		{"delete too many", DeleteRequest{UserID: "u1", IDs: ids}, "ids holds 1001 ids"},
		{"reset ok", ResetRequest{UserID: "u1"}, ""},
		{"reset wildcard", ResetRequest{UserID: ">"}, "user_id \">\""},
		{"history ok", HistoryRequest{UserID: "u1", ID: "m1"}, ""},
		{"history without id", HistoryRequest{UserID: "u1"}, "id is empty"},
		{"consolidate ok", ConsolidateRequest{UserID: "u1"}, ""},
		{"consolidate without user", ConsolidateRequest{}, "user_id is empty"},
		{"item save ok", ItemRequest{UserID: "u1", Item: item}, ""},
		{"item save bad confidence", ItemRequest{UserID: "u1", Item: func() MemoryItem { m := item; m.Confidence = 2; return m }()}, "item.confidence is 2"},
		{"item key ok", ItemKeyRequest{UserID: "u1", Scope: ScopeSession, Kind: ItemGoal, Key: "goal1", SessionID: "s1"}, ""},
		{"item key bad scope", ItemKeyRequest{UserID: "u1", Scope: "team", Kind: ItemGoal, Key: "k"}, "scope is \"team\""},
		{"item key bad kind", ItemKeyRequest{UserID: "u1", Scope: ScopeUser, Kind: "wish", Key: "k"}, "kind is \"wish\""},
		{"item key session missing", ItemKeyRequest{UserID: "u1", Scope: ScopeSession, Kind: ItemGoal, Key: "k"}, "session_id is empty (required for scope session)"},
		{"item scope ok", ItemScopeRequest{UserID: "u1", Scope: ScopeGlobal, Limit: 10, Offset: 20}, ""},
		{"item scope negative offset", ItemScopeRequest{UserID: "u1", Scope: ScopeUser, Offset: -1}, "offset is -1"},
		{"item scope session on user", ItemScopeRequest{UserID: "u1", Scope: ScopeUser, SessionID: "s1"}, "session_id must be empty for scope user"},
		{"item search ok", ItemSearchRequest{UserID: "u1", Query: "lyon"}, ""},
		{"item search bad scope", ItemSearchRequest{UserID: "u1", Query: "q", Scope: "all"}, "scope is \"all\""},
	} {
		err := tc.req.Validate()
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		if !errors.Is(err, ErrInvalidRequest) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Validate() = %v; want ErrInvalidRequest saying %q", tc.name, err, tc.want)
		}
	}
}

func TestTopicFile(t *testing.T) {
	for _, tc := range []struct{ topic, file string }{
		{"file_patterns", "file_patterns.md"},
		{"file_patterns.md", "file_patterns.md"},
		{"user_prefs", "user_prefs.md"},
		{"user_prefs.md", "user_prefs.md"},
	} {
		if got, err := TopicFile(tc.topic); err != nil || got != tc.file {
			t.Errorf("TopicFile(%q) = %q, %v; want %q", tc.topic, got, err, tc.file)
		}
	}
	for _, bad := range []string{"", "MEMORY", "MEMORY.md", "../user_prefs", "user_prefs.md.md", "User_Prefs", "user_prefs/", "/etc/passwd"} {
		if got, err := TopicFile(bad); !errors.Is(err, ErrUnknownTopic) {
			t.Errorf("TopicFile(%q) = %q, %v; want ErrUnknownTopic", bad, got, err)
		}
	}
	if err := (TopicRequest{UserID: "u1", Topic: "secrets"}).Validate(); !errors.Is(err, ErrUnknownTopic) || !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("TopicRequest error %v must wrap ErrInvalidRequest and ErrUnknownTopic", err)
	}
}

func TestDefaults(t *testing.T) {
	if s := (AppendRequest{}).EffectiveSlot(); s != SlotLongTerm {
		t.Errorf("default slot %q", s)
	}
	if m := (AddRequest{}).EffectiveMemoryType(); m != MemoryEpisodic {
		t.Errorf("default memory type %q", m)
	}
	if k := (Observation{}).EffectiveKind(); k != KindMessage {
		t.Errorf("default kind %q", k)
	}
}

func TestContextRequestDesignExample(t *testing.T) {
	var r ContextRequest
	if err := json.Unmarshal([]byte(`{"user_id":"u1","agent_id":"excel-bot","session_id":"s2","query":"which columns do my sales files have?"}`), &r); err != nil {
		t.Fatal(err)
	}
	if err := r.Validate(); err != nil || r.Query != "which columns do my sales files have?" || r.SessionID != "s2" {
		t.Fatalf("%+v: %v", r, err)
	}
}

// Issue 28: record_hits is true unless a request says false; a preview's false
// survives the wire.
func TestContextRequestRecordHitsDefaultsToTrue(t *testing.T) {
	for body, want := range map[string]bool{
		`{"user_id":"u1"}`:                     true,
		`{"user_id":"u1","record_hits":true}`:  true,
		`{"user_id":"u1","record_hits":false}`: false,
	} {
		var r ContextRequest
		if err := json.Unmarshal([]byte(body), &r); err != nil {
			t.Fatal(err)
		}
		if r.RecordsHits() != want {
			t.Errorf("%s: records hits %v, want %v", body, r.RecordsHits(), want)
		}
	}
	data, err := json.Marshal(ContextRequest{UserID: "u1", RecordHits: NoHits()})
	if err != nil || !strings.Contains(string(data), `"record_hits":false`) {
		t.Fatalf("a preview encodes as %s (%v)", data, err)
	}
}

// genArchive draws a valid archive: events and turns of one session.
func genArchive() *rapid.Generator[SessionArchive] {
	return rapid.Custom(func(t *rapid.T) SessionArchive {
		a := SessionArchive{
			SchemaVersion: SchemaVersion,
			Tenant:        genID().Draw(t, "tenant"),
			UserID:        genID().Draw(t, "user_id"),
			SessionID:     genID().Draw(t, "session_id"),
			ArchivedTS:    genTime().Draw(t, "archived_ts"),
			Summary:       genOptionalText().Draw(t, "summary"),
		}
		key, _ := SessionKey(a.Tenant, a.UserID, a.SessionID)
		for range rapid.IntRange(0, 3).Draw(t, "events") {
			e := genEnvelopeOf(rapid.SampledFrom([]Type{TypeObservation, TypeSessionEnded}).Draw(t, "type")).Draw(t, "event")
			e.Tenant, e.UserID, e.SessionID = a.Tenant, a.UserID, a.SessionID
			if e.Observation != nil && e.Observation.Turn != nil && e.Observation.Turn.SessionKey != "" {
				e.Observation.Turn.SessionKey = key
			}
			a.Events = append(a.Events, e)
		}
		a.Turns = nilIfEmpty(rapid.SliceOfN(genTurn(key, false, genNumberFloat()), 0, 2).Draw(t, "turns"))
		a.Items = nilIfEmpty(rapid.SliceOfN(rapid.Map(genMemoryItemIn(ScopeSession), func(m MemoryItem) MemoryItem {
			m.SessionID = a.SessionID
			return m
		}), 0, 2).Draw(t, "items"))
		return a
	})
}

func TestSessionArchiveHoldsOnlyItsSession(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a := genArchive().Draw(t, "archive")
		if err := a.Validate(); err != nil {
			t.Fatalf("generator made an invalid archive: %v", err)
		}
		data, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		var back SessionArchive
		if err := json.Unmarshal(data, &back); err != nil {
			t.Fatal(err)
		}
		if err := back.Validate(); err != nil || len(back.Events) != len(a.Events) || back.SessionID != a.SessionID {
			t.Fatalf("archive did not survive JSON: %v", err)
		}
		if len(a.Events) > 0 {
			stray := a
			stray.Events = append([]Envelope(nil), a.Events...)
			stray.Events[0].SessionID += "x"
			if err := stray.Validate(); !errors.Is(err, ErrInvalidRequest) || !strings.Contains(err.Error(), "events[0]") {
				t.Fatalf("an event of another session must be refused, got %v", err)
			}
		}
	})
	bad := SessionArchive{SchemaVersion: 1, Tenant: "acme", UserID: "u1", SessionID: "s1", ArchivedTS: time.Now(),
		Turns: []TurnRecord{{TurnID: "t1", SessionKey: "acme.u1.s2", Status: TurnRunning, StartedTS: time.Now()}}}
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "turns[0].session_key is \"acme.u1.s2\", not \"acme.u1.s1\"") {
		t.Fatalf("turn of another session: %v", err)
	}
}
