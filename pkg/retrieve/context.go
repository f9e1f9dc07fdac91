package retrieve

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/bm25"
	"github.com/agentmem/agentmem/pkg/docstore"
	"github.com/agentmem/agentmem/pkg/markdown"
	"github.com/agentmem/agentmem/pkg/memory"
	"github.com/agentmem/agentmem/pkg/policy"
	"github.com/agentmem/agentmem/pkg/records"
	"github.com/agentmem/agentmem/pkg/session"
	"github.com/agentmem/agentmem/pkg/textnorm"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// Keyword rules for loading topic files on demand (SPEC A5). A query term (after
// bm25.Tokenize: lower case, stemmed) from fileStructureTerms loads file_patterns.md;
// one from preferenceTerms loads user_prefs.md: the form of answers, and how the
// agent should write them (the language, code and examples to use, the user's
// habits). Both can apply; an empty query loads
// neither.
var (
	fileStructureTerms = termSet("file", "table", "sheet", "spreadsheet", "worksheet", "workbook", "tab",
		"column", "col", "row", "csv", "tsv", "xlsx", "xls", "parquet", "schema", "field",
		"header", "dataset", "datatype", "dtype", "structure", "record")
	preferenceTerms = termSet("format", "style", "chart", "plot", "graph", "prefer", "preferred",
		"preference", "color", "colour", "font", "layout", "output", "theme", "decimal", "favorite",
		"favourite", "language", "code", "example", "script", "habit", "usually")
)

// Cues of the same two topics in other languages, found as substrings of the
// query's folded form (bm25.Fold): Chinese has no spaces and German joins nouns
// ("Umsatzdatei"), so a term match would miss them; Japanese and Korean are
// written the same way (issue 29).
var (
	fileStructureCues = []string{"文件", "表格", "工作表", "工作簿", "字段", "列", "行数", "数据表",
		"datei", "tabelle", "spalte", "blatt", "blätter", "arbeitsmappe", "zeilen", "feld",
		"ファイル", "シート", "列名", "行数", "파일", "시트", "열 이름", "행 수"}
	preferenceCues = []string{"格式", "图表", "偏好", "喜欢", "风格", "回答", "显示", "语言", "代码", "习惯",
		"format", "diagramm", "bevorz", "stil", "antwort", "darstell", "sprache", "codebeispiel", "gewohn",
		"好み", "グラフ", "形式", "書式", "回答", "선호", "그래프", "형식", "답변"}
)

func mentionsCue(folded string, cues []string) bool {
	return slices.ContainsFunc(cues, func(c string) bool { return strings.Contains(folded, c) })
}

// termSet holds the index terms of words, so that the words match a query however
// the tokenizer stems them ("tables" and "table" alike).
func termSet(words ...string) map[string]bool {
	m := make(map[string]bool, len(words))
	for _, w := range words {
		for _, t := range bm25.Tokenize(w) {
			m[t] = true
		}
	}
	return m
}

func mentions(terms []string, set map[string]bool) bool {
	return slices.ContainsFunc(terms, func(t string) bool { return set[t] })
}

