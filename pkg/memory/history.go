package memory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/bus"
)

// historySubjectPrefix is the first token of the history stream's subjects,
// "memhist.<tenant>.<user>.<memory id>": no other stream captures it (events are
// mem.>, dead letters memdlq.>, KV buckets $KV.>).
const historySubjectPrefix = "memhist"

// historyReaderIdle is how long the server keeps a List's consumer that List
// could not delete (its connection failed in between).
const historyReaderIdle = 30 * time.Second

// HistoryLog is the change log of memories (SPEC C2 history) in an append-only
// JetStream stream, built the way NATS KV is: one subject per memory,
// "memhist.<tenant>.<user>.<memory id>", one message per Append holding the
// JSON list of that call's events.Change. Every writer (this service for add,
// update and delete; the consolidator for hits, merge, separate and
// reconsolidate) publishes and waits for the stream's ack: an append reads and
// rewrites nothing, so it costs the same however long the history is, and
// concurrent appends cannot lose one another. The stream keeps the newest
// Config.MaxHistory messages per subject (discarding the oldest), so at least
// MaxHistory changes; List returns the newest MaxHistory of them.
type HistoryLog struct {
	js     jetstream.JetStream
	stream jetstream.Stream
	name   string
	max    int
}

// newHistoryLog creates the history stream, or updates it to cfg (a changed
// MaxHistory or, through js, replica count), and returns the log over it.
func newHistoryLog(ctx context.Context, js jetstream.JetStream, cfg Config) (*HistoryLog, error) {
	stream, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:              cfg.HistoryStream,
		Description:       "agentmem memory history",
		Subjects:          []string{historySubjectPrefix + ".>"},
		Storage:           jetstream.FileStorage,
		MaxMsgsPerSubject: int64(cfg.MaxHistory),
		Discard:           jetstream.DiscardOld,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: memory history stream %s: %w", bus.ErrProvision, cfg.HistoryStream, err)
	}
	return &HistoryLog{js: js, stream: stream, name: cfg.HistoryStream, max: cfg.MaxHistory}, nil
}

// historySubject validates the parts and builds the memory's subject. Tenant and
// user are ID tokens; the memory id is a UUID in canonical form, so both
// spellings of one id share a subject. All three are valid subject tokens.
func historySubject(tenant, userID, memoryID string) (string, error) {
	if err := firstErr(events.ValidateID("tenant", tenant), events.ValidateID("user_id", userID)); err != nil {
		return "", invalid(err)
	}
	id, err := canonicalID("memory id", memoryID)
	if err != nil {
		return "", err
	}
	return historySubjectPrefix + "." + tenant + "." + userID + "." + id, nil
}

// Append adds changes to the memory's history, in order, as one message: they
// are stored together or not at all. Each needs Op and TS. Changes that do not
// fit in one NATS message (the server's max payload, 1 MiB by default) fail with
// ErrInvalid.
func (h *HistoryLog) Append(ctx context.Context, tenant, userID, memoryID string, changes ...events.Change) error {
	subject, err := historySubject(tenant, userID, memoryID)
	if err != nil {
		return err
	}
	for _, ch := range changes {
		if ch.Op == "" {
			return invalidf("change op is required")
		}
		if ch.TS.IsZero() {
			return invalidf("change ts is required")
		}
	}
	if len(changes) == 0 {
		return nil
	}
	data, err := json.Marshal(changes)
	if err != nil {
		return fmt.Errorf("memory: encode history changes of %s: %w", subject, err)
	}
	// The expected stream turns a subject captured by some other stream (a
	// misconfigured server) into an error instead of a change stored elsewhere.
	_, err = h.js.Publish(ctx, subject, data, jetstream.WithExpectStream(h.name))
	if errors.Is(err, nats.ErrMaxPayload) {
		return fmt.Errorf("%w: %d history changes of %s take %d bytes, more than the server's max payload %d: %w",
			ErrInvalid, len(changes), subject, len(data), h.js.Conn().MaxPayload(), err)
	}
	if err != nil {
		return fmt.Errorf("memory: append history %s: %w", subject, err)
	}
	return nil
}

