// Package ingest is the first stream worker: it validates every observation (the
// pipeline dead-letters what does not decode), folds it into its session's state
// (counts, recent messages, turns: SPEC D3) and writes the episodic memories the write
// decider keeps (SPEC C3) into the vector store.
//
// Every step is idempotent, so redelivery is harmless: the session state remembers
// the ids of applied events, and an episodic record's id derives from its event id,
// so a second delivery upserts the same record.
package ingest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/bus"
	"github.com/agentmem/agentmem/pkg/embed"
	"github.com/agentmem/agentmem/pkg/eventstore"
	"github.com/agentmem/agentmem/pkg/obs"
	"github.com/agentmem/agentmem/pkg/pipeline"
	"github.com/agentmem/agentmem/pkg/policy"
	"github.com/agentmem/agentmem/pkg/priority"
	"github.com/agentmem/agentmem/pkg/processor"
	"github.com/agentmem/agentmem/pkg/quota"
	"github.com/agentmem/agentmem/pkg/records"
	"github.com/agentmem/agentmem/pkg/redact"
	"github.com/agentmem/agentmem/pkg/session"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// ErrInvalidConfig is returned for a Config or Deps that cannot work.
var ErrInvalidConfig = errors.New("ingest: invalid config")

// Config configures the ingest worker.
type Config struct {
	// Consumer is the durable; default bus.WorkerConsumer(bus.WorkerIngest, defaults).
	Consumer bus.ConsumerSpec
	// Concurrency is how many observations one replica has in flight; default
	// four times Batch.MaxSize, so that batches fill while others are stored.
	Concurrency int
	// Batch groups the observations in flight: one session-state write per session,
	// one embedding call and one vector-store transaction per batch.
	Batch  pipeline.BatchConfig
	Router bus.RouterConfig
	// ContextMessages is how many messages said before an observation in its
	// session its episodic memory keeps as context (records.Observation.Before);
	// default DefaultContextMessages, negative for none.
	ContextMessages int
	// Limits bound each observation (events.Admit): one outside them is
	// dead-lettered, naming the field and the limit.
	Limits events.Limits
	// DecideConcurrency is how many write decisions of one batch run at once;
	// default 1, one after another, which is fastest for the rule-based decider.
	// With a model each decision is a round trip: app sets it to llm.concurrency,
	// and the model client's own bound (shared by every step of the process) is
	// what limits the calls in flight to the endpoint. A processor.BatchDecider
	// (the model's decider) is given the whole batch at once instead.
	DecideConcurrency int
	// Summary is when a session's summary is due (SPEC B2); the zero value
	// announces none.
	Summary session.SummaryTrigger
}

// DefaultContextMessages is Config.ContextMessages' default: the question an
// utterance answers, and what came just before it (BENCHMARKS.md: on LoCoMo, two
// messages of context took recall@10 from 60 to about 77).
const DefaultContextMessages = 2

// Deps are the parts the worker uses. Decider, Vectors and Embedder go together:
// without them no episodic memory is written.
type Deps struct {
	Dial pipeline.Dialer
	JS   jetstream.JetStream // publishes memory_written
	// Events claims each observation's id (eventstore.Store.Claim): one whose id
	// an earlier event with other content owns is dead-lettered. Nil claims none.
	Events   *eventstore.Store
	Sessions *session.Store
	Decider  processor.WriteDecider
	Vectors  vectorstore.Store
	Embedder embed.Embedder
	Metrics  *obs.Metrics
	// Gate, when set, holds each batch back while the process serves reads
	// (priority.Gate.Background), so that a backlog does not slow context requests.
	Gate *priority.Gate
	// Policy, when set, is a session's policy (its namespace's overrides
	// overlaid, fixed for the session: lifecycle.Policies): its
	// session_summary_* keys then replace Config.Summary's, so an evolved
	// threshold reaches new sessions (SPEC B5).
	Policy func(ctx context.Context, tenant, user, session string) policy.Policy
	// Rate is the tenants' events_per_second quota, taken per observation in
	// the stream's time; Memories their memories quota, checked before a
	// batch's episodes are stored. An observation over either is dead-lettered
	// with class quota. Nil limits nothing.
	Rate     *quota.Rate
	Memories *quota.Meter
}

