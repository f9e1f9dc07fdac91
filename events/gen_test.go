package events

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"pgregory.net/rapid"
)

// Generators of valid values of the contract, shared by the property tests. Empty
// optional slices and maps are drawn as nil, because that is what a JSON round trip
// of an omitempty field gives back.

func genID() *rapid.Generator[string] {
	return rapid.OneOf(
		rapid.StringMatching(`[A-Za-z0-9_-]{1,12}`),
		rapid.StringMatching(`[A-Za-z0-9_-]{1,128}`),
	)
}

func genOptionalID() *rapid.Generator[string] {
	return rapid.OneOf(rapid.Just(""), genID())
}

// genBadID draws a string ValidateID must reject.
func genBadID() *rapid.Generator[string] {
	return rapid.OneOf(
		rapid.Just(""),
		rapid.StringMatching(`[A-Za-z0-9_-]{129,140}`),
		rapid.Custom(func(t *rapid.T) string {
			id := genID().Draw(t, "id")
			bad := rapid.SampledFrom([]string{".", "*", ">", " ", "/", "..", "\x00", "é", "\n", ":", "~", "\t"}).Draw(t, "bad")
			at := rapid.IntRange(0, len(id)).Draw(t, "at")
			return id[:at] + bad + id[at:]
		}),
	)
}

func genTime() *rapid.Generator[time.Time] {
	return rapid.Custom(func(t *rapid.T) time.Time {
		sec := rapid.Int64Range(0, 4102444800).Draw(t, "sec") // 1970..2100
		nsec := rapid.Int64Range(0, 999_999_999).Draw(t, "nsec")
		return time.Unix(sec, nsec).UTC()
	})
}

func genText() *rapid.Generator[string] {
	return rapid.OneOf(rapid.StringN(1, 40, -1), rapid.SampledFrom([]string{
		"Remember: my sales files have columns date, product, qty.",
		"<b>&amp;</b> \"quoted\" \\ back",
		"多言語 テキスト ✓",
	}))
}

func genOptionalText() *rapid.Generator[string] {
	return rapid.OneOf(rapid.Just(""), genText())
}

// genNumberJSON draws JSON numbers as Decode returns them (json.Number).
func genNumberJSON() *rapid.Generator[any] {
	return rapid.Map(rapid.Int64(), func(n int64) any { return json.Number(strconv.FormatInt(n, 10)) })
}

// genNumberFloat draws JSON numbers as json.Unmarshal returns them (float64).
func genNumberFloat() *rapid.Generator[any] {
	return rapid.Map(rapid.Float64Range(-1e12, 1e12), func(f float64) any { return f })
}

// genMeta draws free meta maps, nil when empty; number says how numbers come back.
func genMeta(number *rapid.Generator[any]) *rapid.Generator[map[string]any] {
	leaf := rapid.OneOf(rapid.Map(genText(), func(s string) any { return s }), rapid.Map(rapid.Bool(), func(b bool) any { return b }), number)
	value := rapid.OneOf(leaf, rapid.Map(rapid.MapOfN(rapid.StringN(1, 8, -1), leaf, 1, 3), func(m map[string]any) any { return m }))
	return rapid.Map(rapid.MapOfN(rapid.StringN(1, 10, -1), value, 0, 4), nilIfEmptyMap)
}

func nilIfEmptyMap(m map[string]any) map[string]any {
	if len(m) == 0 {
		return nil
	}
	return m
}

func nilIfEmpty[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return s
}

func genIDs(minLen int) *rapid.Generator[[]string] {
	return rapid.Map(rapid.SliceOfN(genID(), minLen, 4), nilIfEmpty[string])
}

func genToolCall() *rapid.Generator[ToolCall] {
	return rapid.Custom(func(t *rapid.T) ToolCall {
		c := ToolCall{ID: genOptionalID().Draw(t, "id"), Name: genText().Draw(t, "name")}
		if args := genMeta(genNumberFloat()).Draw(t, "args"); args != nil {
			c.Arguments, _ = json.Marshal(args) // compact and escaped: what a round trip keeps
		}
		return c
	})
}

