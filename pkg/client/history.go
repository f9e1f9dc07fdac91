package client

import (
	"context"

	"github.com/agentmem/agentmem/events"
)

// Events lists the tenant's events in stream order (SPEC D2); a reply cut to fit
// one message has Truncated set.
func (c *Client) Events(ctx context.Context, q events.EventsQuery) (events.EventsListReply, error) {
	return request[events.EventsListReply](ctx, c, events.EndpointEventsList, q)
}

// CountEvents counts the events q selects.
func (c *Client) CountEvents(ctx context.Context, q events.EventsQuery) (events.EventsCountReply, error) {
	return request[events.EventsCountReply](ctx, c, events.EndpointEventsCount, q)
}

// Event returns one of the tenant's events by id.
func (c *Client) Event(ctx context.Context, id string) (events.StoredEvent, error) {
	return request[events.StoredEvent](ctx, c, events.EndpointEventsGet, events.EventGetRequest{ID: id})
}

// DeadLetters lists the tenant's dead letters, oldest first (SPEC E7); an admin
// credential's request, refused to an agent's.
func (c *Client) DeadLetters(ctx context.Context, req events.DLQListRequest) (events.DLQListReply, error) {
	return request[events.DLQListReply](ctx, c, events.EndpointDLQList, req)
}

// ReplayDeadLetters re-publishes the tenant's dead letters req selects to their
// subjects and removes them from the dead-letter stream.
func (c *Client) ReplayDeadLetters(ctx context.Context, req events.DLQReplayRequest) (events.DLQReplayReply, error) {
	return request[events.DLQReplayReply](ctx, c, events.EndpointDLQReplay, req)
}