func (d Deps) validate() error {
	if d.Dial == nil || d.JS == nil || d.Sessions == nil {
		return fmt.Errorf("%w: Dial, JS and Sessions are required", ErrInvalidConfig)
	}
	if (d.Decider == nil) != (d.Vectors == nil) || (d.Vectors == nil) != (d.Embedder == nil) {
		return fmt.Errorf("%w: Decider, Vectors and Embedder must be set together", ErrInvalidConfig)
	}
	return nil
}

// Worker is the ingest worker.
type Worker struct {
	deps            Deps
	worker          *pipeline.Worker
	logger          *zap.Logger
	contextMessages int
	decideParallel  int
	summary         session.SummaryTrigger
	order           applyOrder
}

// New returns an ingest worker; nothing connects before Run.
func New(cfg Config, deps Deps, logger *zap.Logger) (*Worker, error) {
	if err := deps.validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	if cfg.Consumer.Durable == "" {
		cfg.Consumer = bus.WorkerConsumer(bus.WorkerIngest, bus.ConsumerDefaults{})
	}
	switch {
	case cfg.ContextMessages == 0:
		cfg.ContextMessages = DefaultContextMessages
	case cfg.ContextMessages < 0:
		cfg.ContextMessages = 0
	}
	if cfg.DecideConcurrency < 0 {
		return nil, fmt.Errorf("%w: DecideConcurrency %d is negative", ErrInvalidConfig, cfg.DecideConcurrency)
	}
	if err := cfg.Summary.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	w := &Worker{deps: deps, logger: logger, contextMessages: cfg.ContextMessages, decideParallel: max(1, cfg.DecideConcurrency), summary: cfg.Summary,
		order: applyOrder{last: make(map[sessionOf]chan struct{})}}
	pw, err := pipeline.NewBatch(pipeline.Config{
		Worker:      bus.WorkerIngest,
		Limits:      cfg.Limits,
		Consumer:    cfg.Consumer,
		Concurrency: cfg.Concurrency,
		Router:      cfg.Router,
		Dial:        deps.Dial,
		Metrics:     deps.Metrics,
		Claim:       claimOf(deps.Events),
		Quota:       rateOf(deps.Rate),
	}, cfg.Batch, w.HandleBatch, logger)
	if err != nil {
		return nil, err
	}
	w.worker = pw
	return w, nil
}

// claimOf is events' Claim, or none without an event store.
func claimOf(st *eventstore.Store) func(context.Context, events.Envelope, string, uint64) error {
	if st == nil {
		return nil
	}
	return st.Claim
}

// rateOf takes each observation from its tenant's bucket; nil without a rate.
// Write events are not counted: the retriever checked their quotas.
func rateOf(r *quota.Rate) func(events.Envelope, time.Time) error {
	if r == nil {
		return nil
	}
	return func(env events.Envelope, storedAt time.Time) error {
		if env.Type != events.TypeObservation {
			return nil
		}
		return r.Take(env.Tenant, storedAt)
	}
}

// Run consumes observations until ctx ends.
func (w *Worker) Run(ctx context.Context) error { return w.worker.Run(ctx) }

// Ready reports whether the worker consumes.
func (w *Worker) Ready(ctx context.Context) error { return w.worker.Ready(ctx) }

