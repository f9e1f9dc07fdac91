package bus

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// Backlog is how many messages of stream the durable has still to deliver or to
// see acknowledged: 0 exactly when it has handled everything stored so far.
//
// The consumer's pending counts alone are not enough. nats-server adds a stored
// message to its consumers' counts on a goroutine of the stream's own, after the
// publish was acknowledged, so just after a publish a durable can show nothing
// pending without having seen the message (a test failed so on a loaded CI
// machine). The durable must also have delivered up to the last message on its
// filters; while it has not, the backlog is at least 1.
func Backlog(ctx context.Context, js jetstream.JetStream, stream, durable string) (uint64, error) {
	// The lookup fetches the consumer's info; asking for it again would be a second
	// round trip per poll.
	cons, err := js.Consumer(ctx, stream, durable)
	if err != nil {
		return 0, fmt.Errorf("bus: consumer %s: %w", durable, err)
	}
	info := cons.CachedInfo()
	if n := counted(info); n > 0 {
		return n, nil
	}
	filters := info.Config.FilterSubjects
	if info.Config.FilterSubject != "" {
		filters = append(filters, info.Config.FilterSubject)
	}
	last, err := lastSequence(ctx, js, stream, filters)
	if err != nil {
		return 0, fmt.Errorf("bus: consumer %s: %w", durable, err)
	}
	return backlog(info, last), nil
}

// counted is the backlog the consumer's own counts show.
func counted(info *jetstream.ConsumerInfo) uint64 {
	return info.NumPending + uint64(max(0, info.NumAckPending))
}

// backlog is the durable's backlog given the stream sequence of the last message
// on its filters: its counts, or 1 when they show none although it has not yet
// been delivered up to that message.
func backlog(info *jetstream.ConsumerInfo, last uint64) uint64 {
	if n := counted(info); n > 0 || info.Delivered.Stream >= last {
		return n
	}
	return 1
}

// lastSequence is the stream sequence of the last message of stream on filters
// (any subject when there are none), 0 when there is none.
func lastSequence(ctx context.Context, js jetstream.JetStream, stream string, filters []string) (uint64, error) {
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return 0, err
	}
	if len(filters) == 0 {
		return st.CachedInfo().State.LastSeq, nil // fetched by the lookup
	}
	var last uint64
	for _, f := range filters {
		m, err := st.GetLastMsgForSubject(ctx, f)
		switch {
		case errors.Is(err, jetstream.ErrMsgNotFound):
			continue
		case err != nil:
			return 0, fmt.Errorf("last message on %s: %w", f, err)
		}
		last = max(last, m.Sequence)
	}
	return last, nil
}
