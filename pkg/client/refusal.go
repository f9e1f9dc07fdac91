package client

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
)

// A NATS server drops a publish or a subscription its credential's permissions
// refuse and says so only in an asynchronous error (nats.ErrPermissionViolation,
// "Permissions Violation for Publish to \"memrpc.acme.forget\""). A request it
// dropped is never answered; without this the call would wait for its whole
// timeout and then report a timeout. Each connection a Client is made on gets
// one error handler, which fails the calls waiting on the refused subject at once.

// connRefusals maps each connection a Client was made on to its refusals: one
// error handler per connection however many clients share it (the inspector
// makes one per page). An entry goes when its connection closes.
var connRefusals sync.Map // *nats.Conn → *refusals

// refusals routes a connection's permission violations to the calls waiting.
type refusals struct {
	// inboxPrefix starts the connection's reply subjects (its custom inbox
	// prefix, or _INBOX): a refused subscription under it is a reply that cannot
	// arrive, for any call.
	inboxPrefix string

	mu      sync.Mutex
	next    uint64
	waiting map[uint64]waiter
}

type waiter struct {
	subject string
	cancel  context.CancelCauseFunc
}

// refusalsOf returns nc's refusals, installing its handlers on first use; the
// handlers already set keep running after them.
func refusalsOf(nc *nats.Conn) *refusals {
	if r, ok := connRefusals.Load(nc); ok {
		return r.(*refusals)
	}
	inbox := nc.NewInbox()
	r := &refusals{inboxPrefix: inbox[:strings.LastIndexByte(inbox, '.')+1], waiting: map[uint64]waiter{}}
	if nc.IsClosed() {
		return r // nothing will be answered or refused any more
	}
	if actual, loaded := connRefusals.LoadOrStore(nc, r); loaded {
		return actual.(*refusals)
	}
	prevErr := nc.ErrorHandler()
	nc.SetErrorHandler(func(conn *nats.Conn, sub *nats.Subscription, err error) {
		// The handler already set first: what it records of the refusal (the
		// CLI's error) is there when the failed call returns.
		if prevErr != nil {
			prevErr(conn, sub, err)
		}
		if errors.Is(err, nats.ErrPermissionViolation) {
			r.refuse(err)
		}
	})
	prevClosed := nc.ClosedHandler()
	nc.SetClosedHandler(func(conn *nats.Conn) {
		connRefusals.Delete(conn)
		if prevClosed != nil {
			prevClosed(conn)
		}
	})
	return r
}

// watch returns ctx cancelled, with an error wrapping ErrRefused as its cause
// (context.Cause), when the server refuses a publish to subject or the
// subscription of a reply inbox; stop ends the watch.
func (r *refusals) watch(ctx context.Context, subject string) (_ context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	r.mu.Lock()
	id := r.next
	r.next++
	r.waiting[id] = waiter{subject: subject, cancel: cancel}
	r.mu.Unlock()
	return ctx, func() {
		r.mu.Lock()
		delete(r.waiting, id)
		r.mu.Unlock()
		cancel(nil)
	}
}

// violation parses the server's text of a permission violation: what it refused
// (Publish, Subscription) and on which subject.
var violation = regexp.MustCompile(`(?i)violation for (publish|subscription) to "([^"]+)"`)

// refuse fails the calls err concerns: those publishing to the refused subject,
// or, when a reply inbox's subscription was refused, every call. A violation it
// cannot parse fails nothing: the calls then end at their timeout as before.
func (r *refusals) refuse(err error) {
	m := violation.FindStringSubmatch(err.Error())
	if m == nil {
		return
	}
	publish, subject := strings.EqualFold(m[1], "publish"), m[2]
	if !publish && !strings.HasPrefix(subject, r.inboxPrefix) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, w := range r.waiting {
		if publish && w.subject != subject {
			continue
		}
		w.cancel(fmt.Errorf("%w: %w", ErrRefused, err))
		delete(r.waiting, id)
	}
}

// refusedCause is the refusal that ended ctx (from watch), or nil.
func refusedCause(ctx context.Context) error {
	if cause := context.Cause(ctx); errors.Is(cause, ErrRefused) {
		return cause
	}
	return nil
}