func genToolResult() *rapid.Generator[ToolResult] {
	return rapid.Custom(func(t *rapid.T) ToolResult {
		r := ToolResult{
			CallID:  genOptionalID().Draw(t, "call_id"),
			Name:    genOptionalText().Draw(t, "name"),
			Output:  genOptionalText().Draw(t, "output"),
			IsError: rapid.Bool().Draw(t, "is_error"),
		}
		if r.CallID == "" && r.Name == "" {
			r.Name = "lookup"
		}
		return r
	})
}

// genTurn draws a turn whose status is running or not as asked; key is its
// session_key ("" leaves it to the enclosing event).
func genTurn(key string, running bool, number *rapid.Generator[any]) *rapid.Generator[TurnRecord] {
	return rapid.Custom(func(t *rapid.T) TurnRecord {
		tr := TurnRecord{
			TurnID:           genID().Draw(t, "turn_id"),
			SessionKey:       key,
			InputEventID:     genOptionalID().Draw(t, "input_event_id"),
			Plan:             genOptionalText().Draw(t, "plan"),
			ToolCalls:        nilIfEmpty(rapid.SliceOfN(genToolCall(), 0, 2).Draw(t, "tool_calls")),
			ToolResults:      nilIfEmpty(rapid.SliceOfN(genToolResult(), 0, 2).Draw(t, "tool_results")),
			FinalOutputObsID: genOptionalID().Draw(t, "final_output_obs_id"),
			StartedTS:        genTime().Draw(t, "started_ts"),
			Status:           TurnRunning,
			Meta:             genMeta(number).Draw(t, "meta"),
		}
		if !running {
			tr.Status = rapid.SampledFrom([]TurnStatus{TurnOK, TurnError, TurnTimeout}).Draw(t, "status")
			tr.FinishedTS = tr.StartedTS.Add(time.Duration(rapid.Int64Range(0, int64(time.Hour)).Draw(t, "took")))
			if tr.Status != TurnOK {
				tr.Error = genOptionalText().Draw(t, "error")
			}
		}
		return tr
	})
}

// genObservation draws a valid observation for the session with the given key.
func genObservation(key string, number *rapid.Generator[any]) *rapid.Generator[Observation] {
	return rapid.Custom(func(t *rapid.T) Observation {
		o := Observation{
			Kind: rapid.SampledFrom([]ObservationKind{"", KindMessage, KindToolCall, KindToolResult, KindTurnStarted, KindTurnFinished}).Draw(t, "kind"),
			Role: rapid.SampledFrom(Roles).Draw(t, "role"),
			Text: genOptionalText().Draw(t, "text"),
			Meta: genMeta(number).Draw(t, "meta"),
		}
		turnKey := rapid.SampledFrom([]string{"", key}).Draw(t, "turn_key")
		switch o.EffectiveKind() {
		case KindMessage:
			o.Text = genText().Filter(func(s string) bool { return strings.TrimSpace(s) != "" }).Draw(t, "message_text")
		case KindToolCall:
			o.ToolCall = ptr(genToolCall().Draw(t, "tool_call"))
		case KindToolResult:
			o.ToolResult = ptr(genToolResult().Draw(t, "tool_result"))
		case KindTurnStarted:
			o.Turn = ptr(genTurn(turnKey, true, number).Draw(t, "turn"))
		case KindTurnFinished:
			o.Turn = ptr(genTurn(turnKey, false, number).Draw(t, "turn"))
		}
		return o
	})
}

func ptr[T any](v T) *T { return &v }