// contextPack builds the ContextPack of a context request from independent reads:
// the Markdown memory, the session, the hand-over, the vector recall and the
// memory items. The session's and the hand-over's are KV round trips, so they
// run beside the others, and so does the
// recall with a remote embedder (Config.RemoteEmbedder: it starts with a round
// trip); the rest is CPU work (the cached Markdown costs a stat per file) and runs
// one after the other on the request's goroutine: on two cores
// (BenchmarkContext), a goroutine for each did not lower latency measurably and
// cost more CPU per request in most runs.
func (s *Service) contextPack(ctx context.Context, tenant string, req events.ContextRequest) (events.ContextPack, error) {
	ns := docstore.Namespace{Tenant: tenant, User: req.UserID}
	pol := s.policyFor(ctx, ns, req.SessionID)
	terms := bm25.Tokenize(req.Query)
	pack := events.ContextPack{Tenant: tenant, UserID: req.UserID, SessionID: req.SessionID, Query: req.Query}

	var (
		wg   sync.WaitGroup
		errs [6]error
	)
	if req.SessionID != "" {
		wg.Go(func() { errs[0] = s.loadSession(ctx, tenant, req, terms, pol, &pack) })
	}
	if req.AgentID != "" {
		// KV round trips too: beside the others.
		wg.Go(func() { errs[5] = s.loadHandover(ctx, tenant, req, &pack) })
	}
	var scopesDegraded []string
	// The agent and tenant scopes are recalls of their own (two more namespaces
	// searched); beside the user's, a request waits for the longest instead of
	// their sum.
	wg.Go(func() { errs[4] = s.loadScopes(ctx, tenant, req, terms, pol, &pack, &scopesDegraded) })
	recall := !req.Lightweight && len(terms) > 0
	if recall && s.cfg.RemoteEmbedder {
		// The recall writes only its own fields of the pack.
		wg.Go(func() { errs[2] = s.recall(ctx, tenant, req, &pack) })
	}
	errs[1] = s.loadMarkdown(ctx, ns, req, terms, pol, &pack)
	if recall && !s.cfg.RemoteEmbedder {
		errs[2] = s.recall(ctx, tenant, req, &pack)
	}
	errs[3] = s.loadItems(ctx, tenant, req, &pack)
	wg.Wait()
	if err := errors.Join(errs[:]...); err != nil {
		return events.ContextPack{}, fmt.Errorf("context pack: %w", err)
	}
	pack.Degraded = addDegraded(pack.Degraded, scopesDegraded)

	maxTokens := req.MaxTokens
	if maxTokens == 0 {
		maxTokens = s.cfg.MaxTokens
	}
	dedupe(&pack)
	render(&pack, maxTokens, shares{agent: pol.PackAgentPercent, tenant: pol.PackTenantPercent})
	pack.Recount()
	s.publishHit(tenant, req, &pack)
	return pack, nil
}

// loadMarkdown fills core, topics, chunks and daily notes from one read of MEMORY.md.
func (s *Service) loadMarkdown(ctx context.Context, ns docstore.Namespace, req events.ContextRequest, terms []string, pol policy.Policy, pack *events.ContextPack) error {
	doc, err := s.readDoc(ctx, ns, docstore.MemoryFile)
	if err != nil {
		return err
	}
	if doc != nil && strings.TrimSpace(doc.text) != "" {
		core := doc.text // no query: the whole file (SPEC A10)
		if len(terms) > 0 {
			core = markdown.Head(doc.text, s.cfg.AutoLoadLines) // SPEC A2
		}
		pack.Core = &events.PackItem{Kind: events.PackKindCore, Text: core, Source: events.Provenance{File: docstore.MemoryFile}, Scope: events.MemoryScopeUser}
		if !req.Lightweight && len(terms) > 0 {
			pack.Chunks = chunkItems(doc.index().SearchTerms(terms, pol.RetrieveLimit), events.MemoryScopeUser)
		}
	}
	if !req.Lightweight {
		folded := bm25.Fold(req.Query)
		for _, t := range []struct {
			file  string
			terms map[string]bool
			cues  []string
		}{{docstore.FilePatternsFile, fileStructureTerms, fileStructureCues}, {docstore.UserPrefsFile, preferenceTerms, preferenceCues}} {
			if !mentions(terms, t.terms) && !mentionsCue(folded, t.cues) {
				continue
			}
			text, err := s.readOptional(ctx, ns, t.file)
			if err != nil {
				return err
			}
			if strings.TrimSpace(text) != "" {
				pack.Topics = append(pack.Topics, events.PackItem{ID: strings.TrimSuffix(t.file, ".md"), Kind: events.PackKindTopic, Text: text, Source: events.Provenance{File: t.file}, Scope: events.MemoryScopeUser})
			}
		}
	}
	notes, err := s.deps.Docs.RecentDailyNotes(ctx, ns, pol.RecentDays)
	if err != nil {
		return fmt.Errorf("recent daily notes: %w", err)
	}
	for _, n := range notes {
		if strings.TrimSpace(n.Content) != "" {
			pack.DailyNotes = append(pack.DailyNotes, events.PackItem{ID: n.Name, Kind: events.PackKindDailyNote, Text: n.Content, Source: events.Provenance{File: n.Name}, Scope: events.MemoryScopeUser})
		}
	}
	return nil
}

// docFile is a Markdown file of a namespace as last read: its text, the version the
// docstore gave it, and its chunk index, built on first use (only MEMORY.md's is
// searched).
type docFile struct {
	version docstore.Version
	text    string
	index   func() *markdown.ChunkIndex
}

// docKey names a cached file.
type docKey struct {
	ns   docstore.Namespace
	name string
}

