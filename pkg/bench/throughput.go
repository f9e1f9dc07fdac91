package bench

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/bus"
	"github.com/agentmem/agentmem/pkg/config"
	"github.com/agentmem/agentmem/pkg/docstore"
	"github.com/agentmem/agentmem/pkg/eventstore"
	"github.com/agentmem/agentmem/pkg/markdown"
	"github.com/agentmem/agentmem/pkg/obs"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

const (
	// rawStream is the raw JetStream phase's own stream, outside mem.>.
	rawStream  = "AGENTMEM_BENCH"
	rawSubject = "agentmem-bench.obs"
	rawDurable = "bench-raw"
	// maxPendingPublishes bounds the async publishes awaiting their ack, in both
	// throughput phases alike; a publish beyond it waits up to stallWait for room
	// (the default 200 ms is too short on a loaded machine, and the wait is part of
	// what is measured).
	maxPendingPublishes = 2048
	stallWait           = 30 * time.Second
	// ingestUsers and sessionLength shape the ingest phase's traffic: many users,
	// sessions of sessionLength messages.
	ingestUsers   = 100
	sessionLength = 20
	// drainPoll is how often a drained consumer is looked for; it bounds the error
	// of the end time.
	drainPoll = 5 * time.Millisecond
)

// observations builds n valid observation envelopes of tenant, each a first-person
// fact the write decider keeps, spread over users and sessions of sessionLength,
// as messages with their Nats-Msg-Id.
func observations(tenant string, n, users int, seed uint64) ([]*nats.Msg, error) {
	gen := newTexts(seed)
	msgs := make([]*nats.Msg, n)
	for i := range msgs {
		s := i / sessionLength
		env := events.New(events.TypeObservation, tenant, userID(s%users), agentID, fmt.Sprintf("s-%05d", s))
		env.Observation = &events.Observation{Role: events.RoleUser, Text: gen.fact(), Meta: map[string]any{"dia_id": fmt.Sprintf("D%d:%d", s+1, i%sessionLength+1)}}
		msg, err := envelopeMsg(env)
		if err != nil {
			return nil, err
		}
		msgs[i] = msg
	}
	return msgs, nil
}

// envelopeMsg is env as producers publish it (eventstore.Msg).
func envelopeMsg(env events.Envelope) (*nats.Msg, error) {
	msg, err := eventstore.Msg(env)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	return msg, nil
}