func genWrittenEntry() *rapid.Generator[WrittenEntry] {
	return rapid.Custom(func(t *rapid.T) WrittenEntry {
		return WrittenEntry{
			File:     rapid.SampledFrom([]string{"MEMORY.md", "file_patterns.md", "user_prefs.md", "202611/20261122.md"}).Draw(t, "file"),
			Category: rapid.SampledFrom([]string{"", "file_pattern", "user_pref", "error_solution", "general"}).Draw(t, "category"),
			Content:  genText().Draw(t, "content"),
		}
	})
}

// genEnvelopeOf draws a valid envelope of type typ; numbers in meta come back as
// json.Number, as Decode returns them.
func genEnvelopeOf(typ Type) *rapid.Generator[Envelope] {
	return rapid.Custom(func(t *rapid.T) Envelope {
		e := Envelope{
			ID:            genID().Draw(t, "id"),
			Type:          typ,
			SchemaVersion: SchemaVersion,
			TS:            genTime().Draw(t, "ts"),
			Tenant:        genID().Draw(t, "tenant"),
			// A user's id: owner ids of the shared scopes have no sessions.
			UserID:    genID().Filter(func(id string) bool { return !IsReservedUserID(id) }).Draw(t, "user_id"),
			AgentID:   genOptionalID().Draw(t, "agent_id"),
			SessionID: genOptionalID().Draw(t, "session_id"),
		}
		switch typ {
		case TypeObservation:
			e.SessionID = genID().Draw(t, "session")
			e.Observation = ptr(genObservation(e.sessionKey(), genNumberJSON()).Draw(t, "observation"))
		case TypeSessionEnded:
			e.SessionID = genID().Draw(t, "session")
			if rapid.Bool().Draw(t, "with_body") {
				e.SessionEnded = &SessionEnded{Reason: genOptionalText().Draw(t, "reason")}
			}
		case TypeMemoryHit:
			e.MemoryHit = &MemoryHit{
				MemoryIDs: genIDs(1).Draw(t, "memory_ids"),
				Query:     genOptionalText().Draw(t, "query"),
				RequestID: genOptionalID().Draw(t, "request_id"),
			}
		case TypeMemoryWritten:
			w := &MemoryWritten{
				Entries:         nilIfEmpty(rapid.SliceOfN(genWrittenEntry(), 0, 3).Draw(t, "entries")),
				MemoryIDs:       genIDs(0).Draw(t, "memory_ids"),
				SourceSessionID: genOptionalID().Draw(t, "source_session_id"),
			}
			if len(w.Entries) == 0 && len(w.MemoryIDs) == 0 {
				w.MemoryIDs = []string{genID().Draw(t, "memory_id")}
			}
			e.MemoryWritten = w
		case TypeConsolidateRequested:
			if rapid.Bool().Draw(t, "with_body") {
				e.ConsolidateRequested = &ConsolidateRequested{Reason: genOptionalText().Draw(t, "reason")}
			}
		case TypeSummaryDue:
			e.SessionID = genID().Draw(t, "session")
			e.SummaryDue = &SummaryDue{Messages: rapid.IntRange(1, 1000).Draw(t, "messages"), Tokens: rapid.IntRange(0, 100000).Draw(t, "tokens")}
		case TypeWrite:
			e.Write = genWrite(e.UserID).Draw(t, "write")
		}
		return e
	})
}

func genEnvelope() *rapid.Generator[Envelope] {
	return rapid.Custom(func(t *rapid.T) Envelope {
		return genEnvelopeOf(rapid.SampledFrom(Types).Draw(t, "type")).Draw(t, "envelope")
	})
}

func genSessionKey() *rapid.Generator[string] {
	return rapid.Custom(func(t *rapid.T) string {
		key, err := SessionKey(genID().Draw(t, "tenant"), genID().Draw(t, "user"), genID().Draw(t, "session"))
		if err != nil {
			t.Fatalf("SessionKey of valid ids: %v", err)
		}
		return key
	})
}

// The record generators use float64 numbers: records are read with json.Unmarshal.