// readDoc returns a file of the namespace, nil when it is missing. A file the
// docstore reports unchanged since the cached version (a stat on the filesystem)
// is the cached one: no read, no copy, and no chunking again. One without a
// version (just written) is read every time and not kept.
func (s *Service) readDoc(ctx context.Context, ns docstore.Namespace, name string) (*docFile, error) {
	key := docKey{ns, name}
	cached, ok := s.docs.Get(key)
	var since docstore.Version
	if ok {
		since = cached.version
	}
	data, v, changed, err := s.deps.Docs.ReadFileIfChanged(ctx, ns, name, since)
	switch {
	case errors.Is(err, docstore.ErrNotFound):
		s.docs.Remove(key)
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("read %s: %w", name, err)
	case !changed:
		return cached, nil
	}
	text := string(data)
	doc := &docFile{version: v, text: text, index: sync.OnceValue(func() *markdown.ChunkIndex { return markdown.NewChunkIndex(text) })}
	if v == (docstore.Version{}) {
		s.docs.Remove(key)
	} else {
		s.docs.Add(key, doc)
	}
	return doc, nil
}

// readOptional reads a file of the namespace; a missing file is "".
func (s *Service) readOptional(ctx context.Context, ns docstore.Namespace, name string) (string, error) {
	doc, err := s.readDoc(ctx, ns, name)
	if doc == nil {
		return "", err
	}
	return doc.text, nil
}

// chunkID names a chunk by file and line span: "MEMORY.md#L12-18".
func chunkID(file string, c markdown.Chunk) string {
	return file + "#L" + strconv.Itoa(c.StartLine) + "-" + strconv.Itoa(c.EndLine)
}

// summaryPossible reports whether ingest's summary trigger, with the session's
// policy, can have fired for st: only then can the session have a summary.
func (s *Service) summaryPossible(st session.State, pol policy.Policy) bool {
	return session.SummaryTrigger{
		MessageThreshold:    pol.SessionSummaryMessageThreshold,
		TokenPercent:        pol.SessionSummaryTokenPercent,
		ContextWindowTokens: s.cfg.ContextWindowTokens,
		KeepCount:           pol.SessionSummaryKeepCount,
	}.Fired(st)
}

// loadSession fills recent_events (SPEC B3) and recent_turns.
func (s *Service) loadSession(ctx context.Context, tenant string, req events.ContextRequest, terms []string, pol policy.Policy, pack *events.ContextPack) error {
	st, err := s.deps.Sessions.Get(ctx, tenant, req.UserID, req.SessionID)
	if err != nil && !errors.Is(err, session.ErrNotFound) {
		return err
	}
	key := tenant + "." + req.UserID + "." + req.SessionID
	recent := st.Recent
	// A session that never passed ingest's summary trigger has no summary: no
	// read (a KV round trip on every context request otherwise).
	if s.summaryPossible(st, pol) {
		sum, _, err := s.deps.Sessions.GetSummary(ctx, tenant, req.UserID, req.SessionID)
		if err != nil && !errors.Is(err, session.ErrNotFound) {
			return err
		}
		recent = s.foldSummary(pack, tenant, sum, recent, pol.SessionSummaryKeepCount)
	}
	history := sessionHistory(recent, terms, pol)
	pack.RecentEvents = make([]events.EventRecord, 0, len(history))
	for _, m := range history {
		pack.RecentEvents = append(pack.RecentEvents, events.EventRecord{
			EventID: m.EventID, Type: events.TypeObservation, TS: m.TS, SessionKey: key, AgentID: st.AgentID,
			Obs:           &events.Observation{Role: m.Role, Text: m.Text, Meta: m.Meta},
			SchemaVersion: events.SchemaVersion,
		})
	}
	if st.Turns == 0 {
		return nil // no turn was ever started: skip the key listing
	}
	turns, err := s.deps.Sessions.ListTurns(ctx, key)
	if err != nil {
		return err
	}
	pack.RecentTurns = turns[max(0, len(turns)-s.cfg.RecentTurns):]
	return nil
}

