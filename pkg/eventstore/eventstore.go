// Package eventstore reads and writes agent events on the AGENTMEM JetStream stream:
// the stream itself is the event store (SPEC D2). Nothing is copied elsewhere, so any
// worker can be replayed from the stream at any point in time.
package eventstore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/kvcas"
)

// ErrNotFound is returned when an event does not exist in the stream.
var ErrNotFound = errors.New("eventstore: event not found")

// Config configures a Store.
type Config struct {
	// Stream is the JetStream stream holding mem.> (default "AGENTMEM").
	Stream string
	// Limits are what every read admits (events.Admit): the workers' own, so
	// that what ingest dead-lettered is left out of every read.
	Limits events.Limits
	// Claims is the bucket of event-id claims (EnsureClaims, OpenClaims): an
	// observation whose id another event with other content claimed first is
	// left out of every read. Nil reads without the check (tests of other parts).
	Claims jetstream.KeyValue
	// Claimant is the durable consumer that claims ids in stream order
	// (ingest's). A session read that finds an observation not claimed yet
	// waits up to ClaimWait for the claimant to pass it, then reads again, so
	// that the claimant decides it, not the order the workers happen to run in.
	Claimant string
	// ClaimWait bounds that wait; default DefaultClaimWait. Past it the
	// unclaimed observations are read as they are (logged).
	ClaimWait time.Duration
}

// DefaultClaimWait is Config.ClaimWait's default.
const DefaultClaimWait = 30 * time.Second

func (c *Config) setDefaults() {
	if c.Stream == "" {
		c.Stream = "AGENTMEM"
	}
	if c.ClaimWait == 0 {
		c.ClaimWait = DefaultClaimWait
	}
}

// Store is the event store on one JetStream stream.
type Store struct {
	js     jetstream.JetStream
	stream string
	limits events.Limits
	claims jetstream.KeyValue
	// claimant and claimWait: Config.Claimant, Config.ClaimWait.
	claimant  string
	claimWait time.Duration
	logger    *zap.Logger
}

// Stored is one event as kept in the stream.
type Stored struct {
	Seq      uint64
	Subject  string
	Time     time.Time // when the stream stored it
	Envelope events.Envelope
	// unclaimed: an observation no claim names yet (Store.check).
	unclaimed bool
}