// publishAsync publishes msgs without waiting for each ack and returns once every
// ack has arrived; a rejected publish fails the measurement.
func (b *bencher) publishAsync(ctx context.Context, msgs []*nats.Msg) error {
	js, err := jetstream.New(b.nc, jetstream.WithPublishAsyncMaxPending(maxPendingPublishes))
	if err != nil {
		return fmt.Errorf("bench: jetstream: %w", err)
	}
	futures := make([]jetstream.PubAckFuture, len(msgs))
	for i, m := range msgs {
		if futures[i], err = js.PublishMsgAsync(m, jetstream.WithStallWait(stallWait)); err != nil {
			return fmt.Errorf("%w: publish %s: %w", ErrMeasurement, m.Subject, err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		return ctx.Err()
	}
	for _, f := range futures {
		select {
		case err := <-f.Err():
			return fmt.Errorf("%w: publish %s: %w", ErrMeasurement, f.Msg().Subject, err)
		default:
		}
	}
	return nil
}

// throughputRun is how long a throughput phase took, and the process's CPU time
// meanwhile (cpu 0 where the system does not say).
type throughputRun struct{ wall, cpu time.Duration }

// perMessage is n messages over the run: messages per second, and CPU
// microseconds per message (0 when unknown).
func (t throughputRun) perMessage(n int) (msgsPerS, cpuUsPerMsg float64) {
	return float64(n) / t.wall.Seconds(), float64(t.cpu.Microseconds()) / float64(n)
}

// publishAndDrain publishes msgs (publishAsync) and waits until the durable of
// stream has handled them (drain), timing both from the first publish.
func (b *bencher) publishAndDrain(ctx context.Context, msgs []*nats.Msg, stream, durable string, prog *progress) (throughputRun, error) {
	cpuBefore, cpuOK := obs.ProcessCPU()
	began := time.Now()
	if err := b.publishAsync(ctx, msgs); err != nil {
		return throughputRun{}, err
	}
	if err := b.drain(ctx, stream, durable, len(msgs), prog); err != nil {
		return throughputRun{}, err
	}
	t := throughputRun{wall: time.Since(began)}
	if cpuAfter, ok := obs.ProcessCPU(); ok && cpuOK {
		t.cpu = cpuAfter - cpuBefore
	}
	return t, nil
}

// drain waits until the durable of stream has had everything delivered and
// acknowledged, reporting its progress against total.
func (b *bencher) drain(ctx context.Context, stream, durable string, total int, prog *progress) error {
	for {
		busy, err := bus.Backlog(ctx, b.rt.JS, stream, durable)
		if err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		if busy == 0 {
			return nil
		}
		prog.update(max(0, total-int(busy)))
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: consumer %s still has %d messages: %w", ErrMeasurement, durable, busy, ctx.Err())
		case <-time.After(drainPoll):
		}
	}
}

// rawJetStream measures plain JetStream on the same server: observation-sized
// messages published asynchronously into a file stream like the event stream, and
// one durable pull consumer acking each, from the first publish to the last ack.
func (b *bencher) rawJetStream(ctx context.Context, res *Result) error {
	n := b.cfg.IngestMessages
	fmt.Fprintf(b.cfg.Progress, "== raw JetStream: %d messages, async publish, one durable pull consumer acking\n", n)
	msgs, err := observations(tenantIngest, n, ingestUsers, 5)
	if err != nil {
		return err
	}
	for _, m := range msgs {
		m.Subject = rawSubject
	}
	stream, err := b.rt.JS.CreateStream(ctx, jetstream.StreamConfig{
		Name: rawStream, Subjects: []string{rawSubject}, Storage: jetstream.FileStorage,
		Duplicates: b.rt.Config.NATS.Stream.DuplicateWindow,
	})
	if err != nil {
		return fmt.Errorf("bench: stream %s: %w", rawStream, err)
	}
	defer func() { _ = b.rt.JS.DeleteStream(context.WithoutCancel(ctx), rawStream) }()
	cons, err := stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: rawDurable, AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		return fmt.Errorf("bench: consumer %s: %w", rawDurable, err)
	}
	// The consumer has its own connection, as a worker has.
	conn, err := b.rt.Dial("agentmem-bench-raw")
	if err != nil {
		return err
	}
	defer conn.Close()
	js, err := jetstream.New(conn)
	if err != nil {
		return fmt.Errorf("bench: jetstream: %w", err)
	}
	if cons, err = js.Consumer(ctx, rawStream, rawDurable); err != nil {
		return fmt.Errorf("bench: consumer %s: %w", rawDurable, err)
	}
	var acked, ackErrs atomic.Int64
	cc, err := cons.Consume(func(m jetstream.Msg) {
		if m.Ack() != nil {
			ackErrs.Add(1)
		}
		acked.Add(1)
	})
	if err != nil {
		return fmt.Errorf("bench: consume %s: %w", rawDurable, err)
	}
	defer cc.Stop()

	prog := newProgress(b.cfg.Progress, "messages", n)
	t, err := b.publishAndDrain(ctx, msgs, rawStream, rawDurable, prog)
	if err != nil {
		return err
	}
	prog.finish(int(acked.Load()))
	if acked.Load() < int64(n) || ackErrs.Load() > 0 {
		return fmt.Errorf("%w: raw consumer handled %d of %d messages, %d acks failed", ErrMeasurement, acked.Load(), n, ackErrs.Load())
	}
	res.RawJSMsgsPerS, res.RawCPUusPerMsg = t.perMessage(n)
	return nil
}

// ingest measures the ingest pipeline: observations published like the raw phase's
// messages, from the first publish until the ingest durable has acknowledged the
// last, each one stored as an episodic memory (session state, write decision,
// embedding, vector upsert, memory_written).
func (b *bencher) ingest(ctx context.Context, res *Result) error {
	n := b.cfg.IngestMessages
	fmt.Fprintf(b.cfg.Progress, "== ingest pipeline: %d observations of %d users, %s\n", n, ingestUsers, b.models("decider"))
	msgs, err := observations(tenantIngest, n, ingestUsers, 6)
	if err != nil {
		return err
	}
	durable := bus.WorkerConsumer(bus.WorkerIngest, bus.ConsumerDefaults{}).Durable
	prog := newProgress(b.cfg.Progress, "observations", n)
	calls0, err := b.modelCalls()
	if err != nil {
		return err
	}
	t, err := b.publishAndDrain(ctx, msgs, bus.DefaultStream, durable, prog)
	if err != nil {
		return err
	}
	calls1, err := b.modelCalls()
	if err != nil {
		return err
	}
	res.ModelCallsPerObservation = (calls1 - calls0) / float64(n)
	prog.finish(n)
	stored, err := b.countMemories(ctx, tenantIngest, ingestUsers, []vectorstore.MemoryType{vectorstore.Episodic})
	if err != nil {
		return err
	}
	if stored != n {
		return fmt.Errorf("%w: ingest stored %d episodic memories for %d observations", ErrMeasurement, stored, n)
	}
	res.IngestStored = stored
	res.IngestMsgsPerS, res.IngestCPUusPerMsg = t.perMessage(n)
	return nil
}

