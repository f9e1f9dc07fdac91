package eventstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"

	"github.com/agentmem/agentmem/events"
)

// ErrInvalidQuery is returned (wrapped, naming the field) for a Query that cannot
// select events.
var ErrInvalidQuery = errors.New("eventstore: invalid query")

// Query selects a tenant's events: all of them, one user's (every event type that
// names the user in its subject: observations, session_ended, hits, written,
// consolidate, summary_due, write), or one session's (observations, session_ended,
// summary_due), stored in [Since, Until) by the stream's clock (zero: unbounded).
type Query struct {
	Tenant  string
	User    string
	Session string
	Since   time.Time
	Until   time.Time
}

// Validate checks every id and the time range.
func (q Query) Validate() error {
	if err := events.ValidateID("tenant", q.Tenant); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidQuery, err)
	}
	if q.User != "" {
		if err := events.ValidateID("user", q.User); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidQuery, err)
		}
	}
	if q.Session != "" {
		if err := events.ValidateID("session", q.Session); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidQuery, err)
		}
	}
	if !q.Since.IsZero() && !q.Until.IsZero() && !q.Until.After(q.Since) {
		return fmt.Errorf("%w: until %s is not after since %s", ErrInvalidQuery, q.Until.Format(time.RFC3339), q.Since.Format(time.RFC3339))
	}
	return nil
}

// filters are the stream subjects the query reads. The user is the fourth token of
// every per-user subject (mem.<t>.<kind>.<u>[.<s>]) and the session the fifth.
func (q Query) filters() []string {
	base := events.EventPrefix + "." + q.Tenant
	user := q.User
	if user == "" {
		user = "*"
	}
	switch {
	case q.Session != "":
		return []string{base + ".*." + user + "." + q.Session}
	case q.User != "":
		return []string{base + ".*." + q.User, base + ".*." + q.User + ".*"}
	default:
		return []string{base + ".>"}
	}
}

// Scan visits the query's events in stream order until visit returns false or an
// error. What ingest dead-letters is skipped (Store.admit). It
// reads with an ordered consumer: nothing in the stream changes.
func (s *Store) Scan(ctx context.Context, q Query, visit func(Stored) (bool, error)) error {
	if err := q.Validate(); err != nil {
		return err
	}
	filters := q.filters()
	var pending uint64
	for _, f := range filters {
		n, err := s.count(ctx, f)
		if err != nil {
			return err
		}
		pending += n
	}
	if pending == 0 {
		return nil
	}
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: filters}
	if !q.Since.IsZero() {
		start := q.Since
		cfg.DeliverPolicy = jetstream.DeliverByStartTimePolicy
		cfg.OptStartTime = &start
	}
	cons, err := s.js.OrderedConsumer(ctx, s.stream, cfg)
	if err != nil {
		return fmt.Errorf("eventstore: scan: %w", err)
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		batch, err := cons.Fetch(256, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return fmt.Errorf("eventstore: scan: %w", err)
		}
		got := 0
		for msg := range batch.Messages() {
			got++
			meta, err := msg.Metadata()
			if err != nil {
				return fmt.Errorf("eventstore: scan: %w", err)
			}
			if !q.Until.IsZero() && !meta.Timestamp.Before(q.Until) {
				return nil
			}
			st, ok, err := s.admit(ctx, msg.Subject(), meta.Sequence.Stream, meta.Timestamp, msg.Data())
			if err != nil {
				return fmt.Errorf("eventstore: scan: %w", err)
			}
			if ok {
				more, err := visit(st)
				if err != nil || !more {
					return err
				}
			}
			if meta.NumPending == 0 {
				return nil
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			return fmt.Errorf("eventstore: scan: %w", err)
		}
		if got == 0 {
			return nil // nothing stored at or after Since
		}
	}
}

// List returns the query's events in stream order, skipping the first offset and
// returning at most limit (limit <= 0: all).
func (s *Store) List(ctx context.Context, q Query, offset, limit int) ([]Stored, error) {
	var out []Stored
	skipped := 0
	err := s.Scan(ctx, q, func(st Stored) (bool, error) {
		if skipped < offset {
			skipped++
			return true, nil
		}
		out = append(out, st)
		return limit <= 0 || len(out) < limit, nil
	})
	return out, err
}

// Count returns how many events the query selects. Without a time range it is the
// stream's per-subject counts (undecodable messages included); with one, a scan.
func (s *Store) Count(ctx context.Context, q Query) (int, error) {
	if err := q.Validate(); err != nil {
		return 0, err
	}
	if q.Since.IsZero() && q.Until.IsZero() {
		total := 0
		for _, f := range q.filters() {
			n, err := s.count(ctx, f)
			if err != nil {
				return 0, err
			}
			total += int(n)
		}
		return total, nil
	}
	n := 0
	err := s.Scan(ctx, q, func(Stored) (bool, error) { n++; return true, nil })
	return n, err
}

// Find returns the tenant's event with id eventID, wherever it is stored. The
// envelope id is a ULID whose time is when the producer made it, usually moments
// before the stream stored it, so the scan starts a minute before that time when
// the id is a ULID and from the start otherwise.
func (s *Store) Find(ctx context.Context, tenant, eventID string) (Stored, error) {
	if err := events.ValidateID("id", eventID); err != nil {
		return Stored{}, fmt.Errorf("%w: %w", ErrInvalidQuery, err)
	}
	q := Query{Tenant: tenant}
	if id, err := ulid.ParseStrict(eventID); err == nil {
		q.Since = ulid.Time(id.Time()).Add(-time.Minute)
	}
	found, err := s.find(ctx, q, eventID)
	if err == nil && found == nil && !q.Since.IsZero() {
		// Published long after it was made (a restored archive, a late producer).
		q.Since = time.Time{}
		found, err = s.find(ctx, q, eventID)
	}
	if err != nil {
		return Stored{}, err
	}
	if found == nil {
		return Stored{}, fmt.Errorf("%w: %s in tenant %s", ErrNotFound, eventID, tenant)
	}
	return *found, nil
}

func (s *Store) find(ctx context.Context, q Query, eventID string) (*Stored, error) {
	var found *Stored
	err := s.Scan(ctx, q, func(st Stored) (bool, error) {
		if st.Envelope.ID == eventID {
			found = &st
			return false, nil
		}
		return true, nil
	})
	return found, err
}