// New returns a Store on cfg.Stream, which must already be provisioned.
func New(cfg Config, js jetstream.JetStream, logger *zap.Logger) (*Store, error) {
	cfg.setDefaults()
	if js == nil {
		return nil, errors.New("eventstore: nil JetStream context")
	}
	if err := cfg.Limits.Validate(); err != nil {
		return nil, fmt.Errorf("eventstore: %w", err)
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	return &Store{js: js, stream: cfg.Stream, limits: cfg.Limits, claims: cfg.Claims, claimant: cfg.Claimant, claimWait: cfg.ClaimWait, logger: logger}, nil
}

// Msg is env as producers publish it: validated, on its subject, JSON, with
// its id as Nats-Msg-Id so that JetStream stores a repeated publish once.
func Msg(env events.Envelope) (*nats.Msg, error) {
	subject, data, err := env.Encode()
	if err != nil {
		return nil, err
	}
	msg := nats.NewMsg(subject)
	msg.Data = data
	msg.Header.Set(events.HeaderMsgID, env.ID)
	return msg, nil
}

// Save validates env and publishes it on its subject with Nats-Msg-Id = env.ID, so a
// repeated Save within the stream's duplicate window is stored once.
func (s *Store) Save(ctx context.Context, env events.Envelope) (uint64, error) {
	msg, err := Msg(env)
	if err != nil {
		return 0, fmt.Errorf("eventstore: save: %w", err)
	}
	// Bounded: an ack lost as the server goes away fails after seconds, and a
	// retry is stored once (Nats-Msg-Id).
	reqCtx, cancel := kvcas.WithRequestTimeout(ctx)
	defer cancel()
	ack, err := s.js.PublishMsg(reqCtx, msg)
	if err != nil {
		return 0, fmt.Errorf("eventstore: save %s on %s: %w", env.ID, msg.Subject, kvcas.NoReply(ctx, err))
	}
	return ack.Sequence, nil
}

// sessionFilter matches exactly a session's events: its observations and its
// session_ended events (mem.<t>.obs|ended.<u>.<s>; the per-user subjects have one
// token fewer).
func sessionFilter(tenant, user, session string) (string, error) {
	if _, err := events.ObservationSubject(tenant, user, session); err != nil {
		return "", err
	}
	return events.EventPrefix + "." + tenant + ".*." + user + "." + session, nil
}

// ListSession returns the session's events (observations and session_ended) in
// stream order, skipping the first offset and returning at most limit (limit <= 0:
// all). What ingest dead-letters is left out (Store.admit); when an observation
// is not claimed yet, it waits for the claimant to pass it (Config.Claimant) and
// reads again.
func (s *Store) ListSession(ctx context.Context, tenant, user, session string, offset, limit int) ([]Stored, error) {
	subject, err := sessionFilter(tenant, user, session)
	if err != nil {
		return nil, fmt.Errorf("eventstore: list session: %w", err)
	}
	read := func() ([]Stored, uint64, error) {
		var (
			out       []Stored
			unclaimed uint64 // the last unclaimed observation's sequence
		)
		skipped := 0
		err := s.scanSubject(ctx, subject, func(st Stored) bool {
			if st.unclaimed {
				unclaimed = st.Seq
			}
			if skipped < offset {
				skipped++
				return true
			}
			out = append(out, st)
			return limit <= 0 || len(out) < limit
		})
		return out, unclaimed, err
	}
	out, unclaimed, err := read()
	if err != nil || unclaimed == 0 || !s.awaitClaimant(ctx, unclaimed) {
		return out, err
	}
	out, _, err = read()
	return out, err
}

// awaitClaimant waits up to claimWait for the claimant to have handled every
// message up to seq (its ack floor) and reports whether it did.
func (s *Store) awaitClaimant(ctx context.Context, seq uint64) bool {
	if s.claimant == "" {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, s.claimWait)
	defer cancel()
	for {
		cons, err := s.js.Consumer(ctx, s.stream, s.claimant)
		if err == nil {
			var info *jetstream.ConsumerInfo
			if info, err = cons.Info(ctx); err == nil && info.AckFloor.Stream >= seq {
				return true
			}
		}
		select {
		case <-ctx.Done():
			s.logger.Warn("the claimant has not passed an unclaimed observation; reading it as it is",
				zap.String("claimant", s.claimant), zap.Uint64("seq", seq), zap.Error(err))
			return false
		case <-time.After(claimPoll):
		}
	}
}

// claimPoll is how often awaitClaimant looks at the claimant's progress.
const claimPoll = 20 * time.Millisecond

// Get returns one event of a session by its id.
func (s *Store) Get(ctx context.Context, tenant, user, session, eventID string) (Stored, error) {
	subject, err := sessionFilter(tenant, user, session)
	if err != nil {
		return Stored{}, fmt.Errorf("eventstore: get: %w", err)
	}
	var found *Stored
	err = s.scanSubject(ctx, subject, func(st Stored) bool {
		if st.Envelope.ID == eventID {
			found = &st
			return false
		}
		return true
	})
	if err != nil {
		return Stored{}, err
	}
	if found == nil {
		return Stored{}, fmt.Errorf("%w: %s in session %s", ErrNotFound, eventID, session)
	}
	return *found, nil
}

// ListRange returns the user's observations (all sessions) stored in [from, to), in
// stream order, at most limit (limit <= 0: all).
func (s *Store) ListRange(ctx context.Context, tenant, user string, from, to time.Time, limit int) ([]Stored, error) {
	if err := events.ValidateID("tenant", tenant); err != nil {
		return nil, fmt.Errorf("eventstore: list range: %w", err)
	}
	if err := events.ValidateID("user", user); err != nil {
		return nil, fmt.Errorf("eventstore: list range: %w", err)
	}
	filter := "mem." + tenant + ".obs." + user + ".*"
	pending, err := s.count(ctx, filter)
	if err != nil || pending == 0 {
		return nil, err
	}
	start := from
	cons, err := s.js.OrderedConsumer(ctx, s.stream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{filter},
		DeliverPolicy:  jetstream.DeliverByStartTimePolicy,
		OptStartTime:   &start,
	})
	if err != nil {
		return nil, fmt.Errorf("eventstore: list range: %w", err)
	}
	var out []Stored
	for {
		batch, err := cons.Fetch(256, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return out, fmt.Errorf("eventstore: list range: %w", err)
		}
		got := 0
		for msg := range batch.Messages() {
			got++
			meta, err := msg.Metadata()
			if err != nil {
				return out, fmt.Errorf("eventstore: list range: %w", err)
			}
			if !to.IsZero() && !meta.Timestamp.Before(to) {
				return out, nil
			}
			st, ok, err := s.admit(ctx, msg.Subject(), meta.Sequence.Stream, meta.Timestamp, msg.Data())
			if err != nil {
				return out, fmt.Errorf("eventstore: list range: %w", err)
			}
			if ok {
				out = append(out, st)
			}
			if meta.NumPending == 0 || (limit > 0 && len(out) >= limit) {
				return out, nil
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			return out, fmt.Errorf("eventstore: list range: %w", err)
		}
		if got == 0 {
			return out, nil // nothing stored at or after from
		}
	}
}

// CountSession returns how many events (observations and session_ended) the session
// has in the stream.
func (s *Store) CountSession(ctx context.Context, tenant, user, session string) (int, error) {
	subject, err := sessionFilter(tenant, user, session)
	if err != nil {
		return 0, fmt.Errorf("eventstore: count session: %w", err)
	}
	n, err := s.count(ctx, subject)
	return int(n), err
}

// DeleteSession purges the session's events and returns how many were removed.
func (s *Store) DeleteSession(ctx context.Context, tenant, user, session string) (int, error) {
	subject, err := sessionFilter(tenant, user, session)
	if err != nil {
		return 0, fmt.Errorf("eventstore: delete session: %w", err)
	}
	_, n, err := kvcas.EraseStream(ctx, s.js, s.stream, subject)
	if err != nil {
		return 0, fmt.Errorf("eventstore: delete session: %w", err)
	}
	return n, nil
}

// userFilters are the subject filters of every event of a user: each event
// family names the user in the subject's fourth token, with or without a
// session after it (mem.<t>.obs.<u>.<s>, mem.<t>.hit.<u>, …), so the filters
// hold families added later too.
func userFilters(tenant, user string) ([]string, error) {
	if err := events.ValidateID("tenant", tenant); err != nil {
		return nil, err
	}
	if err := events.ValidateID("user", user); err != nil {
		return nil, err
	}
	prefix := events.EventPrefix + "." + tenant + ".*." + user
	return []string{prefix, prefix + ".>"}, nil
}

// DeleteUser purges every event of the user from the stream, and the claims of
// their observations' ids (agentmem forget), and returns how many events were
// removed.
func (s *Store) DeleteUser(ctx context.Context, tenant, user string) (int, error) {
	filters, err := userFilters(tenant, user)
	if err != nil {
		return 0, fmt.Errorf("eventstore: delete user: %w", err)
	}
	// The claims first: they name the user's events, which go next.
	if err := s.dropClaims(ctx, tenant, user); err != nil {
		return 0, fmt.Errorf("eventstore: delete user: %w", err)
	}
	total := 0
	for _, f := range filters {
		_, n, err := kvcas.EraseStream(ctx, s.js, s.stream, f)
		if err != nil {
			return total, fmt.Errorf("eventstore: delete user: %w", err)
		}
		total += n
	}
	return total, nil
}

// Users lists the users of tenant that have events in the stream: the fourth
// token of each subject, as stored. A subject stored before ingest
// dead-lettered it may name no valid id ("mem.acme.obs.*.s1"): callers skip
// those (transfer.Service.Users).
func (s *Store) Users(ctx context.Context, tenant string) ([]string, error) {
	if err := events.ValidateID("tenant", tenant); err != nil {
		return nil, fmt.Errorf("eventstore: users: %w", err)
	}
	stream, err := s.openStream(ctx)
	if err != nil {
		return nil, fmt.Errorf("eventstore: stream %s: %w", s.stream, err)
	}
	info, err := stream.Info(ctx, jetstream.WithSubjectFilter(events.EventPrefix+"."+tenant+".>"))
	if err != nil {
		return nil, fmt.Errorf("eventstore: users of %s: %w", tenant, err)
	}
	seen := make(map[string]bool)
	for subject := range info.State.Subjects {
		if parts := strings.Split(subject, "."); len(parts) >= 4 {
			seen[parts[3]] = true
		}
	}
	return slices.Sorted(maps.Keys(seen)), nil
}

// Last returns the newest message stored on subject, headers included, or an
// error wrapping ErrNotFound when there is none.
func (s *Store) Last(ctx context.Context, subject string) (*jetstream.RawStreamMsg, error) {
	stream, err := s.openStream(ctx)
	if err != nil {
		return nil, fmt.Errorf("eventstore: stream %s: %w", s.stream, err)
	}
	reqCtx, cancel := kvcas.WithRequestTimeout(ctx)
	defer cancel()
	raw, err := stream.GetLastMsgForSubject(reqCtx, subject)
	err = kvcas.NoReply(ctx, err)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, fmt.Errorf("%w: nothing on %s", ErrNotFound, subject)
	}
	if err != nil {
		return nil, fmt.Errorf("eventstore: last message on %s: %w", subject, err)
	}
	return raw, nil
}

