package bus

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/agentmem/agentmem/events"
)

// ReasonMaxDeliveries starts the dead-letter reason of a message that ran out of
// deliveries without being acked (its worker crashed or hung every time).
const ReasonMaxDeliveries = "max deliveries exceeded"

// DeadLetter is one message of the dead-letter stream.
type DeadLetter struct {
	// Stream is the dead-letter stream it was read from.
	Stream string
	// Seq is the dead letter's sequence in the dead-letter stream.
	Seq uint64
	// Worker whose handler gave up (the last token of memdlq.<worker>).
	Worker string
	// Subject the original message was published to.
	Subject string
	// Reason the message was dead-lettered.
	Reason string
	// Class of the reason: ClassMalformed, ClassMaxDeliveries,
	// ClassRetriesExhausted or ClassQuota ("" for dead letters written before
	// classes existed).
	Class string
	// Deliveries of the original message when it was dead-lettered.
	Deliveries int
	// Data is the original payload.
	Data []byte
	// Time the dead letter was stored.
	Time time.Time
}

// Tenant is the tenant whose event dl is (events.DeadLetterTenant), "" for one
// that is not a tenant's event.
func (dl DeadLetter) Tenant() string { return events.DeadLetterTenant(dl.Subject) }

// ListDeadLetters returns up to limit dead letters of dlqStream, oldest first.
func ListDeadLetters(ctx context.Context, js jetstream.JetStream, dlqStream string, limit int) ([]DeadLetter, error) {
	return ListDeadLettersOf(ctx, js, dlqStream, limit, func(DeadLetter) bool { return true })
}

// ListDeadLettersOf returns up to limit dead letters of dlqStream that keep
// accepts, oldest first (keep sees every dead letter: one tenant's are found
// among all of them).
func ListDeadLettersOf(ctx context.Context, js jetstream.JetStream, dlqStream string, limit int, keep func(DeadLetter) bool) ([]DeadLetter, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("%w: list: limit is %d, want > 0", ErrDeadLetter, limit)
	}
	var out []DeadLetter
	err := walkDeadLetters(ctx, js, dlqStream, func(_ jetstream.Stream, dl DeadLetter) (bool, error) {
		if keep(dl) {
			out = append(out, dl)
		}
		return len(out) < limit, nil
	})
	return out, err
}

// GetDeadLetter reads the dead letter at seq of dlqStream; an error wrapping
// jetstream.ErrMsgNotFound when there is none.
func GetDeadLetter(ctx context.Context, js jetstream.JetStream, dlqStream string, seq uint64) (DeadLetter, error) {
	stream, err := js.Stream(ctx, dlqStream)
	if err != nil {
		return DeadLetter{}, fmt.Errorf("%w: stream %s: %w", ErrDeadLetter, dlqStream, err)
	}
	raw, err := stream.GetMsg(ctx, seq)
	if err != nil {
		return DeadLetter{}, fmt.Errorf("%w: dead letter %d: %w", ErrDeadLetter, seq, err)
	}
	dl := deadLetterFrom(raw)
	dl.Stream = dlqStream
	return dl, nil
}

// DeleteUserDeadLetters erases (overwrites, then removes) the dead letters of
// dlqStream whose original subject is an event of the user (agentmem forget) and
// returns how many it erased.
func DeleteUserDeadLetters(ctx context.Context, js jetstream.JetStream, dlqStream, tenant, user string) (int, error) {
	n := 0
	err := walkDeadLetters(ctx, js, dlqStream, func(stream jetstream.Stream, dl DeadLetter) (bool, error) {
		sub, err := events.ParseSubject(dl.Subject)
		if err != nil || sub.Tenant != tenant || sub.User != user {
			return true, nil
		}
		if err := stream.SecureDeleteMsg(ctx, dl.Seq); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
			return false, fmt.Errorf("%w: stream %s: erase %d: %w", ErrDeadLetter, dlqStream, dl.Seq, err)
		}
		n++
		return true, nil
	})
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return 0, nil
	}
	return n, err
}

// walkDeadLetters calls visit with each dead letter of dlqStream, oldest first,
// until it returns false or an error.
func walkDeadLetters(ctx context.Context, js jetstream.JetStream, dlqStream string, visit func(jetstream.Stream, DeadLetter) (bool, error)) error {
	stream, err := js.Stream(ctx, dlqStream)
	if err != nil {
		return fmt.Errorf("%w: stream %s: %w", ErrDeadLetter, dlqStream, err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		return fmt.Errorf("%w: stream %s: %w", ErrDeadLetter, dlqStream, err)
	}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		raw, err := stream.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue // deleted from the middle of the stream
		}
		if err != nil {
			return fmt.Errorf("%w: stream %s sequence %d: %w", ErrDeadLetter, dlqStream, seq, err)
		}
		dl := deadLetterFrom(raw)
		dl.Stream = dlqStream
		if more, err := visit(stream, dl); !more || err != nil {
			return err
		}
	}
	return nil
}

func deadLetterFrom(raw *jetstream.RawStreamMsg) DeadLetter {
	deliveries, _ := strconv.Atoi(raw.Header.Get(MetaDeliveryCount))
	return DeadLetter{
		Seq:        raw.Sequence,
		Worker:     strings.TrimPrefix(raw.Subject, events.DLQPrefix+"."),
		Subject:    raw.Header.Get(MetaSubject),
		Reason:     raw.Header.Get(HeaderReason),
		Class:      raw.Header.Get(HeaderReasonClass),
		Deliveries: deliveries,
		Data:       raw.Data,
		Time:       raw.Time,
	}
}

// ReplayDeadLetter publishes the original data of dl to its original subject with a
// fresh Nats-Msg-Id, so that JetStream's duplicate detection does not drop it, and
// once JetStream acked that publish, deletes the dead letter from its stream
// (dl.Stream, as ListDeadLetters sets it; kept when empty). A failed delete
// leaves a dead letter that was replayed: the error says so, and replaying it
// again is harmless (the workers are idempotent).
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
	if dl.Stream == "" {
		return nil
	}
	stream, err := js.Stream(ctx, dl.Stream)
	if err == nil {
		err = stream.DeleteMsg(ctx, dl.Seq)
	}
	if err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		return fmt.Errorf("%w: dead letter %d was replayed to %s but not deleted from %s: %w", ErrDeadLetter, dl.Seq, dl.Subject, dl.Stream, err)
	}
	return nil
}

// SelectDeadLetters returns the dead letters of class, or all of them for "".
func SelectDeadLetters(dls []DeadLetter, class string) []DeadLetter {
	var out []DeadLetter
	for _, dl := range dls {
		if class == "" || dl.Class == class {
			out = append(out, dl)
		}
	}
	return out
}

// ReasonClasses are the dead-letter reason classes, for validating a selection.
var ReasonClasses = events.ReasonClasses
