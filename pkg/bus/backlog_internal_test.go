package bus

import (
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"pgregory.net/rapid"
)

// The backlog is empty exactly when the consumer's counts show nothing and it has
// been delivered up to the last message on its filters; otherwise it is at least
// its counts, and at least 1.
func TestBacklogIsEmptyOnlyOnceDeliveredUpToTheLastMessage(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		info := &jetstream.ConsumerInfo{
			NumPending:    rapid.Uint64Range(0, 3).Draw(t, "pending"),
			NumAckPending: rapid.IntRange(0, 3).Draw(t, "ack_pending"),
			Delivered:     jetstream.SequenceInfo{Stream: rapid.Uint64Range(0, 5).Draw(t, "delivered")},
		}
		last := rapid.Uint64Range(0, 5).Draw(t, "last")
		got := backlog(info, last)
		counts := info.NumPending + uint64(info.NumAckPending)
		caughtUp := counts == 0 && info.Delivered.Stream >= last
		if (got == 0) != caughtUp {
			t.Fatalf("backlog = %d with counts %d, delivered %d, last %d", got, counts, info.Delivered.Stream, last)
		}
		if got < counts {
			t.Fatalf("backlog = %d, below the consumer's counts %d", got, counts)
		}
	})
}