// openStream looks the event stream up, bounded like a single read.
func (s *Store) openStream(ctx context.Context) (jetstream.Stream, error) {
	reqCtx, cancel := kvcas.WithRequestTimeout(ctx)
	defer cancel()
	st, err := s.js.Stream(reqCtx, s.stream)
	return st, kvcas.NoReply(ctx, err)
}

// getMsg is the first message on subject at or after seq, bounded by
// kvcas.RequestTimeout: a read lost as the server goes away fails after seconds.
func getMsg(ctx context.Context, stream jetstream.Stream, seq uint64, subject string) (*jetstream.RawStreamMsg, error) {
	reqCtx, cancel := kvcas.WithRequestTimeout(ctx)
	defer cancel()
	m, err := stream.GetMsg(reqCtx, seq, jetstream.WithGetMsgSubject(subject))
	return m, kvcas.NoReply(ctx, err)
}

// scanSubject walks the messages matching subject (wildcards allowed) in stream
// order with "next message for subject" gets: one request per message, no consumer.
func (s *Store) scanSubject(ctx context.Context, subject string, visit func(Stored) bool) error {
	return s.scanRaw(ctx, subject, func(raw *jetstream.RawStreamMsg) (bool, error) {
		st, ok, err := s.admit(ctx, raw.Subject, raw.Sequence, raw.Time, raw.Data)
		if err != nil {
			return false, fmt.Errorf("eventstore: read %s at %d: %w", subject, raw.Sequence, err)
		}
		return !ok || visit(st), nil
	})
}