// List returns the memory's changes, oldest first, at most Config.MaxHistory
// (the newest); nil when it has none. It reads the subject's messages through
// an ephemeral consumer rather than an ordered one: that honours ctx, reports
// the message count on creation (an empty history costs no fetch) and is
// deleted at once, where an ordered consumer's fetch ignores ctx and leaves its
// consumer to the server's inactivity timeout.
func (h *HistoryLog) List(ctx context.Context, tenant, userID, memoryID string) ([]events.Change, error) {
	subject, err := historySubject(tenant, userID, memoryID)
	if err != nil {
		return nil, err
	}
	cons, err := h.stream.CreateConsumer(ctx, jetstream.ConsumerConfig{
		FilterSubject:     subject,
		DeliverPolicy:     jetstream.DeliverAllPolicy,
		AckPolicy:         jetstream.AckNonePolicy,
		MemoryStorage:     true,
		Replicas:          1,
		InactiveThreshold: historyReaderIdle,
	})
	if err != nil {
		return nil, fmt.Errorf("memory: read history %s: %w", subject, err)
	}
	info := cons.CachedInfo()
	// A failed delete leaves the consumer to the server's InactiveThreshold.
	defer func() { _ = h.stream.DeleteConsumer(context.WithoutCancel(ctx), info.Name) }()
	// NumPending counts the subject's messages when the consumer was created,
	// which the stream's MaxMsgsPerSubject bounds. All are read, not just
	// MaxHistory: a process configured with a larger MaxHistory may have raised
	// the stream's bound, and the newest changes are at the end.
	if info.NumPending == 0 {
		return nil, nil
	}
	// No wait: the fetch ends with the messages stored now, even if a reset
	// purges some of them meanwhile.
	batch, err := cons.FetchNoWait(int(info.NumPending))
	if err != nil {
		return nil, fmt.Errorf("memory: read history %s: %w", subject, err)
	}
	var changes []events.Change
	var seq uint64
	for msg := range batch.Messages() {
		md, err := msg.Metadata()
		if err != nil {
			return nil, fmt.Errorf("memory: read history %s: %w", subject, err)
		}
		// Without acks nothing redelivers a message the client dropped (a slow
		// consumer), so a gap in the consumer sequence must fail the read.
		if seq++; md.Sequence.Consumer != seq {
			return nil, fmt.Errorf("memory: read history %s: message %d of the read is missing", subject, seq)
		}
		var add []events.Change
		if err := json.Unmarshal(msg.Data(), &add); err != nil {
			return nil, fmt.Errorf("memory: history %s message %d is not a change list: %w", subject, md.Sequence.Stream, err)
		}
		changes = append(changes, add...)
	}
	if err := batch.Error(); err != nil {
		return nil, fmt.Errorf("memory: read history %s: %w", subject, err)
	}
	if len(changes) > h.max {
		changes = changes[len(changes)-h.max:]
	}
	return changes, nil
}

// purgeUser removes every history of the user in one purge of the stream's
// subjects under "memhist.<tenant>.<user>.".
func (h *HistoryLog) purgeUser(ctx context.Context, tenant, userID string) error {
	subject := historySubjectPrefix + "." + tenant + "." + userID + ".>"
	if err := h.stream.Purge(ctx, jetstream.WithPurgeSubject(subject)); err != nil {
		return fmt.Errorf("memory: purge history %s: %w", subject, err)
	}
	return nil
}

// HistoryUserFilter is the subject filter of every history entry of the user in
// the history stream, for erasing them (agentmem forget).
func HistoryUserFilter(tenant, userID string) string {
	return historySubjectPrefix + "." + tenant + "." + userID + ".>"
}
