package client

import (
	"context"

	"github.com/agentmem/agentmem/events"
)

// Backups lists the user's backups, oldest first (SPEC A8).
func (c *Client) Backups(ctx context.Context, userID string) (events.BackupsReply, error) {
	return request[events.BackupsReply](ctx, c, events.EndpointBackupsList, events.UserRequest{UserID: userID})
}

// RestoreBackup puts a backup (the newest of MEMORY.md when empty) back in place
// of the file it was taken of; the current content is backed up first.
func (c *Client) RestoreBackup(ctx context.Context, req events.BackupRestoreRequest) (events.BackupRestoreReply, error) {
	return request[events.BackupRestoreReply](ctx, c, events.EndpointBackupsRestore, req)
}

// Compress compresses the user's MEMORY.md now (SPEC B4); a reply with Rejected
// set means the loss guard kept the original.
func (c *Client) Compress(ctx context.Context, req events.CompressRequest) (events.CompressReply, error) {
	return request[events.CompressReply](ctx, c, events.EndpointCompress, req)
}

// Policy returns the user's effective policy and overrides (SPEC B1).
func (c *Client) Policy(ctx context.Context, userID string) (events.PolicyReply, error) {
	return request[events.PolicyReply](ctx, c, events.EndpointPolicyShow, events.UserRequest{UserID: userID})
}

// SetPolicy merges values into the user's policy overrides (SPEC B5).
func (c *Client) SetPolicy(ctx context.Context, req events.PolicySetRequest) (events.PolicyReply, error) {
	return request[events.PolicyReply](ctx, c, events.EndpointPolicySet, req)
}

// PolicyHistory lists the user's policy snapshots, oldest first.
func (c *Client) PolicyHistory(ctx context.Context, userID string) (events.PolicyHistoryReply, error) {
	return request[events.PolicyHistoryReply](ctx, c, events.EndpointPolicyHistory, events.UserRequest{UserID: userID})
}

// RollbackPolicy restores a policy snapshot (the newest when empty).
func (c *Client) RollbackPolicy(ctx context.Context, req events.PolicyRollbackRequest) (events.PolicyReply, error) {
	return request[events.PolicyReply](ctx, c, events.EndpointPolicyRollback, req)
}
