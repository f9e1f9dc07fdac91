package client

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/agentmem/agentmem/events"
)

// Context asks for what the agent should know right now (SPEC D5): a ContextPack
// whose Prompt goes into a system prompt. An empty req.AgentID is the client's.
func (c *Client) Context(ctx context.Context, req events.ContextRequest) (events.ContextPack, error) {
	if req.AgentID == "" {
		req.AgentID = c.cfg.AgentID
	}
	return request[events.ContextPack](ctx, c, events.EndpointContext, req)
}

// Search searches the user's memories with the agent's and the tenant's, best
// first (memory_search, SPEC A10, C4). An empty req.AgentID is the client's.
func (c *Client) Search(ctx context.Context, req events.SearchRequest) (events.SearchReply, error) {
	if req.AgentID == "" {
		req.AgentID = c.cfg.AgentID
	}
	return request[events.SearchReply](ctx, c, events.EndpointSearch, req)
}

// Append appends to MEMORY.md or today's daily note (memory_append, SPEC A9)
// of req.Scope's memory (scope agent without an agent id: the client's agent,
// requested on memrpc.<tenant>.agent.<agent_id>.append, which takes that
// agent's credential or an admin's; scope tenant is requested on
// tenant.append, which takes an admin credential). A retriever that answers with an empty body (the contract
// allows it) gives a reply holding only the slot.
func (c *Client) Append(ctx context.Context, req events.AppendRequest) (events.AppendReply, error) {
	req.AgentID = c.scopeAgent(req.Scope, req.AgentID)
	data, err := c.roundTrip(ctx, events.ScopedEndpoint(events.EndpointAppend, req.Scope), req)
	if err != nil {
		return events.AppendReply{}, err
	}
	rep := events.AppendReply{Slot: req.EffectiveSlot()}
	if len(data) > 0 {
		if err := json.Unmarshal(data, &rep); err != nil {
			return events.AppendReply{}, fmt.Errorf("%w: append: %w", ErrBadReply, err)
		}
	}
	return rep, nil
}

// ReadTopic reads a topic file (memory_read_topic, SPEC A5).
func (c *Client) ReadTopic(ctx context.Context, req events.TopicRequest) (events.TopicReply, error) {
	return request[events.TopicReply](ctx, c, events.EndpointTopic, req)
}

// SessionSummary summarises a session (SPEC B2, D5).
func (c *Client) SessionSummary(ctx context.Context, req events.SessionRequest) (events.SessionSummaryReply, error) {
	return request[events.SessionSummaryReply](ctx, c, events.EndpointSessionSummary, req)
}

// ClearSession deletes a session's events, turns and session items (SPEC D5).
func (c *Client) ClearSession(ctx context.Context, req events.SessionRequest) (events.DeleteReply, error) {
	return request[events.DeleteReply](ctx, c, events.EndpointSessionClear, req)
}

// ArchiveSession returns a whole session as one JSON document (SPEC D5).
func (c *Client) ArchiveSession(ctx context.Context, req events.SessionRequest) (events.SessionArchive, error) {
	return request[events.SessionArchive](ctx, c, events.EndpointSessionArchive, req)
}

// RestoreSession re-publishes an archive with its own event ids, so restoring twice
// changes nothing the second time (SPEC D5).
func (c *Client) RestoreSession(ctx context.Context, archive events.SessionArchive) (events.SessionRestoreReply, error) {
	return request[events.SessionRestoreReply](ctx, c, events.EndpointSessionRestore, archive)
}

// Add adds a memory through the write decision to req.Scope's memory, as
// Append; the reply's MemoryIDs is empty when the decision declined (SPEC C2,
// C3).
func (c *Client) Add(ctx context.Context, req events.AddRequest) (events.AddReply, error) {
	req.AgentID = c.scopeAgent(req.Scope, req.AgentID)
	return request[events.AddReply](ctx, c, events.ScopedEndpoint(events.EndpointAdd, req.Scope), req)
}

