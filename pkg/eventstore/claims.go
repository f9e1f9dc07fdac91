package eventstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/kvcas"
)

// ClaimsBucket is the KV bucket of event-id claims: one key per observation id
// of a tenant, <tenant>.<id>, whose value names the event that owns the id.
const ClaimsBucket = "agentmem_event_ids"

// ErrEventIDReused reports an observation whose id an earlier event of its
// tenant, with other content or on another user's or session's subject, owns: a
// producer bug or a forgery, never a redelivery. It wraps events.ErrInvalidEvent,
// so every reader treats it as what ingest dead-letters.
var ErrEventIDReused = fmt.Errorf("%w: event id reused with other content", events.ErrInvalidEvent)

// EnsureClaims creates (or binds) the claims bucket.
func EnsureClaims(ctx context.Context, js jetstream.JetStream) (jetstream.KeyValue, error) {
	kv, err := kvcas.EnsureKV(ctx, js, jetstream.KeyValueConfig{Bucket: ClaimsBucket, Storage: jetstream.FileStorage,
		Description: "agentmem event-id claims: which event owns each observation id"})
	if err != nil {
		return nil, fmt.Errorf("eventstore: claims: %w", err)
	}
	return kv, nil
}

// OpenClaims binds the claims bucket a running deployment created (a command
// reading the live stream).
func OpenClaims(ctx context.Context, js jetstream.JetStream) (jetstream.KeyValue, error) {
	kv, err := js.KeyValue(ctx, ClaimsBucket)
	if err != nil {
		return nil, fmt.Errorf("eventstore: claims bucket %s: %w", ClaimsBucket, err)
	}
	return kvcas.Bounded(kv), nil
}

// claim is what a claim records: the stream sequence of the owner, its subject
// (tenant, user, session) and what it says (events.Envelope.ContentDigest).
type claim struct {
	seq     uint64
	subject string
	digest  string
}

func (c claim) String() string {
	return strconv.FormatUint(c.seq, 10) + " " + c.subject + " " + c.digest
}

func parseClaim(v []byte) (claim, bool) {
	f := strings.Fields(string(v))
	if len(f) != 3 {
		return claim{}, false
	}
	seq, err := strconv.ParseUint(f[0], 10, 64)
	return claim{seq: seq, subject: f[1], digest: f[2]}, err == nil
}

// Claim decides whether env, stored at seq on subject, owns its id in its
// tenant: an observation id belongs to the first event in stream order that
// used it; the same subject and content again (a redelivery, a republish, a
// restore) is that event. Any other use of the id fails with ErrEventIDReused,
// which every reader treats as ingest does (dead letter, left out). Ingest, the
// claimant, calls it in stream order (pipeline.Config.Claim); an earlier event
// still replaces a later one's claim, so a redelivery out of order keeps the
// owner. Other readers only read claims (check). Only observations are claimed:
// they are what memory is made of. Without a claims bucket it accepts
// everything.
func (s *Store) Claim(ctx context.Context, env events.Envelope, subject string, seq uint64) error {
	if s.claims == nil || env.Type != events.TypeObservation {
		return nil
	}
	key := env.Tenant + "." + env.ID
	mine := claim{seq: seq, subject: subject, digest: env.ContentDigest()}
	for range claimAttempts {
		if _, err := s.claims.Create(ctx, key, []byte(mine.String())); err == nil {
			return nil
		} else if !errors.Is(err, jetstream.ErrKeyExists) {
			return fmt.Errorf("eventstore: claim %s: %w", key, err)
		}
		e, err := s.claims.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // deleted meanwhile (forget): claim it again
		}
		if err != nil {
			return fmt.Errorf("eventstore: claim %s: %w", key, err)
		}
		owner, ok := parseClaim(e.Value())
		switch {
		case ok && owner.subject == mine.subject && owner.digest == mine.digest:
			return nil
		case ok && owner.seq < seq:
			return fmt.Errorf("%w: id %s belongs to the event at stream sequence %d", ErrEventIDReused, env.ID, owner.seq)
		}
		// The claim is a later event's (or unreadable): the earlier one owns the id.
		if _, err := s.claims.Update(ctx, key, []byte(mine.String()), e.Revision()); err == nil {
			return nil
		}
	}
	return fmt.Errorf("eventstore: claim %s: %w", key, kvcas.ErrCASConflict)
}

// check is Claim for a reader that is not the claimant: it reads the claim and
// never writes one, since it does not see the stream in order. No claim yet
// reports unclaimed: the claimant has not reached the event, or the event was
// stored before claims existed.
func (s *Store) check(ctx context.Context, env events.Envelope, subject string, seq uint64) (unclaimed bool, err error) {
	if s.claims == nil || env.Type != events.TypeObservation {
		return false, nil
	}
	owner, found, err := s.ownerOf(ctx, env.Tenant+"."+env.ID)
	switch {
	case err != nil || !found:
		return !found, err
	case owner.seq < seq && (owner.subject != subject || owner.digest != env.ContentDigest()):
		return false, fmt.Errorf("%w: id %s belongs to the event at stream sequence %d", ErrEventIDReused, env.ID, owner.seq)
	}
	return false, nil
}

// ownerOf reads the claim under key; found is false when there is none or it
// cannot be parsed (a claim is then made again).
func (s *Store) ownerOf(ctx context.Context, key string) (owner claim, found bool, err error) {
	e, err := s.claims.Get(ctx, key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return claim{}, false, nil
	case err != nil:
		return claim{}, false, fmt.Errorf("eventstore: claim %s: %w", key, err)
	}
	owner, found = parseClaim(e.Value())
	return owner, found, nil
}

// dropClaims purges the claims the user's observations own (forget): a claim
// names its owner's subject. A claim another user's event owns stays.
func (s *Store) dropClaims(ctx context.Context, tenant, user string) error {
	if s.claims == nil {
		return nil
	}
	prefix := events.EventPrefix + "." + tenant + "." + string(events.SubjectObservation) + "." + user + "."
	return s.scanRaw(ctx, prefix+"*", func(raw *jetstream.RawStreamMsg) (bool, error) {
		var env struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(raw.Data, &env) != nil || events.ValidateID("id", env.ID) != nil {
			return true, nil // no id, no claim
		}
		key := tenant + "." + env.ID
		owner, found, err := s.ownerOf(ctx, key)
		if err != nil {
			return false, err
		}
		if found && strings.HasPrefix(owner.subject, prefix) {
			if err := s.claims.Purge(ctx, key); err != nil {
				return false, fmt.Errorf("claim %s: %w", key, err)
			}
		}
		return true, nil
	})
}

// claimAttempts bounds Claim's compare-and-set loop; two readers racing for one
// id settle in two rounds.
const claimAttempts = 5
