package retrieve

import (
	"context"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/eventstore"
)

// The event history (SPEC D2): the AGENTMEM stream read back for remote clients.

func eventsQuery(tenant string, req events.EventsQuery) eventstore.Query {
	return eventstore.Query{Tenant: tenant, User: req.UserID, Session: req.SessionID, Since: req.Since, Until: req.Until}
}

// eventsList answers events.list: the selected events in stream order.
func (s *Service) eventsList(ctx context.Context, tenant string, req events.EventsQuery) (events.EventsListReply, error) {
	stored, err := s.deps.Events.List(ctx, eventsQuery(tenant, req), req.Offset, req.Limit)
	rep := events.EventsListReply{Events: make([]events.StoredEvent, 0, len(stored))}
	for _, st := range stored {
		rep.Events = append(rep.Events, StoredEvent(st))
	}
	return rep, err
}

// eventsCount answers events.count.
func (s *Service) eventsCount(ctx context.Context, tenant string, req events.EventsQuery) (events.EventsCountReply, error) {
	n, err := s.deps.Events.Count(ctx, eventsQuery(tenant, req))
	return events.EventsCountReply{Count: n}, err
}

// eventGet answers events.get: one event of the tenant by id, 404 when the stream
// does not hold it.
func (s *Service) eventGet(ctx context.Context, tenant string, req events.EventGetRequest) (events.StoredEvent, error) {
	st, err := s.deps.Events.Find(ctx, tenant, req.ID)
	if err != nil {
		return events.StoredEvent{}, err
	}
	return StoredEvent(st), nil
}

// StoredEvent is st in the wire form.
func StoredEvent(st eventstore.Stored) events.StoredEvent {
	return events.StoredEvent{Seq: st.Seq, Subject: st.Subject, StoredTS: st.Time.UTC(), Event: st.Envelope}
}

// eventsCut keeps the first events (stream order).
type eventsCut events.EventsListReply

func (r eventsCut) units() int { return len(r.Events) }

func (r eventsCut) keep(n int) any {
	return events.EventsListReply{Events: r.Events[:n], Truncated: true}
}