func genEventRecord() *rapid.Generator[EventRecord] {
	return rapid.Custom(func(t *rapid.T) EventRecord {
		key := genSessionKey().Draw(t, "session_key")
		r := EventRecord{
			EventID:       genID().Draw(t, "event_id"),
			Type:          rapid.SampledFrom([]Type{"", TypeObservation, TypeSessionEnded}).Draw(t, "type"),
			TS:            genTime().Draw(t, "ts"),
			SessionKey:    key,
			AgentID:       genOptionalID().Draw(t, "agent_id"),
			Meta:          genMeta(genNumberFloat()).Draw(t, "meta"),
			SchemaVersion: SchemaVersion,
		}
		if r.Type != TypeSessionEnded {
			r.Obs = ptr(genObservation(key, genNumberFloat()).Draw(t, "obs"))
		}
		if rapid.Bool().Draw(t, "gated") {
			r.Gate = &Gate{Write: rapid.Bool().Draw(t, "write"), Reason: genOptionalText().Draw(t, "reason"), Score: rapid.Float64Range(0, 1).Draw(t, "score")}
		}
		return r
	})
}

func genTurnRecord() *rapid.Generator[TurnRecord] {
	return rapid.Custom(func(t *rapid.T) TurnRecord {
		return genTurn(genSessionKey().Draw(t, "session_key"), rapid.Bool().Draw(t, "running"), genNumberFloat()).Draw(t, "turn")
	})
}

func genMemoryItemIn(scope Scope) *rapid.Generator[MemoryItem] {
	return rapid.Custom(func(t *rapid.T) MemoryItem {
		m := MemoryItem{
			Scope:      scope,
			Kind:       rapid.SampledFrom(ItemKinds).Draw(t, "kind"),
			Key:        genID().Draw(t, "key"),
			Content:    genText().Draw(t, "content"),
			Data:       genMeta(genNumberFloat()).Draw(t, "data"),
			Source:     genOptionalText().Draw(t, "source"),
			Confidence: rapid.Float64Range(0, 1).Draw(t, "confidence"),
			TTLSec:     rapid.Int64Range(0, MaxTTLSec).Draw(t, "ttl_sec"),
			Meta:       genMeta(genNumberFloat()).Draw(t, "meta"),
		}
		if scope == ScopeSession {
			m.SessionID = genID().Draw(t, "session_id")
		}
		if rapid.Bool().Draw(t, "stored") {
			m.CreatedTS = genTime().Draw(t, "created_ts")
			m.UpdatedTS = m.CreatedTS.Add(time.Duration(rapid.Int64Range(0, int64(24*time.Hour)).Draw(t, "age")))
		}
		return m
	})
}

func genMemoryItem() *rapid.Generator[MemoryItem] {
	return rapid.Custom(func(t *rapid.T) MemoryItem {
		return genMemoryItemIn(rapid.SampledFrom(Scopes).Draw(t, "scope")).Draw(t, "item")
	})
}

// genSourceMeta draws the observation meta a memory came from; never empty, since
// a provenance entry stands for one observation.
func genSourceMeta() *rapid.Generator[map[string]any] {
	return rapid.Map(genMeta(genNumberFloat()), func(m map[string]any) map[string]any {
		if m == nil {
			return map[string]any{"dia_id": "D1:3"}
		}
		return m
	})
}

func genPackItem(kind PackItemKind) *rapid.Generator[PackItem] {
	return rapid.Custom(func(t *rapid.T) PackItem {
		it := PackItem{
			ID:    genOptionalID().Draw(t, "id"),
			Kind:  kind,
			Text:  genText().Draw(t, "text"),
			Score: rapid.Float64Range(-10, 10).Draw(t, "score"),
			Source: Provenance{
				File:       rapid.SampledFrom([]string{"", "MEMORY.md", "202611/20261122.md"}).Draw(t, "file"),
				EventIDs:   genIDs(0).Draw(t, "event_ids"),
				SessionIDs: genIDs(0).Draw(t, "session_ids"),
				Meta:       nilIfEmpty(rapid.SliceOfN(genSourceMeta(), 0, 2).Draw(t, "meta")),
			},
		}
		if kind == PackKindEpisodic || kind == PackKindSemantic {
			it.ID = genID().Draw(t, "memory_id")
		}
		return it
	})
}

