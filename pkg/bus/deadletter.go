package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
	"go.uber.org/zap"

	"github.com/agentmem/agentmem/events"
)

// ReasonMaxDeliveries is the dead-letter reason of a message that ran out of
// deliveries without being acked (its worker crashed or hung every time).
const ReasonMaxDeliveries = "max deliveries exceeded"

// DeadLetter is one message of the dead-letter stream.
type DeadLetter struct {
	// Seq is the dead letter's sequence in the dead-letter stream.
	Seq uint64
	// Worker whose handler gave up (the last token of memdlq.<worker>).
	Worker string
	// Subject the original message was published to.
	Subject string
	// Reason the message was dead-lettered.
	Reason string
	// Deliveries of the original message when it was dead-lettered.
	Deliveries int
	// Data is the original payload.
	Data []byte
	// Time the dead letter was stored.
	Time time.Time
}

// ListDeadLetters returns up to limit dead letters of dlqStream, oldest first.
func ListDeadLetters(ctx context.Context, js jetstream.JetStream, dlqStream string, limit int) ([]DeadLetter, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("%w: list: limit is %d, want > 0", ErrDeadLetter, limit)
	}
	stream, err := js.Stream(ctx, dlqStream)
	if err != nil {
		return nil, fmt.Errorf("%w: stream %s: %w", ErrDeadLetter, dlqStream, err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: stream %s: %w", ErrDeadLetter, dlqStream, err)
	}
	var out []DeadLetter
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && len(out) < limit && info.State.Msgs > 0; seq++ {
		raw, err := stream.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue // deleted from the middle of the stream
		}
		if err != nil {
			return out, fmt.Errorf("%w: stream %s sequence %d: %w", ErrDeadLetter, dlqStream, seq, err)
		}
		out = append(out, deadLetterFrom(raw))
	}
	return out, nil
}

func deadLetterFrom(raw *jetstream.RawStreamMsg) DeadLetter {
	deliveries, _ := strconv.Atoi(raw.Header.Get(MetaDeliveryCount))
	return DeadLetter{
		Seq:        raw.Sequence,
		Worker:     strings.TrimPrefix(raw.Subject, events.DLQPrefix+"."),
		Subject:    raw.Header.Get(MetaSubject),
		Reason:     raw.Header.Get(HeaderReason),
		Deliveries: deliveries,
		Data:       raw.Data,
		Time:       raw.Time,
	}
}

// ReplayDeadLetter publishes the original data of dl to its original subject with a
// fresh Nats-Msg-Id, so that JetStream's duplicate detection does not drop it. The
// dead letter itself stays in the dead-letter stream as a record.
func ReplayDeadLetter(ctx context.Context, js jetstream.JetStream, dl DeadLetter) error {
	if err := validatePublishSubject(dl.Subject); err != nil {
		return fmt.Errorf("%w: replay of dead letter %d: %w", ErrDeadLetter, dl.Seq, err)
	}
	msg := nats.NewMsg(dl.Subject)
	msg.Data = dl.Data
	msg.Header.Set(jetstream.MsgIDHeader, nuid.Next())
	if _, err := js.PublishMsg(ctx, msg); err != nil {
		return fmt.Errorf("%w: replay of dead letter %d to %s: %w", ErrDeadLetter, dl.Seq, dl.Subject, err)
	}
	return nil
}

// maxDeliveriesAdvisory is the part of nats-server's
// io.nats.jetstream.advisory.v1.max_deliver advisory used here.
type maxDeliveriesAdvisory struct {
	Stream     string `json:"stream"`
	Consumer   string `json:"consumer"`
	StreamSeq  uint64 `json:"stream_seq"`
	Deliveries uint64 `json:"deliveries"`
}

