package events

import (
	"fmt"
	"strings"
	"time"
)

// Endpoints of a tenant's dead letters (SPEC E7): the dead-letter stream read and
// replayed for one tenant, for its admin credential, which may not use the
// JetStream API that `agentmem dlq` uses with the service credential.
const (
	EndpointDLQList   = "dlq.list"
	EndpointDLQReplay = "dlq.replay"
)

// Dead-letter reason classes: the reason_class header of a dead letter.
const (
	// ReasonClassMalformed: input that can never succeed.
	ReasonClassMalformed = "malformed"
	// ReasonClassMaxDeliveries: the worker crashed or hung on every delivery.
	ReasonClassMaxDeliveries = "max_deliveries"
	// ReasonClassRetriesExhausted: the handler kept failing through every retry.
	ReasonClassRetriesExhausted = "retries_exhausted"
	// ReasonClassQuota: the event's tenant was over one of its quotas.
	ReasonClassQuota = "quota"
)

// ReasonClasses lists every dead-letter reason class.
var ReasonClasses = []string{ReasonClassMalformed, ReasonClassMaxDeliveries, ReasonClassRetriesExhausted, ReasonClassQuota}

// DeadLetterTenant is the tenant of a dead letter whose original subject is
// subject: its second token when the subject is an event subject
// (mem.<tenant>.…), else "". The token is taken as it is, not validated, so
// that an event a tenant published with a bad user token is still its own.
func DeadLetterTenant(subject string) string {
	rest, ok := strings.CutPrefix(subject, EventPrefix+".")
	if !ok {
		return ""
	}
	tenant, _, _ := strings.Cut(rest, ".")
	return tenant
}

// DLQListRequest lists the tenant's dead letters, oldest first (endpoint
// dlq.list): at most Limit (0: events.MaxLimit), of reason class Reason ("":
// every class).
type DLQListRequest struct {
	Limit  int    `json:"limit,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// Validate checks the request; errors wrap ErrInvalidRequest and name the field.
func (r DLQListRequest) Validate() error {
	return wrap(ErrInvalidRequest, firstError(limit("limit", r.Limit), reasonClass(r.Reason)))
}

func reasonClass(class string) error {
	if class != "" && !oneOf(class, ReasonClasses) {
		return enumError("reason", class, ReasonClasses)
	}
	return nil
}

// DeadLetter is one dead letter of the tenant: the event a worker gave up on
// (Subject, Data: the original subject and body) and why.
type DeadLetter struct {
	// Seq is its sequence in the dead-letter stream, what dlq.replay names.
	Seq uint64 `json:"seq"`
	// Worker whose handler gave up.
	Worker     string    `json:"worker"`
	Subject    string    `json:"subject"`
	Reason     string    `json:"reason"`
	Class      string    `json:"class,omitempty"`
	Deliveries int       `json:"deliveries"`
	StoredTS   time.Time `json:"stored_ts"`
	// Data is the original body (base64 in JSON: it need not be JSON, or text).
	Data []byte `json:"data"`
}

// DLQListReply holds dead letters, oldest first. Truncated is set when the last
// were dropped so that the reply fits in one NATS message; list again with a
// smaller limit, or replay those shown, for the rest.
type DLQListReply struct {
	DeadLetters []DeadLetter `json:"dead_letters"`
	Truncated   bool         `json:"truncated,omitempty"`
}

// DLQReplayRequest re-publishes dead letters of the tenant to their original
// subjects and removes them from the dead-letter stream (endpoint dlq.replay).
// Select them by sequence (Seqs, at most events.MaxLimit), or every one (All), or
// every one of a reason class (Reason): exactly one of the three.
type DLQReplayRequest struct {
	Seqs   []uint64 `json:"seqs,omitempty"`
	All    bool     `json:"all,omitempty"`
	Reason string   `json:"reason,omitempty"`
}

// Validate checks the request; errors wrap ErrInvalidRequest and name the field.
func (r DLQReplayRequest) Validate() error {
	chosen := 0
	for _, set := range []bool{len(r.Seqs) > 0, r.All, r.Reason != ""} {
		if set {
			chosen++
		}
	}
	if chosen != 1 {
		return fmt.Errorf("%w: give exactly one of seqs, all and reason", ErrInvalidRequest)
	}
	if len(r.Seqs) > MaxLimit {
		return wrap(ErrInvalidRequest, ruleError("seqs", "has %d sequences; at most %d", len(r.Seqs), MaxLimit))
	}
	for i, seq := range r.Seqs {
		if seq == 0 {
			return wrap(ErrInvalidRequest, ruleError(fmt.Sprintf("seqs[%d]", i), "is 0; sequences start at 1"))
		}
	}
	return wrap(ErrInvalidRequest, reasonClass(r.Reason))
}

// DLQReplayed is one dead letter replayed: its former sequence and the subject it
// was published to again.
type DLQReplayed struct {
	Seq     uint64 `json:"seq"`
	Subject string `json:"subject"`
}

// DLQReplayReply lists the dead letters replayed, in stream order. More is set
// when All or Reason selected more than events.MaxLimit: ask again for the rest.
type DLQReplayReply struct {
	Replayed []DLQReplayed `json:"replayed"`
	More     bool          `json:"more,omitempty"`
}
