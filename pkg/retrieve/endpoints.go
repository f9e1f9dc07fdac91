package retrieve

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/bm25"
	"github.com/agentmem/agentmem/pkg/docstore"
	"github.com/agentmem/agentmem/pkg/lifecycle"
	"github.com/agentmem/agentmem/pkg/markdown"
	"github.com/agentmem/agentmem/pkg/session"
)

// search answers memory_search (SPEC A10, C2, C4) with one list, best first.
// "markdown" is keyword (BM25) search over the chunks of MEMORY.md and the
// recent daily notes, scored as one corpus; the vector types go to
// Memories.Search, whose scores are the re-ranker's (memory.RankConfig). Both
// are relevance to the query's best keyword match, 1 for the best, times the
// re-ranker's bonuses for the vector types, so one sort orders them (see
// mergeHits). Without a limit in the request, each vector type keeps at most
// its K (SPEC C4) and the whole list retrieve_limit; a request's limit bounds
// each type and the whole list. The user's memory, the agent scope of
// req.AgentID and the tenant scope are searched alike and ranked together,
// each result naming its scope.
func (s *Service) search(ctx context.Context, tenant string, req events.SearchRequest) (events.SearchReply, error) {
	ns := docstore.Namespace{Tenant: tenant, User: req.UserID}
	pol := s.policyFor(ctx, ns, "")
	limit := req.Limit
	perType := map[events.MemoryType]int{}
	if limit == 0 {
		limit = pol.RetrieveLimit
		perType[events.MemoryEpisodic], perType[events.MemorySemantic] = s.cfg.KEpisodic, s.cfg.KSemantic
	}
	types := req.MemoryTypes
	if len(types) == 0 {
		types = events.MemoryTypes
	}
	var (
		vectorTypes []events.MemoryType
		hits        []events.SearchResult
		degraded    []string
	)
	for _, t := range types {
		if t != events.MemoryMarkdown && !slices.Contains(vectorTypes, t) {
			vectorTypes = append(vectorTypes, t)
		}
	}
	for _, owner := range events.ReadOwners(req.UserID, req.AgentID) {
		first := len(hits)
		if len(vectorTypes) > 0 {
			sub := req
			sub.UserID, sub.MemoryTypes, sub.Limit = owner, vectorTypes, limit
			reply, err := s.deps.Memories.Search(ctx, tenant, sub)
			if err != nil {
				return events.SearchReply{}, fmt.Errorf("search: %w", err)
			}
			hits, degraded = append(hits, reply.Results...), addDegraded(degraded, reply.Degraded)
		}
		if slices.Contains(types, events.MemoryMarkdown) {
			md, err := s.searchMarkdown(ctx, docstore.Namespace{Tenant: tenant, User: owner}, req.Query, pol.RecentDays, limit)
			if err != nil {
				return events.SearchReply{}, err
			}
			hits = append(hits, md...)
		}
		for i := first; i < len(hits); i++ {
			hits[i].Scope = events.OwnerScope(owner)
		}
	}
	return events.SearchReply{Results: mergeHits(hits, perType, limit, s.cfg.MinScore), Degraded: degraded}, nil
}