// WatchMaxDeliveries dead-letters the messages of spec's durable that ran out of
// deliveries without an ack (the Router dead-letters handler failures itself; this
// catches a worker that crashed or hung on every delivery). It listens for the
// server's MAX_DELIVERIES advisory, reads the message from stream by sequence and
// publishes it to memdlq.<worker> with reason ReasonMaxDeliveries and the delivery
// count. Replicas of a worker share one queue group, so one of them handles each
// advisory; the dead letter's Nats-Msg-Id is derived from the stream sequence, so
// a repeat within the duplicate window is stored once.
//
// Advisories are core NATS messages: one sent while no watcher runs is not seen.
// stop (or cancelling ctx) unsubscribes; stop returns once the watcher has exited,
// abandoning a dead letter being written (it is logged). logger is the worker's,
// which names it already.
func WatchMaxDeliveries(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, stream string, spec ConsumerSpec, worker string, logger *zap.Logger) (stop func(), err error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	dlqSubject, err := events.DLQSubject(worker)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	log := logger.With(zap.String("stream", stream), zap.String("consumer", spec.Durable))
	str, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, fmt.Errorf("%w: watch max deliveries: stream %s: %w", ErrProvision, stream, err)
	}
	wctx, cancel := context.WithCancel(ctx)
	advisory := "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES." + stream + "." + spec.Durable
	advisories := make(chan *nats.Msg, 64)
	sub, err := nc.ChanQueueSubscribe(advisory, "agentmem-dlq-"+spec.Durable, advisories)
	if err == nil {
		// Make sure the server registered the interest before returning; nats.go
		// insists on a deadline for a flush.
		fctx, fcancel := context.WithTimeout(ctx, 10*time.Second)
		err = nc.FlushWithContext(fctx)
		fcancel()
	}
	if err != nil {
		cancel()
		if sub != nil {
			_ = sub.Unsubscribe()
		}
		return nil, fmt.Errorf("%w: watch max deliveries of %s: %w", ErrProvision, spec.Durable, err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() { _ = sub.Unsubscribe() }()
		for {
			select {
			case <-wctx.Done():
				return
			case m := <-advisories:
				handleMaxDeliveries(wctx, js, str, dlqSubject, m, log)
			}
		}
	}()
	return sync.OnceFunc(func() {
		cancel()
		<-done
	}), nil
}

func handleMaxDeliveries(ctx context.Context, js jetstream.JetStream, str jetstream.Stream, dlqSubject string, m *nats.Msg, log *zap.Logger) {
	var adv maxDeliveriesAdvisory
	if err := json.Unmarshal(m.Data, &adv); err != nil {
		log.Error("unreadable max-deliveries advisory", zap.Error(err))
		return
	}
	if err := deadLetterBySeq(ctx, js, str, dlqSubject, adv); err != nil {
		log.Error("dead-lettering a message that exceeded max deliveries", zap.Uint64("stream_seq", adv.StreamSeq), zap.Error(err))
		return
	}
	log.Warn("message exceeded max deliveries; dead-lettered",
		zap.Uint64("stream_seq", adv.StreamSeq), zap.Uint64("deliveries", adv.Deliveries), zap.String("dlq_subject", dlqSubject))
}

func deadLetterBySeq(ctx context.Context, js jetstream.JetStream, str jetstream.Stream, dlqSubject string, adv maxDeliveriesAdvisory) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	raw, err := str.GetMsg(ctx, adv.StreamSeq)
	if err != nil {
		return fmt.Errorf("get message %d: %w", adv.StreamSeq, err)
	}
	dl := nats.NewMsg(dlqSubject)
	dl.Data = raw.Data
	for k, v := range appHeaders(raw.Header, 0) {
		dl.Header.Set(k, v)
	}
	dl.Header.Set(jetstream.MsgIDHeader, "maxdeliver-"+adv.Stream+"-"+adv.Consumer+"-"+strconv.FormatUint(adv.StreamSeq, 10))
	dl.Header.Set(HeaderReason, ReasonMaxDeliveries)
	dl.Header.Set(HeaderHandler, adv.Consumer)
	dl.Header.Set(MetaSubject, raw.Subject)
	dl.Header.Set(MetaStreamSeq, strconv.FormatUint(adv.StreamSeq, 10))
	dl.Header.Set(MetaDeliveryCount, strconv.FormatUint(adv.Deliveries, 10))
	if _, err := js.PublishMsg(ctx, dl); err != nil {
		return fmt.Errorf("publish to %s: %w", dlqSubject, err)
	}
	return nil
}