// HandleBatch applies a batch of observations and returns one result per event; it
// is the pipeline's batch handler, exported for benchmarks that drive ingest
// without a stream. Per batch it makes one session-state compare-and-set per
// session, one Embed call, one vector-store Upsert and one memory_written per
// session, whose publish acks it waits for: an observation's result is nil only
// once everything it produced is stored.
func (w *Worker) HandleBatch(ctx context.Context, envs []events.Envelope) []error {
	errs := make([]error, len(envs))
	// The batch's place is taken before anything can delay it (the gate below).
	turns := w.order.enter(envs)
	defer turns.leave()
	pipeline.Started(ctx)
	if err := w.deps.Gate.Background(ctx); err != nil {
		for i := range errs {
			errs[i] = fmt.Errorf("ingest: waiting for reads to go first: %w", err)
		}
		return errs
	}
	// Write events come too (bus: ingest reads mem.*.write.* so that one that does
	// not decode is dead-lettered): the retriever applied them when it recorded
	// them, so a decoded one is done here.
	obs, oerrs, at := envs, errs, []int(nil)
	if slices.ContainsFunc(envs, isWrite) {
		obs = nil
		for i, env := range envs {
			if !isWrite(env) {
				obs, at = append(obs, env), append(at, i)
			}
		}
		oerrs = make([]error, len(obs))
	}
	for i, env := range obs {
		if env.Type != events.TypeObservation {
			oerrs[i] = bus.Permanent(fmt.Errorf("ingest: %s event on an observation subject", env.Type))
		}
	}
	// The state comes first: an episode keeps the messages said before it, which
	// the session state holds once this batch is folded in.
	states, applied := w.applySessions(ctx, obs, oerrs, turns)
	turns.leave()
	w.writeEpisodes(ctx, obs, states, oerrs)
	w.announceSummaries(ctx, obs, states, applied, oerrs)
	for j, i := range at {
		errs[i] = oerrs[j]
	}
	return errs
}

func isWrite(env events.Envelope) bool { return env.Type == events.TypeWrite }

// writeEpisodes stores the episodic memories the decider keeps of the message
// observations still without an error (errs[i] == nil) and announces them,
// setting errs[i] for those that failed. It runs even when the session state had
// seen an event: the earlier delivery may have failed in between, and the upsert
// is idempotent.
func (w *Worker) writeEpisodes(ctx context.Context, envs []events.Envelope, states map[sessionOf]session.State, errs []error) {
	if w.deps.Decider == nil {
		return
	}
	var (
		recs   = make([]vectorstore.Record, 0, len(envs))
		texts  = make([]string, 0, len(envs)) // texts[j] is what recs[j] embeds
		owners = make([]int, 0, len(envs))    // owners[j] is the index in envs of recs[j]
	)
	for i, d := range w.decide(ctx, envs, states, errs) {
		switch {
		case d.err != nil:
			errs[i] = d.err
		case d.write:
			recs = append(recs, d.rec)
			texts = append(texts, d.statement)
			owners = append(owners, i)
		}
	}
	recs, texts, owners = w.withinQuota(ctx, envs, recs, texts, owners, errs)
	if len(recs) == 0 {
		return
	}
	_ = w.deps.Gate.Background(ctx) // between the batch's steps too
	if err := w.embed(ctx, recs, texts); err != nil {
		for _, i := range owners {
			errs[i] = err
		}
		return
	}
	_ = w.deps.Gate.Background(ctx)
	for j, err := range w.store(ctx, recs) {
		errs[owners[j]] = err
	}
	w.publishWritten(ctx, envs, recs, owners, errs)
}

// withinQuota keeps the episodes (recs, texts[j] what recs[j] embeds, owners[j]
// its index in envs) of the tenants whose memories quota holds them, setting
// errs of the others' observations; it counts the kept ones as held.
func (w *Worker) withinQuota(ctx context.Context, envs []events.Envelope, recs []vectorstore.Record, texts []string, owners []int, errs []error) ([]vectorstore.Record, []string, []int) {
	if w.deps.Memories == nil || len(recs) == 0 {
		return recs, texts, owners
	}
	adding := map[string]int{}
	for _, r := range recs {
		adding[r.Tenant]++
	}
	refused := map[string]error{}
	for tenant, n := range adding {
		if err := w.deps.Memories.Check(ctx, tenant, quota.Memories, n); err != nil {
			refused[tenant] = err // over quota: dead-lettered at once (bus.IsPermanent)
		}
	}
	keep := 0
	for j, r := range recs {
		if err := refused[r.Tenant]; err != nil {
			errs[owners[j]] = err
			continue
		}
		recs[keep], texts[keep], owners[keep] = r, texts[j], owners[j]
		keep++
	}
	for tenant, n := range adding {
		if refused[tenant] == nil {
			w.deps.Memories.Added(tenant, quota.Memories, n)
		}
	}
	return recs[:keep], texts[:keep], owners[:keep]
}