// foldSummary puts the session's summary in the pack (SPEC B2) and returns the
// messages the pack holds verbatim: the last keep of those after the running
// summary sum (zero when the extractor has not written one yet). The messages
// between are not lost: summaryText digests them after the running summary, as
// session.summary does, and the provenance names the range of each part.
func (s *Service) foldSummary(pack *events.ContextPack, tenant string, sum session.Summary, recent []session.Message, keep int) []session.Message {
	after := sum.After(recent)
	var folded []session.Message
	if len(after) > keep {
		folded, after = after[:len(after)-keep], after[len(after)-keep:]
	}
	var parts []events.SummarySource
	if sum.LastEventID != "" {
		parts = append(parts, events.SummarySource{FirstEventID: sum.FirstEventID, LastEventID: sum.LastEventID, Messages: sum.Messages, Dropped: sum.Dropped, By: sum.By})
	}
	if len(folded) > 0 {
		parts = append(parts, events.SummarySource{FirstEventID: folded[0].EventID, LastEventID: folded[len(folded)-1].EventID, Messages: len(folded), By: events.SummaryByDigest})
	}
	if len(parts) == 0 {
		return after
	}
	whole := parts[len(parts)-1]
	whole.FirstEventID, whole.Messages, whole.Dropped, whole.Parts = parts[0].FirstEventID, sum.Messages+len(folded), sum.Dropped, parts
	pack.SessionSummary, pack.SessionSummarySource = s.summaryText(tenant, sum.Text, folded), &whole
	return after
}

// sessionHistory applies SPEC B3 to the session's recent messages (oldest first):
// with session_relevant_history_limit > 0 and a query with searchable terms, the
// messages BM25 finds relevant to the query (its terms q), at most that many, in
// conversation order; otherwise the last session_relevant_fallback_keep messages.
func sessionHistory(recent []session.Message, q []string, pol policy.Policy) []session.Message {
	if pol.SessionRelevantHistoryLimit <= 0 || len(q) == 0 {
		return recent[max(0, len(recent)-pol.SessionRelevantFallbackKeep):]
	}
	docs := make([][]string, len(recent))
	for i, m := range recent {
		docs[i] = bm25.Tokenize(m.Text)
	}
	hits := bm25.NewIndex(docs, bm25.DefaultParams()).Search(q, pol.SessionRelevantHistoryLimit)
	idx := make([]int, len(hits))
	for i, h := range hits {
		idx[i] = h.Doc
	}
	slices.Sort(idx)
	out := make([]session.Message, len(idx))
	for i, j := range idx {
		out[i] = recent[j]
	}
	return out
}

// recall fills episodic_items and semantic_items (SPEC C4) with their provenance.
func (s *Service) recall(ctx context.Context, tenant string, req events.ContextRequest, pack *events.ContextPack) error {
	recalled, err := s.deps.Memories.RecallStatus(ctx, tenant, req.UserID, req.Query,
		[]vectorstore.MemoryType{vectorstore.Episodic, vectorstore.Semantic},
		map[vectorstore.MemoryType]int{vectorstore.Episodic: s.cfg.KEpisodic, vectorstore.Semantic: s.cfg.KSemantic})
	if err != nil {
		return fmt.Errorf("recall: %w", err)
	}
	// Ranked is best first: the floor cuts its tail.
	ranked := recalled.Ranked
	if i := slices.IndexFunc(ranked, func(r memory.Ranked) bool { return r.Score < s.cfg.MinScore }); i >= 0 {
		ranked = ranked[:i]
	}
	pack.Degraded = append(pack.Degraded, recalled.Degraded...)
	// One backing array for both lists, each at its final length: no growing.
	nEpisodic := 0
	for _, r := range ranked {
		if r.Record.MemoryType == vectorstore.Episodic {
			nEpisodic++
		}
	}
	items := make([]events.PackItem, 0, len(ranked))
	pack.EpisodicItems, pack.SemanticItems = items[:0:nEpisodic], items[nEpisodic:nEpisodic:len(ranked)]
	for _, r := range ranked {
		item := recordItem(r, events.MemoryScopeUser)
		if item.Kind == events.PackKindSemantic {
			pack.SemanticItems = append(pack.SemanticItems, item)
		} else {
			pack.EpisodicItems = append(pack.EpisodicItems, item)
		}
	}
	return nil
}

// recordItem is the pack entry of a recalled episodic or semantic memory of
// scope, with its provenance.
func recordItem(r memory.Ranked, scope events.MemoryScope) events.PackItem {
	item := events.PackItem{ID: r.Record.ID, Kind: events.PackKindEpisodic, Score: r.Score, Source: provenance(r.Record), Scope: scope}
	if r.Record.MemoryType == vectorstore.Semantic {
		item.Kind = events.PackKindSemantic
	}
	item.Text, item.Context = records.SplitContext(r.Record)
	return item
}

// chunkItems are the pack entries of MEMORY.md chunks a keyword search found in
// scope's memory, best first.
func chunkItems(found []markdown.ScoredChunk, scope events.MemoryScope) []events.PackItem {
	out := make([]events.PackItem, 0, len(found))
	for _, c := range found {
		out = append(out, events.PackItem{
			ID: chunkID(docstore.MemoryFile, c.Chunk), Kind: events.PackKindChunk, Text: c.Text, Score: c.Score,
			Source: events.Provenance{File: docstore.MemoryFile}, Scope: scope,
		})
	}
	return out
}

