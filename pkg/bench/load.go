package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/client"
	"github.com/agentmem/agentmem/pkg/docstore"
	"github.com/agentmem/agentmem/pkg/markdown"
	"github.com/agentmem/agentmem/pkg/processor"
	"github.com/agentmem/agentmem/pkg/records"
	"github.com/agentmem/agentmem/pkg/vectorstore"
	"github.com/agentmem/agentmem/pkg/vectorstore/embedded"
)

const (
	// loadBatch records are embedded and upserted together.
	loadBatch = 1000
	// semanticEvery: one memory in five is a semantic fact, the rest episodic.
	semanticEvery = 5
	// memoryLines is the size of the asked user's MEMORY.md (the auto-loaded 200).
	memoryLines = 200
	// askedSession is the asked user's open session and its length.
	askedSession         = "bench-session"
	askedSessionMessages = 20
)

// userID names the i-th user of a phase.
func userID(i int) string { return fmt.Sprintf("user-%04d", i) }

// askedUser is the user every context request asks for.
var askedUser = userID(0)

// load stores cfg.Memories memories and the asked user's Markdown memory and
// session.
func (b *bencher) load(ctx context.Context, res *Result) error {
	fmt.Fprintf(b.cfg.Progress, "== loading %d memories for %d users into the vector store\n", b.cfg.Memories, b.cfg.Users)
	began := time.Now()
	batches := make(chan []vectorstore.Record, 2)
	genErr := make(chan error, 1)
	genCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Embedding and SQLite writes overlap: one goroutine builds and embeds the next
	// batch while this one upserts the last.
	go func() {
		defer close(batches)
		genErr <- b.generate(genCtx, tenantLoad, b.cfg.Memories, b.cfg.Users, batches)
	}()
	prog := newProgress(b.cfg.Progress, "memories", b.cfg.Memories)
	stored := 0
	for batch := range batches {
		if err := b.rt.Vectors.Upsert(ctx, batch...); err != nil {
			return fmt.Errorf("bench: load memories: %w", err)
		}
		stored += len(batch)
		prog.update(stored)
	}
	if err := <-genErr; err != nil {
		return err
	}
	prog.finish(stored)
	res.LoadSeconds = time.Since(began).Seconds()
	res.LoadPerS = float64(stored) / res.LoadSeconds

	n, err := b.countMemories(ctx, tenantLoad, b.cfg.Users, nil)
	if err != nil {
		return err
	}
	if n != b.cfg.Memories {
		return fmt.Errorf("%w: the vector store holds %d memories after loading %d", ErrMeasurement, n, b.cfg.Memories)
	}
	res.Memories = n
	// The file alone, every write copied into it: the WAL's length at any moment
	// depends on when the background checkpoint last ran, and counting it made
	// this figure swing by a third from run to run.
	if e, ok := b.rt.Vectors.(*embedded.Store); ok {
		if err := e.Checkpoint(ctx); err != nil {
			return fmt.Errorf("bench: %w", err)
		}
	}
	res.VectorBytes = vectorFiles(b.rt.Config.Vector.Path)
	res.BytesPerMemory = float64(res.VectorBytes) / float64(n)
	if err := b.loadMarkdown(ctx); err != nil {
		return err
	}
	return b.openSession(ctx)
}