// scopeAgent is the agent id of a write to scope: agentID, or the client's
// for the agent scope.
func (c *Client) scopeAgent(scope events.MemoryScope, agentID string) string {
	if scope == events.MemoryScopeAgent && agentID == "" {
		return c.cfg.AgentID
	}
	return agentID
}

// Get reads one memory (SPEC C2).
func (c *Client) Get(ctx context.Context, req events.GetRequest) (events.Memory, error) {
	return request[events.Memory](ctx, c, events.EndpointGet, req)
}

// Update rewrites a memory's text and/or metadata (SPEC C2).
func (c *Client) Update(ctx context.Context, req events.UpdateRequest) (events.Memory, error) {
	return request[events.Memory](ctx, c, events.EndpointUpdate, req)
}

// Delete deletes memories by id (SPEC C2).
func (c *Client) Delete(ctx context.Context, req events.DeleteRequest) (events.DeleteReply, error) {
	return request[events.DeleteReply](ctx, c, events.EndpointDelete, req)
}

// Reset deletes every vector memory of a user and says how many (SPEC C2).
func (c *Client) Reset(ctx context.Context, req events.ResetRequest) (events.ResetReply, error) {
	return request[events.ResetReply](ctx, c, events.EndpointReset, req)
}

// History lists a memory's changes, oldest first (SPEC C2).
func (c *Client) History(ctx context.Context, req events.HistoryRequest) (events.HistoryReply, error) {
	return request[events.HistoryReply](ctx, c, events.EndpointHistory, req)
}

// Consolidate runs consolidation for a user now (SPEC C2, C6, C8).
func (c *Client) Consolidate(ctx context.Context, req events.ConsolidateRequest) (events.ConsolidateReply, error) {
	return request[events.ConsolidateReply](ctx, c, events.EndpointConsolidate, req)
}

// SaveItem saves a memory item, replacing one with the same (scope, kind, key)
// (SPEC D4), in req.Scope's memory, as Append.
func (c *Client) SaveItem(ctx context.Context, req events.ItemRequest) (events.MemoryItem, error) {
	req.AgentID = c.scopeAgent(req.Scope, req.AgentID)
	return request[events.MemoryItem](ctx, c, events.ScopedEndpoint(events.EndpointItemSave, req.Scope), req)
}

// GetItem reads a memory item by (scope, kind, key); an expired item is not found
// (SPEC D4).
func (c *Client) GetItem(ctx context.Context, req events.ItemKeyRequest) (events.MemoryItem, error) {
	return request[events.MemoryItem](ctx, c, events.EndpointItemGet, req)
}

// ListItems lists the items of a scope (SPEC D4).
func (c *Client) ListItems(ctx context.Context, req events.ItemScopeRequest) (events.ItemListReply, error) {
	return request[events.ItemListReply](ctx, c, events.EndpointItemList, req)
}

// UpdateItem updates an existing memory item (SPEC D4).
func (c *Client) UpdateItem(ctx context.Context, req events.ItemRequest) (events.MemoryItem, error) {
	return request[events.MemoryItem](ctx, c, events.EndpointItemUpdate, req)
}

// DeleteItem deletes one memory item (SPEC D4).
func (c *Client) DeleteItem(ctx context.Context, req events.ItemKeyRequest) (events.DeleteReply, error) {
	return request[events.DeleteReply](ctx, c, events.EndpointItemDelete, req)
}

// DeleteScope deletes every item of a scope (SPEC D4).
func (c *Client) DeleteScope(ctx context.Context, req events.ItemScopeRequest) (events.DeleteReply, error) {
	return request[events.DeleteReply](ctx, c, events.EndpointItemDeleteScope, req)
}

// SearchItems searches memory items by text (SPEC D4).
func (c *Client) SearchItems(ctx context.Context, req events.ItemSearchRequest) (events.ItemListReply, error) {
	return request[events.ItemListReply](ctx, c, events.EndpointItemSearch, req)
}