// applySessions folds the observations still without an error (errs[i] == nil)
// into their sessions' states, one compare-and-set per session, the sessions
// concurrently (each is two round trips), each after the batches that started
// before this one applied it (applyOrder), and returns the states written. A
// session's failure is the result of each of its observations in errs, and so is
// a conflict: an event id applied before with other content (dead-lettered).
//
// applied says, per session, what of the batch was new to its state.
func (w *Worker) applySessions(ctx context.Context, envs []events.Envelope, errs []error, turns *turns) (map[sessionOf]session.State, map[sessionOf]appliedShare) {
	groups := map[sessionOf][]int{}
	for i, env := range envs {
		if errs[i] == nil {
			k := sessionOf{env.Tenant, env.UserID, env.SessionID}
			groups[k] = append(groups[k], i)
		}
	}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		states  = make(map[sessionOf]session.State, len(groups))
		applied = make(map[sessionOf]appliedShare, len(groups))
	)
	for k, idx := range groups {
		wg.Go(func() {
			batch := make([]events.Envelope, len(idx))
			for j, i := range idx {
				batch[j] = envs[i]
			}
			var (
				st       session.State
				outcomes []session.Outcome
			)
			err := turns.wait(ctx, k)
			if err == nil {
				st, outcomes, err = w.deps.Sessions.ApplyBatch(ctx, batch...)
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				for _, i := range idx {
					errs[i] = err
				}
				return
			}
			var share appliedShare
			for j, o := range outcomes {
				if o == session.Applied {
					share.add(envs[idx[j]])
				}
				if o == session.Conflict {
					// Never an overwrite of what the first event with this id wrote.
					errs[idx[j]] = bus.Permanent(fmt.Errorf("%w: %s", session.ErrEventIDReused, envs[idx[j]].ID))
				}
			}
			states[k] = st
			applied[k] = share
		})
	}
	wg.Wait()
	return states, applied
}

// decision is the write decision of one observation: see episode.
type decision struct {
	rec       vectorstore.Record
	statement string
	write     bool
	err       error
}

// yieldEvery is how many rule decisions a batch makes between two yields to reads
// (priority.Gate.Background): about half a millisecond of CPU.
const yieldEvery = 8

// decide runs the write decision of every message observation of envs still
// without an error and returns them by index in envs (the zero decision, no
// write, for the others): with a processor.BatchDecider in one DecideBatch call,
// otherwise up to decideParallel at once. In a batch of a hundred messages and a
// model answering in seconds, one after another would take minutes.
func (w *Worker) decide(ctx context.Context, envs []events.Envelope, states map[sessionOf]session.State, errs []error) []decision {
	out := make([]decision, len(envs))
	var asked []int // indices in envs of the messages to decide
	for i, env := range envs {
		if errs[i] == nil && env.Observation.EffectiveKind() == events.KindMessage && strings.TrimSpace(env.Observation.Text) != "" {
			asked = append(asked, i)
		}
	}
	cobs := make([]records.Observation, len(envs))
	clean := cleaned{}
	for _, i := range asked {
		env := envs[i]
		st := states[sessionOf{env.Tenant, env.UserID, env.SessionID}]
		at := slices.IndexFunc(st.Recent, func(m session.Message) bool { return m.EventID == env.ID })
		if at >= 0 {
			// Folding the message into its state cleaned its text already.
			clean.seed(env.Observation.Text, st.Recent[at].Text)
		}
		cobs[i] = observation(env, messagesBefore(st, at, w.contextMessages), clean)
	}
	if bd, ok := w.deps.Decider.(processor.BatchDecider); ok && len(asked) > 0 {
		// One call for the batch: a model decides many messages per request, the
		// requests concurrently, so its latency is paid about once per batch.
		batch := make([]records.Observation, len(asked))
		for j, i := range asked {
			batch[j] = cobs[i]
		}
		eps, err := bd.DecideBatch(ctx, batch)
		for j, i := range asked {
			if err != nil {
				out[i].err = fmt.Errorf("ingest: write decision for %s: %w", envs[i].ID, err)
				continue
			}
			out[i].rec, out[i].statement, out[i].write = episode(envs[i], cobs[i], eps[j])
		}
		return out
	}
	one := func(i int) {
		ep, err := w.deps.Decider.Decide(ctx, cobs[i])
		if err != nil {
			out[i].err = fmt.Errorf("ingest: write decision for %s: %w", envs[i].ID, err)
			return
		}
		out[i].rec, out[i].statement, out[i].write = episode(envs[i], cobs[i], ep)
	}
	var (
		wg    sync.WaitGroup
		slots = make(chan struct{}, w.decideParallel)
	)
	for n, i := range asked {
		if w.decideParallel == 1 {
			// A batch of rule decisions is milliseconds of CPU: reads that came
			// meanwhile go first every few observations, not after the batch.
			if n%yieldEvery == 0 {
				_ = w.deps.Gate.Background(ctx)
			}
			one(i)
			continue
		}
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			one(i)
		})
	}
	wg.Wait()
	return out
}