// generate sends batches of records built the way the pipeline builds them:
// episodic records from the write decider's episode with the observation's
// provenance, semantic records from facts: memories of tenant over users.
func (b *bencher) generate(ctx context.Context, tenant string, memories, users int, out chan<- []vectorstore.Record) error {
	gen := newTexts(1)
	decider := processor.NewRuleDecider()
	base := time.Now().UTC().Add(-365 * 24 * time.Hour).Truncate(time.Second)
	seenFacts := map[string]bool{} // a fact's id derives from its text: two equal facts are one record
	for start := 0; start < memories; start += loadBatch {
		recs := make([]vectorstore.Record, 0, min(loadBatch, memories-start))
		texts := make([]string, 0, cap(recs))
		for n := start; n < start+cap(recs); n++ {
			user := userID(n % users)
			k := n / users // the user's k-th memory
			chat := fmt.Sprintf("chat-%d", k/5)
			ts := base.Add(time.Duration(n) * 300 * time.Millisecond)
			eventID := fmt.Sprintf("load-%08d", n)
			text := gen.fact()
			var rec vectorstore.Record
			if n%semanticEvery == semanticEvery-1 {
				for seenFacts[user+"\x00"+text] {
					text = gen.fact()
				}
				seenFacts[user+"\x00"+text] = true
				rec = records.FactRecord(tenant, user, records.Fact{Fact: text, SourceChatID: chat, FirstSeen: ts})
			} else {
				obs := records.Observation{Role: string(events.RoleUser), Text: text, TS: ts, ChatID: chat, EventID: eventID}
				ep, err := decider.Decide(ctx, obs)
				if err != nil || !ep.Write {
					return fmt.Errorf("%w: the write decider did not keep generated memory %q (%s): %v", ErrMeasurement, text, ep.Reason, err)
				}
				rec = records.EpisodeRecord(tenant, user, obs, ep)
			}
			rec.Metadata[records.MetaSourceEventIDs] = []any{eventID}
			rec.Metadata[records.MetaSourceMeta] = []any{map[string]any{"dia_id": fmt.Sprintf("D%d:%d", k/5+1, k%5+1)}}
			recs = append(recs, rec)
			texts = append(texts, rec.Text)
		}
		vecs, err := b.rt.Embedder.Embed(ctx, texts)
		if err != nil {
			return fmt.Errorf("bench: embed memories: %w", err)
		}
		for i := range recs {
			recs[i].Vector = vecs[i]
		}
		select {
		case out <- recs:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// countMemories counts the memories of users 0..users-1 of tenant (of the given
// types; nil: all).
func (b *bencher) countMemories(ctx context.Context, tenant string, users int, types []vectorstore.MemoryType) (int, error) {
	total := 0
	for u := range users {
		n, err := b.rt.Vectors.Count(ctx, vectorstore.Filter{Tenant: tenant, UserID: userID(u), MemoryTypes: types})
		if err != nil {
			return 0, fmt.Errorf("bench: count memories: %w", err)
		}
		total += n
	}
	return total, nil
}

// loadMarkdown gives the asked user a MEMORY.md of memoryLines lines and both topic
// files, through the DocStore as the extractor writes them.
func (b *bencher) loadMarkdown(ctx context.Context) error {
	ns := docstore.Namespace{Tenant: tenantLoad, User: askedUser}
	gen := newTexts(2)
	at := time.Now().UTC().Add(-30 * 24 * time.Hour).Truncate(time.Minute)
	var topics []markdown.Entry
	for i := range 12 {
		topics = append(topics, markdown.Entry{Time: at.Add(time.Duration(i) * time.Hour), Category: markdown.CategoryFilePattern,
			Content: fmt.Sprintf("%s_%d.csv: columns %s; about %d rows", strings.ReplaceAll(pick(gen, datasets), " ", "_"), i, gen.columnList(), 1000*(i+1))})
	}
	for i := range 8 {
		topics = append(topics, markdown.Entry{Time: at.Add(time.Duration(i) * time.Hour), Category: markdown.CategoryUserPref,
			Content: fmt.Sprintf("Prefers %s charts for the %s report (preference %d).", pick(gen, charts), pick(gen, reports), i+1)})
	}
	if _, err := b.rt.Docs.AppendEntries(ctx, ns, topics); err != nil {
		return fmt.Errorf("bench: topic files: %w", err)
	}
	for i := 0; ; i++ {
		doc, err := b.rt.Docs.ReadFile(ctx, ns, docstore.MemoryFile)
		if err != nil && !errors.Is(err, docstore.ErrNotFound) {
			return fmt.Errorf("bench: read MEMORY.md: %w", err)
		}
		if strings.Count(string(doc), "\n") >= memoryLines {
			return nil
		}
		cat := markdown.CategoryGeneral
		if i%3 == 2 {
			cat = markdown.CategoryErrorSolution
		}
		e := markdown.Entry{Time: at.Add(time.Duration(i) * time.Minute), Category: cat, Content: fmt.Sprintf("%s (note %d)", gen.fact(), i+1)}
		if _, err := b.rt.Docs.AppendEntries(ctx, ns, []markdown.Entry{e}); err != nil {
			return fmt.Errorf("bench: MEMORY.md: %w", err)
		}
	}
}

// openSession publishes the asked user's open session through the pipeline: the
// context requests name it, so their packs carry its recent messages. Its messages
// are requests and replies the write decider does not keep.
func (b *bencher) openSession(ctx context.Context) error {
	cl, err := client.New(b.nc, client.Config{Tenant: tenantLoad, AgentID: agentID})
	if err != nil {
		return err
	}
	gen := newTexts(3)
	for i := range askedSessionMessages {
		role := events.RoleUser
		if i%2 == 1 {
			role = events.RoleAssistant
		}
		if _, err := cl.Say(ctx, askedUser, askedSession, role, gen.chat(role), map[string]any{"turn": i + 1}); err != nil {
			return fmt.Errorf("bench: open session: %w", err)
		}
	}
	return nil
}
