package memory

import (
	"fmt"
	"maps"
	"time"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/records"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// Conversions between vector store records and the wire types, in one place.

// reservedMeta are the metadata keys the service and the consolidator derive from
// a record's own fields; a caller setting one would make the metadata contradict
// the record, so add and update refuse them. "context" is not reserved: it is
// what the caller knows about the memory.
var reservedMeta = map[vectorstore.MemoryType][]string{
	vectorstore.Episodic: {
		records.MetaThing, records.MetaTime, records.MetaChatID, records.MetaWho, records.MetaUpdates,
		records.MetaSourceChatIDs, records.MetaMergedFromIDs, records.MetaSeparatedFromIDs, records.MetaHitEvents,
	},
	vectorstore.Semantic: {records.MetaFact, records.MetaSourceChatID, records.MetaFirstSeen, records.MetaHitEvents},
}

func checkCallerMetadata(t vectorstore.MemoryType, md map[string]any) error {
	for _, k := range reservedMeta[t] {
		if _, ok := md[k]; ok {
			return invalidf("metadata.%s is set by the memory service for %s memories; use another key", k, t)
		}
	}
	return nil
}

// addID is the id of an episodic memory added through the API: the same input
// names the same memory, so a retried add finds it instead of duplicating it.
func addID(tenant, userID, chatID, text string) string {
	return vectorstore.DeterministicID("add", tenant, userID, string(vectorstore.Episodic), chatID, text)
}

// apiContext is the episode context of a memory added through the API.
func apiContext(who, chatID string) string {
	if chatID == "" {
		return "added through the memory API by " + who
	}
	return "added through the memory API by " + who + " in chat " + chatID
}

// newRecord builds the record of a valid add request, without its vector. The
// text is redacted here, so that the id (AddedID too) is that of what is stored.
func newRecord(tenant string, req events.AddRequest, now time.Time) (vectorstore.Record, error) {
	var rec vectorstore.Record
	req.Text = redactText(req.Text)
	switch vectorstore.MemoryType(req.EffectiveMemoryType()) {
	case vectorstore.Episodic:
		if err := checkCallerMetadata(vectorstore.Episodic, req.Metadata); err != nil {
			return rec, err
		}
		who := req.Who
		if who == "" {
			who = "user" // the speaker the write decision gives a user's own statement
		}
		rec = records.EpisodeRecord(tenant, req.UserID,
			records.Observation{Role: "user", Text: req.Text, TS: now, ChatID: req.ChatID, Who: who},
			records.Episode{Write: true, Context: apiContext(who, req.ChatID), Thing: req.Text, Who: who, Time: now})
		rec.ID = addID(tenant, req.UserID, req.ChatID, req.Text)
		rec.Text = req.Text // an API add stores exactly what it was given
		if req.ChatID == "" {
			rec.Metadata[records.MetaSourceChatIDs] = []any{}
		}
	case vectorstore.Semantic:
		if err := checkCallerMetadata(vectorstore.Semantic, req.Metadata); err != nil {
			return rec, err
		}
		// FactRecord's id is that of the normalised fact, shared with the semantic
		// writer, so one fact is one record however it arrives (SPEC C8).
		rec = records.FactRecord(tenant, req.UserID, records.Fact{Fact: req.Text, SourceChatID: req.ChatID, FirstSeen: now})
		rec.Who = req.Who
	}
	maps.Copy(rec.Metadata, req.Metadata)
	return rec, nil
}

// setMirroredText keeps the metadata copy of the text (episodic thing, semantic
// fact) equal to the text.
func setMirroredText(t vectorstore.MemoryType, md map[string]any, text string) {
	switch t {
	case vectorstore.Episodic:
		md[records.MetaThing] = text
	case vectorstore.Semantic:
		md[records.MetaFact] = text
	}
}

func cloneMap(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	return maps.Clone(m)
}

func toMemory(r vectorstore.Record) events.Memory {
	return events.Memory{
		ID:         r.ID,
		MemoryType: events.MemoryType(r.MemoryType),
		Text:       r.Text,
		TS:         r.TS,
		ChatID:     r.ChatID,
		Who:        r.Who,
		HitCount:   r.HitCount,
		Metadata:   r.Metadata,
	}
}

func toSearchResult(r Ranked) events.SearchResult {
	text, context := records.SplitContext(r.Record)
	return events.SearchResult{
		ID:         r.Record.ID,
		MemoryType: events.MemoryType(r.Record.MemoryType),
		Text:       text,
		Context:    context,
		Score:      r.Score,
		Metadata:   r.Record.Metadata,
	}
}

// Metadata keys of an item record; the item's identity, content, confidence,
// update time (TS) and expiry are record fields.
const (
	itemData      = "data"
	itemMeta      = "meta"
	itemSource    = "source"
	itemCreatedTS = "created_ts"
	itemTTLSec    = "ttl_sec"
)

// ItemID is the record id of the item (scope, kind, key) of a user, within
// session for scope session: saving the same key again replaces that record.
func ItemID(tenant, userID string, scope events.Scope, kind events.ItemKind, key, sessionID string) string {
	return vectorstore.DeterministicID("item", tenant, userID, string(scope), string(kind), key, sessionID)
}

// itemRecord is the record of a valid item whose timestamps are set.
func itemRecord(tenant, userID string, it events.MemoryItem, vec []float32) vectorstore.Record {
	md := map[string]any{
		itemCreatedTS: records.FormatTime(it.CreatedTS),
		itemTTLSec:    it.TTLSec,
	}
	if it.Data != nil {
		md[itemData] = it.Data
	}
	if it.Meta != nil {
		md[itemMeta] = it.Meta
	}
	if it.Source != "" {
		md[itemSource] = it.Source
	}
	expires, _ := it.ExpiresAt()
	return vectorstore.Record{
		ID:         ItemID(tenant, userID, it.Scope, it.Kind, it.Key, it.SessionID),
		Tenant:     tenant,
		UserID:     userID,
		MemoryType: vectorstore.Item,
		Scope:      string(it.Scope),
		Kind:       string(it.Kind),
		Key:        it.Key,
		Text:       it.Content,
		Vector:     vec,
		TS:         it.UpdatedTS,
		// A session item's session is its chat, so the store's ChatID filter
		// selects one session's items.
		ChatID:     it.SessionID,
		Confidence: it.Confidence,
		ExpiresAt:  expires,
		Metadata:   md,
	}
}

// toItem reads an item record back.
func toItem(r vectorstore.Record) (events.MemoryItem, error) {
	it := events.MemoryItem{
		Scope:      events.Scope(r.Scope),
		Kind:       events.ItemKind(r.Kind),
		Key:        r.Key,
		SessionID:  r.ChatID,
		Content:    r.Text,
		Confidence: r.Confidence,
		UpdatedTS:  r.TS,
	}
	it.Data, _ = r.Metadata[itemData].(map[string]any)
	it.Meta, _ = r.Metadata[itemMeta].(map[string]any)
	it.Source, _ = r.Metadata[itemSource].(string)
	if s, ok := r.Metadata[itemCreatedTS].(string); ok {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return it, fmt.Errorf("memory: item record %s: created_ts %q: %w", r.ID, s, err)
		}
		it.CreatedTS = t
	}
	if ttl, ok := r.Metadata[itemTTLSec].(float64); ok {
		it.TTLSec = int64(ttl)
	}
	return it, nil
}

// AddedID is the id Add gives the memory of req: it depends on the input alone,
// so the retriever can record it with the write before applying it.
func AddedID(tenant string, req events.AddRequest) (string, error) {
	rec, err := newRecord(tenant, req, time.Time{})
	return rec.ID, err
}
