package extract

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/bus"
	"github.com/agentmem/agentmem/pkg/records"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// DefaultChunkMessages is the chunk size app configures with a model: long enough
// for context, short enough that a chunk's call fits one model timeout.
const DefaultChunkMessages = 40

// attemptMargin is added to a derived attempt deadline for the stream and store
// round trips around the model calls.
const attemptMargin = 30 * time.Second

// IngestReuse names the ingest durable whose write decisions the extractor reuses.
type IngestReuse struct {
	// Durable is ingest's consumer; "" makes the extractor decide every user
	// message itself.
	Durable string
	// Stream holding it; default bus.DefaultStream.
	Stream string
	// Wait bounds how long an extraction waits for ingest to have handled the
	// session's messages; past it the extractor decides the rest itself. 0 looks
	// once.
	Wait time.Duration
}

// AttemptBudget is the deadline of one extraction attempt for a session of
// messages messages: the waves of chunk extractions and of write decisions the
// extractor may have to make itself (ModelConcurrency at a time, each answering
// within CallTimeout), the semantic call, one call's worth of retries
// (CallBudget), the wait for ingest and a margin. Zero when no model is
// configured (CallTimeout 0): the Router's HandlerTimeout alone bounds it.
func (c WorkerConfig) AttemptBudget(messages int) time.Duration {
	if c.CallTimeout <= 0 {
		return 0
	}
	par := max(1, c.ModelConcurrency)
	chunks := 1
	if c.ChunkMessages > 0 {
		chunks = max(1, (messages+c.ChunkMessages-1)/c.ChunkMessages)
	}
	waves := (chunks+par-1)/par + (messages+par-1)/par + 1
	return time.Duration(waves)*c.CallTimeout + c.CallBudget + c.Ingest.Wait + attemptMargin
}

// split cuts conv into chunks of at most size messages; one chunk when size is 0.
func split(conv []Message, size int) [][]Message {
	if size <= 0 || len(conv) <= size {
		return [][]Message{conv}
	}
	var out [][]Message
	for start := 0; start < len(conv); start += size {
		out = append(out, conv[start:min(start+size, len(conv))])
	}
	return out
}

// chunkRecord is one chunk's extraction in the state bucket, kept until the
// session's extraction is stored so that a retry resumes after the chunks done.
type chunkRecord struct {
	Digest  string      `json:"digest"` // of the chunk's event ids: a late event re-cuts the chunks
	Entries []Extracted `json:"entries"`
	// ProcessedBy is ProcessedByRulesFallback when the rules stood in for the model.
	ProcessedBy string `json:"processed_by,omitempty"`
}

func chunkKey(key string, i int) string { return fmt.Sprintf("%s.chunk-%d", key, i) }

func chunkDigest(chunk []Message) string {
	ids := make([]string, len(chunk))
	for i, m := range chunk {
		ids[i] = m.EventID
	}
	sum := sha256.Sum256([]byte(strings.Join(ids, "\n")))
	return hex.EncodeToString(sum[:16])
}

// extractChunks returns the session's entries and how many chunks it was cut
// into. One chunk is asked as one conversation, exactly as without chunking. Past
// ChunkMessages the chunks are asked concurrently (ModelConcurrency at a time),
// each result stored under its own key as soon as it is known and reused by a
// retry; their entries are merged in chunk order without repeats.
func (w *Worker) extractChunks(ctx context.Context, key string, conv []Message, log *zap.Logger) (found []Extracted, n int, by string, err error) {
	chunks := split(conv, w.cfg.ChunkMessages)
	if len(chunks) == 1 {
		found, by, err := w.extractEntries(ctx, conv, log)
		return found, 1, by, err
	}
	results := make([]chunkRecord, len(chunks))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(1, w.cfg.ModelConcurrency))
	reused := 0
	for i, chunk := range chunks {
		ck, digest := chunkKey(key, i), chunkDigest(chunk)
		if prev, ok := w.loadChunk(ctx, ck, digest, log); ok {
			results[i] = prev
			reused++
			continue
		}
		g.Go(func() error {
			if err := gctx.Err(); err != nil {
				return err // another chunk failed: this one waits for the retry
			}
			found, by, err := w.extractEntries(gctx, chunk, log)
			if err != nil {
				return fmt.Errorf("chunk %d of %d: %w", i+1, len(chunks), err)
			}
			results[i] = chunkRecord{Digest: digest, Entries: found, ProcessedBy: by}
			w.storeChunk(gctx, ck, results[i], log)
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, len(chunks), "", err
	}
	if reused > 0 {
		log.Info("extraction resumed", zap.Int("chunks", len(chunks)), zap.Int("reused", reused))
	}
	var set entrySet
	for _, r := range results {
		for _, e := range r.Entries {
			set.add(e.Category, e.Content)
		}
		by = cmp.Or(by, r.ProcessedBy)
	}
	return set.list(), len(chunks), by, nil
}

// loadChunk returns a chunk's stored record when it was extracted from the same
// events.
func (w *Worker) loadChunk(ctx context.Context, ck, digest string, log *zap.Logger) (chunkRecord, bool) {
	e, err := w.state.Get(ctx, ck)
	if err != nil {
		if !errors.Is(err, jetstream.ErrKeyNotFound) {
			log.Warn("reading a chunk's extraction; asking again", zap.String("key", ck), zap.Error(err))
		}
		return chunkRecord{}, false
	}
	var rec chunkRecord
	if err := json.Unmarshal(e.Value(), &rec); err != nil || rec.Digest != digest {
		return chunkRecord{}, false
	}
	for _, x := range rec.Entries {
		if !ValidCategory(x.Category) {
			return chunkRecord{}, false
		}
	}
	return rec, true
}

// storeChunk keeps a chunk's entries; a failure costs only a repeated call on retry.
func (w *Worker) storeChunk(ctx context.Context, ck string, rec chunkRecord, log *zap.Logger) {
	data, err := json.Marshal(rec)
	if err == nil {
		_, err = w.state.Put(ctx, ck, data)
	}
	if err != nil {
		log.Warn("storing a chunk's extraction; a retry will ask again", zap.String("key", ck), zap.Error(err))
	}
}

// dropChunks deletes the chunk records once the session's extraction is stored.
func (w *Worker) dropChunks(ctx context.Context, key string, n int, log *zap.Logger) {
	if n <= 1 {
		return
	}
	for i := range n {
		if err := w.state.Delete(ctx, chunkKey(key, i)); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
			log.Debug("deleting a chunk record", zap.String("key", chunkKey(key, i)), zap.Error(err))
		}
	}
}