// messagesBefore returns the (at most n) messages of st said just before
// st.Recent[at], the message an episode is made of (at -1 when the state does not
// hold it), as episode context, oldest first. Earlier batches applied theirs first
// (applyOrder); a message that reached a later batch (a redelivery, another
// replica) is not in the state yet and is missed: the episode is then stored with
// less context, never delayed.
func messagesBefore(st session.State, at, n int) []records.Utterance {
	if n <= 0 || at <= 0 {
		return nil
	}
	out := make([]records.Utterance, 0, min(n, at))
	for _, m := range st.Recent[max(0, at-n):at] {
		out = append(out, records.Utterance{Role: string(m.Role), Who: records.Speaker(m.Meta), Text: m.Text, EventID: m.EventID, Meta: m.Meta})
	}
	return out
}

// sessionOf identifies a session.
type sessionOf struct{ tenant, userID, sessionID string }

// cleaned memoizes redact.Clean over a batch: a message of a session is also
// the context (messagesBefore) of the next ones, most often in the same batch,
// and cleaning it each time was about 3% of ingest's CPU per observation.
type cleaned map[string]string

// seed records out, the session state's copy of a message (session.Store cleans
// each text it folds in), as what text cleans to: the state already paid for it,
// and cleaning it again was half of the batch's redact.Clean calls.
func (c cleaned) seed(text, out string) { c[text] = out }

func (c cleaned) of(text string) string {
	out, ok := c[text]
	if !ok {
		out = redact.Clean(text)
		c[text] = out
	}
	return out
}

// observation is what the write decider sees of env: its texts cleaned of
// credentials and planted instructions (pkg/redact), keeping before as its
// context.
func observation(env events.Envelope, before []records.Utterance, clean cleaned) records.Observation {
	o := env.Observation
	for i := range before {
		before[i].Text = clean.of(before[i].Text)
	}
	return records.Observation{
		Role:    string(o.Role),
		Text:    clean.of(o.Text),
		TS:      env.TS,
		ChatID:  env.SessionID,
		Who:     records.Speaker(o.Meta),
		EventID: env.ID,
		Meta:    o.Meta,
		Before:  before,
	}
}

// episode builds the episodic record of env's decision ep, without its vector,
// and the statement to embed (records.EpisodeStatement); write is false when the
// decider keeps nothing. The record's id derives from the event id, so a
// redelivery upserts the same record.
func episode(env events.Envelope, cobs records.Observation, ep records.Episode) (rec vectorstore.Record, statement string, write bool) {
	if !ep.Write {
		return rec, "", false
	}
	return records.EpisodeRecord(env.Tenant, env.UserID, cobs, ep), records.EpisodeStatement(cobs, ep), true
}