// provenance copies a record's source metadata. Values are []string and
// []map[string]any when written in-process, []any after a JSON round trip.
func provenance(r vectorstore.Record) events.Provenance {
	p := events.Provenance{
		EventIDs:   records.StringList(r.Metadata[records.MetaSourceEventIDs]),
		SessionIDs: records.StringList(r.Metadata[records.MetaSourceChatIDs]),
		Meta:       records.MapList(r.Metadata[records.MetaSourceMeta]),
	}
	if len(p.SessionIDs) == 0 && r.ChatID != "" {
		p.SessionIDs = []string{r.ChatID}
	}
	return p
}

// loadItems fills persona, user_profile and session_items (SPEC D1).
func (s *Service) loadItems(ctx context.Context, tenant string, req events.ContextRequest, pack *events.ContextPack) error {
	items, err := s.deps.Memories.PackItems(ctx, tenant, req.UserID, req.SessionID, s.cfg.ItemsLimit)
	if err != nil {
		return fmt.Errorf("memory items: %w", err)
	}
	pack.Persona, pack.UserProfile, pack.SessionItems = items.Persona, items.UserProfile, items.Session
	return nil
}

// publishHit has one memory_hit event published listing the pack's vector
// memories of each memory they came from, so the consolidator counts each use
// once (SPEC C4) in that memory's namespace: the user's, and the agent and
// tenant scopes' (their owner ids'). A shared scope's event carries neither
// the user's query nor their session: it is stored with the scope, which
// holds nothing of a user, so its reconsolidation says only that the memory
// was recalled. A preview (record_hits false) uses nothing. The reply does not
// wait for it: the event is built, published and acknowledged by the hit
// publisher's goroutine, a failure is only logged, and Run's drain waits for it.
func (s *Service) publishHit(tenant string, req events.ContextRequest, pack *events.ContextPack) {
	if !req.RecordsHits() {
		return
	}
	now := s.deps.Now().UTC()
	if ids := vectorIDs(pack.EpisodicItems, pack.SemanticItems); len(ids) > 0 {
		s.hits.enqueue(hitEvent{tenant: tenant, req: req, ids: ids, ts: now})
	}
	for _, shared := range []struct {
		owner string
		items []events.PackItem
	}{{events.AgentOwner(req.AgentID), pack.AgentItems}, {events.TenantOwner, pack.TenantItems}} {
		if ids := vectorIDs(shared.items); len(ids) > 0 {
			s.hits.enqueue(hitEvent{tenant: tenant, req: events.ContextRequest{UserID: shared.owner, AgentID: req.AgentID}, ids: ids, ts: now})
		}
	}
}

// vectorIDs are the ids of the episodic and semantic memories of lists.
func vectorIDs(lists ...[]events.PackItem) []string {
	var ids []string
	for _, list := range lists {
		for _, it := range list {
			if it.Kind == events.PackKindEpisodic || it.Kind == events.PackKindSemantic {
				ids = append(ids, it.ID)
			}
		}
	}
	return ids
}

// dedupe drops every pack entry whose text is already in the pack, so no entry
// is there twice across sections: a chunk of MEMORY.md that the core memory or a
// loaded topic file holds, and a fact, episode or chunk whose text (compared in
// textnorm.Normalize form) an earlier entry has, in priority order: core,
// topics, facts, episodes, chunks.
func dedupe(pack *events.ContextPack) {
	var whole []string // normalised texts of the core and the topics
	if pack.Core != nil {
		whole = append(whole, textnorm.Normalize(pack.Core.Text))
	}
	for _, t := range pack.Topics {
		whole = append(whole, textnorm.Normalize(t.Text))
	}
	seen := map[string]bool{}
	keep := func(list []events.PackItem) []events.PackItem {
		out := list[:0]
		for _, it := range list {
			n := textnorm.Normalize(it.Text)
			if n == "" || seen[n] || slices.ContainsFunc(whole, func(w string) bool { return strings.Contains(w, n) }) {
				continue
			}
			seen[n] = true
			out = append(out, it)
		}
		return out
	}
	pack.SemanticItems = keep(pack.SemanticItems)
	pack.EpisodicItems = keep(pack.EpisodicItems)
	pack.Chunks = keep(pack.Chunks)
}