func genPackItems(kind PackItemKind) *rapid.Generator[[]PackItem] {
	return rapid.Map(rapid.SliceOfN(genPackItem(kind), 0, 3), nilIfEmpty[PackItem])
}

func genItems(scope Scope) *rapid.Generator[[]MemoryItem] {
	return rapid.Map(rapid.SliceOfN(genMemoryItemIn(scope), 0, 2), nilIfEmpty[MemoryItem])
}

func genContextPack() *rapid.Generator[ContextPack] {
	return rapid.Custom(func(t *rapid.T) ContextPack {
		p := ContextPack{
			Tenant:         genID().Draw(t, "tenant"),
			UserID:         genID().Draw(t, "user_id"),
			SessionID:      genOptionalID().Draw(t, "session_id"),
			Query:          genOptionalText().Draw(t, "query"),
			Persona:        genItems(ScopePersona).Draw(t, "persona"),
			UserProfile:    genItems(ScopeUser).Draw(t, "user_profile"),
			SessionItems:   genItems(ScopeSession).Draw(t, "session_items"),
			EpisodicItems:  genPackItems(PackKindEpisodic).Draw(t, "episodic"),
			SemanticItems:  genPackItems(PackKindSemantic).Draw(t, "semantic"),
			Topics:         genPackItems(PackKindTopic).Draw(t, "topics"),
			Chunks:         genPackItems(PackKindChunk).Draw(t, "chunks"),
			DailyNotes:     genPackItems(PackKindDailyNote).Draw(t, "daily_notes"),
			RecentEvents:   nilIfEmpty(rapid.SliceOfN(genEventRecord(), 0, 2).Draw(t, "recent_events")),
			RecentTurns:    nilIfEmpty(rapid.SliceOfN(genTurnRecord(), 0, 2).Draw(t, "recent_turns")),
			SessionSummary: genOptionalText().Draw(t, "summary"),
			TokenEstimate:  rapid.IntRange(0, 100000).Draw(t, "tokens"),
			Prompt:         genOptionalText().Draw(t, "prompt"),
		}
		if rapid.Bool().Draw(t, "has_core") {
			p.Core = ptr(genPackItem(PackKindCore).Draw(t, "core"))
		}
		p.Recount()
		return p
	})
}

// genWrite draws a write body for user: an append, a delete, a reset or an
// import request.
func genWrite(user string) *rapid.Generator[*Write] {
	return rapid.Custom(func(t *rapid.T) *Write {
		var (
			op  = rapid.SampledFrom([]string{EndpointAppend, EndpointDelete, EndpointReset, EndpointImport}).Draw(t, "op")
			req any
		)
		switch op {
		case EndpointImport:
			req = ImportRequest{
				UserID:   user,
				Files:    []FileChunk{{Name: "MEMORY.md", Offset: rapid.IntRange(0, 1<<20).Draw(t, "offset"), Data: []byte("- Prefers tabs.\n")}},
				Records:  []Record{{ID: "m1", MemoryType: MemorySemantic, Text: "Prefers tabs.", Vector: []float32{0.5, -0.25}}},
				Embedder: &EmbedderInfo{Model: "hash-v1", Dimensions: 2},
			}
		case EndpointAppend:
			req = AppendRequest{UserID: user, Content: rapid.SampledFrom([]string{"Prefers tabs.", "多言語 ✓"}).Draw(t, "content")}
		case EndpointDelete:
			req = DeleteRequest{UserID: user, IDs: genIDs(1).Draw(t, "ids")}
		default:
			req = ResetRequest{UserID: user}
		}
		data, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		return &Write{Op: op, Request: data, MemoryIDs: genIDs(0).Draw(t, "memory_ids")}
	})
}
