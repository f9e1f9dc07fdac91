package client

import (
	"context"

	"github.com/agentmem/agentmem/events"
)

// Export reads one page of a part of the tenant's memory (agentmem export);
// ask again with the reply's Next until it is "".
func (c *Client) Export(ctx context.Context, req events.ExportRequest) (events.ExportReply, error) {
	return request[events.ExportReply](ctx, c, events.EndpointExport, req)
}

// Import writes one page of an archive into a user's memory (agentmem import).
func (c *Client) Import(ctx context.Context, req events.ImportRequest) (events.ImportReply, error) {
	return request[events.ImportReply](ctx, c, events.EndpointImport, req)
}

// Forget erases a user of the tenant everywhere and says what it removed.
func (c *Client) Forget(ctx context.Context, userID string) (events.ForgetReply, error) {
	return request[events.ForgetReply](ctx, c, events.EndpointForget, events.ForgetRequest{UserID: userID})
}