// scanRaw walks the messages matching subject as stored, in stream order, until
// visit returns false or an error.
func (s *Store) scanRaw(ctx context.Context, subject string, visit func(*jetstream.RawStreamMsg) (bool, error)) error {
	stream, err := s.openStream(ctx)
	if err != nil {
		return fmt.Errorf("eventstore: stream %s: %w", s.stream, err)
	}
	for seq := uint64(1); ; {
		raw, err := getMsg(ctx, stream, seq, subject)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("eventstore: read %s at %d: %w", subject, seq, err)
		}
		seq = raw.Sequence + 1
		if more, err := visit(raw); err != nil || !more {
			return err
		}
	}
}

// admit is the one decision of every read: the message is an event
// (events.Admit, with the workers' limits) and owns its id (Store.check). It
// reports false, logged, for what ingest dead-letters; an error only when the
// claims could not be read.
func (s *Store) admit(ctx context.Context, subject string, seq uint64, ts time.Time, data []byte) (Stored, bool, error) {
	env, err := events.Admit(subject, data, ts, s.limits)
	unclaimed := false
	if err == nil {
		unclaimed, err = s.check(ctx, env, subject, seq)
	}
	switch {
	case err == nil:
		return Stored{Seq: seq, Subject: subject, Time: ts, Envelope: env, unclaimed: unclaimed}, true, nil
	case errors.Is(err, events.ErrInvalidEvent), errors.Is(err, events.ErrMalformed), errors.Is(err, events.ErrUnknownSchemaVersion):
		s.logger.Debug("skipping an event ingest dead-letters", zap.String("subject", subject), zap.Uint64("seq", seq), zap.Error(err))
		return Stored{}, false, nil
	default:
		return Stored{}, false, err
	}
}

func (s *Store) count(ctx context.Context, filter string) (uint64, error) {
	stream, err := s.openStream(ctx)
	if err != nil {
		return 0, fmt.Errorf("eventstore: stream %s: %w", s.stream, err)
	}
	info, err := stream.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return 0, fmt.Errorf("eventstore: stream info %s: %w", filter, err)
	}
	var n uint64
	for _, c := range info.State.Subjects {
		n += c
	}
	return n, nil
}