// extraction measures the extractor: the sessions' messages are published and
// ingested first (not timed); then every session ends at once, and the clock runs
// until the extractor durable has acknowledged the last session_ended.
func (b *bencher) extraction(ctx context.Context, res *Result) error {
	s := b.cfg.Sessions
	users := min(s, b.cfg.Users)
	fmt.Fprintf(b.cfg.Progress, "== extraction: %d sessions of ~10 messages, %s\n", s, b.models("extractor"))
	gen := newTexts(7)
	var msgs, ends []*nats.Msg
	for i := range s {
		user, sess := userID(i%users), fmt.Sprintf("x-%05d", i)
		for j, o := range gen.session() {
			env := events.New(events.TypeObservation, tenantExtract, user, agentID, sess)
			o.Meta = map[string]any{"dia_id": fmt.Sprintf("D%d:%d", i+1, j+1)}
			env.Observation = &o
			m, err := envelopeMsg(env)
			if err != nil {
				return err
			}
			msgs = append(msgs, m)
		}
		m, err := envelopeMsg(events.New(events.TypeSessionEnded, tenantExtract, user, agentID, sess))
		if err != nil {
			return err
		}
		ends = append(ends, m)
	}
	calls0, err := b.modelCalls()
	if err != nil {
		return err
	}
	if err := b.publishAsync(ctx, msgs); err != nil {
		return err
	}
	if err := b.idle(ctx); err != nil {
		return err
	}
	calls1, err := b.modelCalls()
	if err != nil {
		return err
	}
	durable := bus.WorkerConsumer(bus.WorkerExtractor, bus.ConsumerDefaults{}).Durable
	prog := newProgress(b.cfg.Progress, "sessions", s)
	t, err := b.publishAndDrain(ctx, ends, bus.DefaultStream, durable, prog)
	if err != nil {
		return err
	}
	calls2, err := b.modelCalls()
	if err != nil {
		return err
	}
	res.ModelCallsPerSession = (calls2 - calls0) / float64(s)
	res.ModelExtractorCallsPerSession = (calls2 - calls1) / float64(s)
	prog.finish(s)
	entries, err := b.countEntries(ctx, tenantExtract, users)
	if err != nil {
		return err
	}
	if entries == 0 {
		return fmt.Errorf("%w: the extractor wrote no Markdown entry for %d sessions", ErrMeasurement, s)
	}
	res.ExtractEntries = entries
	res.ExtractSessPerS, _ = t.perMessage(s)
	return nil
}

// models says what the stack's step (decider, extractor) and embedder are.
func (b *bencher) models(step string) string {
	m := "offline " + step
	if b.rt.LLM != nil {
		m = "the model's " + step
	}
	switch b.rt.Config.Embed.Provider {
	case config.EmbedProviderOpenAI:
		return m + ", remote embedder"
	case config.EmbedProviderUSELite:
		return m + ", use-lite embedder"
	}
	return m + ", local embedder"
}

// modelCalls is how many calls the stack made to its chat model so far (0 offline).
func (b *bencher) modelCalls() (float64, error) {
	by, err := obs.LLMCallCounts(b.rt.Registry)
	if err != nil {
		return 0, fmt.Errorf("bench: %w", err)
	}
	total := 0.0
	for _, n := range by {
		total += n
	}
	return total, nil
}

// countEntries counts the Markdown entries in the core and topic files of users
// 0..users-1 of tenant.
func (b *bencher) countEntries(ctx context.Context, tenant string, users int) (int, error) {
	total := 0
	for u := range users {
		ns := docstore.Namespace{Tenant: tenant, User: userID(u)}
		for _, name := range append([]string{docstore.MemoryFile}, docstore.TopicFiles...) {
			doc, err := b.rt.Docs.ReadFile(ctx, ns, name)
			if errors.Is(err, docstore.ErrNotFound) {
				continue // the user's sessions gave nothing for this file
			}
			if err != nil {
				return 0, fmt.Errorf("bench: read %s: %w", name, err)
			}
			es, _ := markdown.ParseEntries(string(doc))
			total += len(es)
		}
	}
	return total, nil
}