// embed sets the vectors of recs, texts[i] being what recs[i] embeds, with one
// Embed call.
func (w *Worker) embed(ctx context.Context, recs []vectorstore.Record, texts []string) error {
	vecs, err := w.deps.Embedder.Embed(ctx, texts)
	if err == nil && len(vecs) != len(recs) {
		err = fmt.Errorf("%d vectors for %d texts", len(vecs), len(recs))
	}
	if err != nil {
		return fmt.Errorf("ingest: embed %d episodes: %w", len(recs), err)
	}
	for i := range recs {
		recs[i].Vector = vecs[i]
	}
	return nil
}

// store upserts recs at once and returns one result per record. When the batch
// fails, each record is upserted alone to find the ones that fail: a record that
// can never be stored (an id another namespace holds) must not take the rest of
// its batch down with it through every retry.
func (w *Worker) store(ctx context.Context, recs []vectorstore.Record) []error {
	errs := make([]error, len(recs))
	err := w.deps.Vectors.Upsert(ctx, recs...)
	if err == nil {
		return errs
	}
	if len(recs) == 1 {
		errs[0] = fmt.Errorf("ingest: store episode %s: %w", recs[0].ID, err)
		return errs
	}
	w.logger.Warn("batch upsert failed; storing its episodes one by one", zap.Int("episodes", len(recs)), zap.Error(err))
	for i, r := range recs {
		if err := w.deps.Vectors.Upsert(ctx, r); err != nil {
			errs[i] = fmt.Errorf("ingest: store episode %s: %w", r.ID, err)
		}
	}
	return errs
}

// publishWritten tells the consolidator, once per session of the batch, which
// memories were stored; the publishes go out together and their acks are awaited.
// A failed publish fails the observations whose memories it announced, so they are
// retried (re-upserting the same records). The message id derives from the memory
// ids, so a redelivered batch of the same observations publishes nothing new.
func (w *Worker) publishWritten(ctx context.Context, envs []events.Envelope, recs []vectorstore.Record, owners []int, errs []error) {
	type announcement struct {
		src    events.Envelope
		ids    []string
		owners []int
	}
	var (
		order []sessionOf
		byKey = map[sessionOf]*announcement{}
	)
	for j, i := range owners {
		if errs[i] != nil {
			continue
		}
		env := envs[i]
		k := sessionOf{env.Tenant, env.UserID, env.SessionID}
		a := byKey[k]
		if a == nil {
			a = &announcement{src: env}
			byKey[k] = a
			order = append(order, k)
		}
		a.ids = append(a.ids, recs[j].ID)
		a.owners = append(a.owners, i)
	}
	futures := make([]jetstream.PubAckFuture, len(order))
	fail := func(a *announcement, err error) {
		err = fmt.Errorf("ingest: publish memory_written for %s: %w", a.src.ID, err)
		for _, i := range a.owners {
			errs[i] = err
		}
	}
	for n, k := range order {
		a := byKey[k]
		msg, err := eventstore.Msg(writtenEvent(a.src, a.ids))
		if err != nil {
			fail(a, bus.Permanent(err))
			continue
		}
		if futures[n], err = w.deps.JS.PublishMsgAsync(msg); err != nil {
			fail(a, err)
		}
	}
	for n, f := range futures {
		if f == nil {
			continue
		}
		select {
		case <-f.Ok():
		case err := <-f.Err():
			fail(byKey[order[n]], err)
		case <-ctx.Done():
			fail(byKey[order[n]], ctx.Err())
		}
	}
}

// writtenEvent is the memory_written event announcing memoryIDs of src's session.
func writtenEvent(src events.Envelope, memoryIDs []string) events.Envelope {
	env := events.New(events.TypeMemoryWritten, src.Tenant, src.UserID, src.AgentID, src.SessionID)
	sorted := slices.Sorted(slices.Values(memoryIDs))
	sum := sha256.Sum256([]byte(strings.Join(sorted, "\n")))
	env.ID = "written-" + hex.EncodeToString(sum[:16])
	env.MemoryWritten = &events.MemoryWritten{MemoryIDs: memoryIDs, SourceSessionID: src.SessionID}
	return env
}