// mergeHits orders hits of every type by score, best first (ties by id), and
// keeps those scoring at least minScore, at most perType[t] of a type t listed
// there, and at most limit in all.
func mergeHits(hits []events.SearchResult, perType map[events.MemoryType]int, limit int, minScore float64) []events.SearchResult {
	slices.SortStableFunc(hits, func(a, b events.SearchResult) int {
		if c := cmp.Compare(b.Score, a.Score); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	out := []events.SearchResult{}
	taken := map[events.MemoryType]int{}
	for _, h := range hits {
		if len(out) == limit {
			break
		}
		if k, bounded := perType[h.MemoryType]; h.Score < minScore || bounded && taken[h.MemoryType] == k {
			continue
		}
		taken[h.MemoryType]++
		out = append(out, h)
	}
	return out
}

// searchMarkdown scores the chunks of MEMORY.md and of the last recentDays daily
// notes against query as one BM25 corpus; ids are "<file>#L<start>-<end>". A
// score is the chunk's BM25 over the best chunk's, the scale of the vector
// memories' keyword relevance: raw BM25 grows with the query's length and
// rare words, and would rank every chunk above every memory.
func (s *Service) searchMarkdown(ctx context.Context, ns docstore.Namespace, query string, recentDays, limit int) ([]events.SearchResult, error) {
	q := bm25.Tokenize(query)
	if len(q) == 0 {
		return nil, nil
	}
	doc, err := s.readOptional(ctx, ns, docstore.MemoryFile)
	if err != nil {
		return nil, err
	}
	files := []docstore.DailyNote{{Name: docstore.MemoryFile, Content: doc}}
	notes, err := s.deps.Docs.RecentDailyNotes(ctx, ns, recentDays)
	if err != nil {
		return nil, fmt.Errorf("recent daily notes: %w", err)
	}
	files = append(files, notes...)
	type located struct {
		file  string
		chunk markdown.Chunk
	}
	var (
		chunks []located
		tokens [][]string
	)
	for _, f := range files {
		for _, c := range markdown.Chunks(f.Content) {
			chunks = append(chunks, located{f.Name, c})
			tokens = append(tokens, bm25.Tokenize(c.Text))
		}
	}
	hits := bm25.NewIndex(tokens, bm25.DefaultParams()).Search(q, limit)
	out := make([]events.SearchResult, len(hits))
	for i, h := range hits {
		c := chunks[h.Doc]
		out[i] = events.SearchResult{ID: chunkID(c.file, c.chunk), MemoryType: events.MemoryMarkdown, Text: c.chunk.Text, Score: h.Score / hits[0].Score, Source: c.file}
	}
	return out, nil
}

// topic answers memory_read_topic (SPEC A5). The name was checked against the
// whitelist by TopicRequest.Validate; a topic file not written yet reads as "".
func (s *Service) topic(ctx context.Context, tenant string, req events.TopicRequest) (events.TopicReply, error) {
	file, err := events.TopicFile(req.Topic)
	if err != nil {
		return events.TopicReply{}, fmt.Errorf("%w: %w", events.ErrInvalidRequest, err)
	}
	content, err := s.readOptional(ctx, docstore.Namespace{Tenant: tenant, User: req.UserID}, file)
	return events.TopicReply{Topic: strings.TrimSuffix(file, ".md"), Content: content}, err
}

func (s *Service) consolidate(ctx context.Context, tenant string, req events.ConsolidateRequest) (any, error) {
	if s.deps.Consolidator == nil {
		return nil, fmt.Errorf("%w: this retriever has no consolidator", ErrUnavailable)
	}
	return s.record(ctx, tenant, events.EndpointConsolidate, req)
}

// sessionSummary answers session.summary from the session state: counts, and
// Deps.Summarize over the recent messages it keeps.
func (s *Service) sessionSummary(ctx context.Context, tenant string, req events.SessionRequest) (events.SessionSummaryReply, error) {
	st, err := s.deps.Sessions.Get(ctx, tenant, req.UserID, req.SessionID)
	if err != nil {
		return events.SessionSummaryReply{}, err
	}
	key := tenant + "." + req.UserID + "." + req.SessionID
	turns, err := s.deps.Sessions.CountTurns(ctx, key)
	if err != nil {
		return events.SessionSummaryReply{}, err
	}
	// The session's running summary (SPEC B2), when it has one, then a digest of
	// the messages after it; else a digest of the messages the state keeps.
	sum, err := s.storedSummary(ctx, tenant, st)
	if err != nil {
		return events.SessionSummaryReply{}, err
	}
	text := s.summarize(st.Recent)
	if sum.LastEventID != "" {
		text = s.summaryText(tenant, sum.Text, sum.After(st.Recent))
	}
	return events.SessionSummaryReply{
		SessionID:    req.SessionID,
		Summary:      text,
		MessageCount: st.Messages,
		TurnCount:    turns,
	}, nil
}

// sessionClear deletes the session's events from the stream, then records and
// applies the clearing of its state, turns and session-scoped memory items;
// Deleted is the sum of the three.
func (s *Service) sessionClear(ctx context.Context, tenant string, req events.SessionRequest) (events.DeleteReply, error) {
	n, err := s.deps.Events.DeleteSession(ctx, tenant, req.UserID, req.SessionID)
	if err != nil {
		return events.DeleteReply{}, err
	}
	reply, err := s.record(ctx, tenant, events.EndpointSessionClear, req)
	if err != nil {
		return events.DeleteReply{}, err
	}
	cleared, _ := reply.(events.DeleteReply)
	return events.DeleteReply{Deleted: n + cleared.Deleted}, nil
}

// sessionArchive answers session.archive: one document with the session's
// envelopes, turns, session items and summary. A session with none of them is 404.
func (s *Service) sessionArchive(ctx context.Context, tenant string, req events.SessionRequest) (events.SessionArchive, error) {
	stored, err := s.deps.Events.ListSession(ctx, tenant, req.UserID, req.SessionID, 0, 0)
	if err != nil {
		return events.SessionArchive{}, err
	}
	key := tenant + "." + req.UserID + "." + req.SessionID
	turns, err := s.deps.Sessions.ListTurns(ctx, key)
	if err != nil {
		return events.SessionArchive{}, err
	}
	items, err := s.deps.Memories.ListItems(ctx, tenant, events.ItemScopeRequest{UserID: req.UserID, Scope: events.ScopeSession, SessionID: req.SessionID, Limit: events.MaxLimit})
	if err != nil {
		return events.SessionArchive{}, err
	}
	if len(stored) == 0 && len(turns) == 0 && len(items.Items) == 0 {
		return events.SessionArchive{}, fmt.Errorf("%w: session %s has no events, turns or items", ErrNotFound, key)
	}
	a := events.SessionArchive{
		SchemaVersion: events.SchemaVersion, Tenant: tenant, UserID: req.UserID, SessionID: req.SessionID,
		ArchivedTS: s.deps.Now().UTC(), Turns: turns, Items: items.Items,
	}
	var conv []session.Message
	for _, st := range stored {
		a.Events = append(a.Events, st.Envelope)
		if o := st.Envelope.Observation; o != nil && o.EffectiveKind() == events.KindMessage {
			conv = append(conv, session.Message{Role: o.Role, Text: o.Text, TS: st.Envelope.TS, EventID: st.Envelope.ID})
		}
	}
	a.Summary = s.summarize(conv)
	return a, nil
}

// summarize is Deps.Summarize over conv, its texts clipped.
func (s *Service) summarize(conv []session.Message) string {
	return s.deps.Summarize(s.clipTexts(conv), s.cfg.SummaryMaxChars)
}

// summaryText is a session's summary as session.summary and the context pack
// give it (SPEC B2): the running summary prev ("" for none), then a digest of
// msgs, tenant's messages after it, by the offline summariser
// (lifecycle.SummarizeExtractive: the sentences with a name, number, date, file
// name, identifier, decision or error; deterministic, so no model is on a
// request's path), at most SummaryMaxChars, the newest lines kept. Each
// message's sentences are found once (keyLines).
func (s *Service) summaryText(tenant, prev string, msgs []session.Message) string {
	digest := ""
	if len(msgs) > 0 {
		digest = lifecycle.SummarizeExtractiveLines("", s.clipTexts(msgs), s.cfg.SummaryMaxChars, func(m session.Message) []string {
			key := tenant + "/" + m.EventID
			if lines, ok := s.keyLines.Get(key); ok {
				return lines
			}
			lines := lifecycle.KeyLines(m)
			s.keyLines.Add(key, lines)
			return lines
		})
	}
	switch {
	case prev == "":
		return digest
	case digest == "":
		return prev
	}
	return prev + "\n\n" + digest
}

// clipTexts copies conv with each text cut to MaxTextBytes: a message stored
// before the limits existed (hundreds of kilobytes) would hold a request for
// seconds.
func (s *Service) clipTexts(conv []session.Message) []session.Message {
	clipped := make([]session.Message, len(conv))
	for i, m := range conv {
		if n := s.cfg.MaxTextBytes; len(m.Text) > n {
			for n > 0 && !utf8.RuneStart(m.Text[n]) {
				n--
			}
			m.Text = m.Text[:n]
		}
		clipped[i] = m
	}
	return clipped
}

// sessionRestore answers session.restore. Each archived envelope not in the stream
// is re-published with its own id and body, so ingest rebuilds the session from it;
// turns and items are upserts by key, recorded and applied as a write. Restoring
// twice changes nothing.
//
// The publish's Nats-Msg-Id is "<archived_ts>-<event id>" rather than the event id:
// a purge does not clear the stream's duplicate window, so right after a
// session.clear a publish under the event's own id would be dropped as a duplicate.
// Two concurrent restores of one archive share the ids and store each event once.
func (s *Service) sessionRestore(ctx context.Context, tenant string, a events.SessionArchive) (events.SessionRestoreReply, error) {
	if a.Tenant != tenant {
		return events.SessionRestoreReply{}, fmt.Errorf("%w: archive tenant %q does not match the request subject's tenant %q", events.ErrInvalidRequest, a.Tenant, tenant)
	}
	// Refused before any event is republished, so that a restore over the
	// quota changes nothing (its events then pass ingest's checks like any
	// observation).
	if err := s.withinQuota(ctx, tenant, quotaOf(events.EndpointSessionRestore, a), false); err != nil {
		return events.SessionRestoreReply{}, err
	}
	stored, err := s.deps.Events.ListSession(ctx, tenant, a.UserID, a.SessionID, 0, 0)
	if err != nil {
		return events.SessionRestoreReply{}, err
	}
	present := make(map[string]bool, len(stored))
	for _, st := range stored {
		present[st.Envelope.ID] = true
	}
	reply := events.SessionRestoreReply{SessionID: a.SessionID}
	stamp := a.ArchivedTS.UTC().Format("20060102T150405.000000000Z")
	for _, env := range a.Events {
		if present[env.ID] {
			continue
		}
		ack, err := s.republish(ctx, env, stamp+"-"+env.ID)
		if err != nil {
			return reply, err
		}
		if !ack.Duplicate {
			reply.Events++
		}
		present[env.ID] = true
	}
	applied, err := s.record(ctx, tenant, events.EndpointSessionRestore, a)
	if err != nil {
		return reply, err
	}
	if r, ok := applied.(events.SessionRestoreReply); ok {
		reply.Turns, reply.Items = r.Turns, r.Items
	}
	return reply, nil
}

func (s *Service) republish(ctx context.Context, env events.Envelope, msgID string) (*jetstream.PubAck, error) {
	subject, err := env.Subject()
	if err != nil {
		return nil, err
	}
	data, err := json.Marshal(env)
	if err != nil {
		return nil, err
	}
	ack, err := s.deps.JS.Publish(ctx, subject, data, jetstream.WithMsgID(msgID))
	if err != nil {
		return nil, fmt.Errorf("restore event %s: %w", env.ID, err)
	}
	return ack, nil
}