// userMessage is a user message of the session with what its write decision needs.
type userMessage struct {
	obs records.Observation
	seq uint64 // stream sequence of its observation
}

// episodes returns the episodic records of the session's user messages, in order:
// those ingest stored, looked up by their ids (which derive from the event ids),
// for the messages ingest has handled; the write decision of the others is made
// here, ModelConcurrency at a time. eventIDs[i] is the event of eps[i]. A message ingest handled without storing an
// episode was not worth one (or was dead-lettered): it is not asked about again.
func (w *Worker) episodes(ctx context.Context, env events.Envelope, users []userMessage, log *zap.Logger) (eps []vectorstore.Record, eventIDs []string, err error) {
	recs := make([]*vectorstore.Record, len(users))
	decided := w.ingestHandled(ctx, users, log)
	if decided > 0 {
		ids := make([]string, decided)
		at := make(map[string]int, decided)
		for i := range decided {
			ids[i] = records.EpisodeRecord(env.Tenant, env.UserID, users[i].obs, records.Episode{}).ID
			at[ids[i]] = i
		}
		found, err := w.deps.Vectors.Get(ctx, env.Tenant, env.UserID, ids...)
		if err != nil {
			return nil, nil, fmt.Errorf("extract: read ingest's episodes of session %s: %w", env.SessionID, err)
		}
		for _, r := range found {
			if i, ok := at[r.ID]; ok {
				recs[i] = &r
			}
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(1, w.cfg.ModelConcurrency))
	for i := decided; i < len(users); i++ {
		g.Go(func() error {
			if err := gctx.Err(); err != nil {
				return err
			}
			ep, err := w.deps.Decider.Decide(gctx, users[i].obs)
			if err != nil {
				return fmt.Errorf("extract: write decision for %s: %w", users[i].obs.EventID, err)
			}
			if ep.Write {
				rec := records.EpisodeRecord(env.Tenant, env.UserID, users[i].obs, ep)
				recs[i] = &rec
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, nil, err
	}
	if decided > 0 {
		log.Debug("write decisions reused from ingest", zap.Int("reused", decided), zap.Int("decided", len(users)-decided))
	}
	for i, r := range recs {
		if r != nil {
			eps = append(eps, *r)
			eventIDs = append(eventIDs, users[i].obs.EventID)
		}
	}
	return eps, eventIDs, nil
}

// ingestPoll is how often ingestHandled looks at ingest's progress.
const ingestPoll = 200 * time.Millisecond

// ingestHandled returns how many of users (in stream order) ingest has handled:
// its durable acked every message up to theirs (the ack floor). It waits up to
// Ingest.Wait for all of them; without ingest's durable it returns 0.
func (w *Worker) ingestHandled(ctx context.Context, users []userMessage, log *zap.Logger) int {
	if w.cfg.Ingest.Durable == "" || len(users) == 0 {
		return 0
	}
	stream := w.cfg.Ingest.Stream
	if stream == "" {
		stream = bus.DefaultStream
	}
	deadline := time.Now().Add(w.cfg.Ingest.Wait)
	handled := 0
	for {
		var floor uint64
		cons, err := w.deps.JS.Consumer(ctx, stream, w.cfg.Ingest.Durable)
		if err == nil {
			var info *jetstream.ConsumerInfo
			if info, err = cons.Info(ctx); err == nil {
				floor = info.AckFloor.Stream
			}
		}
		if err != nil {
			log.Debug("ingest's progress unknown; deciding the session's messages here", zap.Error(err))
			return 0
		}
		for handled < len(users) && users[handled].seq <= floor {
			handled++
		}
		if handled == len(users) || !time.Now().Before(deadline) {
			return handled
		}
		select {
		case <-ctx.Done():
			return handled
		case <-time.After(ingestPoll):
		}
	}
}
