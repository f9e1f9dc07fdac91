package events

import (
	"encoding/json"
	"time"
)

// Endpoints of the Markdown memory's lifecycle (SPEC A8, B4, B5): backups,
// long-term compression and the policy with its snapshots.
const (
	EndpointBackupsList    = "backups.list"
	EndpointBackupsRestore = "backups.restore"
	EndpointCompress       = "compress"
	EndpointPolicyShow     = "policy.show"
	EndpointPolicySet      = "policy.set"
	EndpointPolicyHistory  = "policy.history"
	EndpointPolicyRollback = "policy.rollback"
)

// UserRequest names one user's memory (endpoints backups.list, policy.show,
// policy.history).
type UserRequest struct {
	UserID string `json:"user_id"`
}

// Validate checks the request; errors wrap ErrInvalidRequest and name the field.
func (r UserRequest) Validate() error {
	return wrap(ErrInvalidRequest, ValidateID("user_id", r.UserID))
}

// BackupsReply lists a user's backups, oldest first
// ("backups/YYYYMMDD_HHMMSS[_N]_<file>").
type BackupsReply struct {
	Backups []string `json:"backups"`
}

// BackupRestoreRequest puts a backup back in place of the file it was taken of
// (endpoint backups.restore); the current content is backed up first. Backup is
// a name from BackupsReply, with or without "backups/"; empty restores the newest
// backup of MEMORY.md.
type BackupRestoreRequest struct {
	UserID string `json:"user_id"`
	Backup string `json:"backup,omitempty"`
}

// Validate checks the request; errors wrap ErrInvalidRequest and name the field.
func (r BackupRestoreRequest) Validate() error {
	return wrap(ErrInvalidRequest, ValidateID("user_id", r.UserID))
}

// BackupRestoreReply says which backup was restored over which file.
type BackupRestoreReply struct {
	Restored string `json:"restored"`
	File     string `json:"file"`
}

// CompressRequest compresses a user's MEMORY.md now (endpoint compress), whatever
// its size and the time of the last compression; the loss guard still applies.
// DryRun computes the compression and its diff and writes nothing.
type CompressRequest struct {
	UserID string `json:"user_id"`
	DryRun bool   `json:"dry_run,omitempty"`
}

// Validate checks the request; errors wrap ErrInvalidRequest and name the field.
func (r CompressRequest) Validate() error {
	return wrap(ErrInvalidRequest, ValidateID("user_id", r.UserID))
}

// CompressReply says what a compression did. Compressed is true when MEMORY.md
// was replaced (never on a dry run); Rejected holds the loss guard's reason when
// the compressed text was refused and the original kept.
type CompressReply struct {
	Compressed  bool   `json:"compressed"`
	DryRun      bool   `json:"dry_run,omitempty"`
	BeforeChars int    `json:"before_chars"`
	AfterChars  int    `json:"after_chars"`
	Backup      string `json:"backup,omitempty"`
	Diff        string `json:"diff,omitempty"`
	Rejected    string `json:"rejected,omitempty"`
	// Skipped says why nothing was compressed when it was not rejected
	// (an empty file, nothing to shorten).
	Skipped     string `json:"skipped,omitempty"`
	ProcessedBy string `json:"processed_by,omitempty"` // llm | rules
}

// PolicySetRequest writes policy overrides (endpoint policy.set): Values are
// merged into the current overrides, validated as a whole, and the current
// overrides are snapshotted first.
type PolicySetRequest struct {
	UserID string                     `json:"user_id"`
	Values map[string]json.RawMessage `json:"values"`
}

// Validate checks the request; errors wrap ErrInvalidRequest and name the field.
func (r PolicySetRequest) Validate() error {
	if err := ValidateID("user_id", r.UserID); err != nil {
		return wrap(ErrInvalidRequest, err)
	}
	if len(r.Values) == 0 {
		return wrap(ErrInvalidRequest, ruleError("values", "is empty; give at least one key"))
	}
	return nil
}

// PolicyRollbackRequest makes a snapshot the current overrides (endpoint
// policy.rollback); empty Snapshot is the newest. The overrides it replaces are
// snapshotted first, so a rollback can be rolled back.
type PolicyRollbackRequest struct {
	UserID   string `json:"user_id"`
	Snapshot string `json:"snapshot,omitempty"`
}

// Validate checks the request; errors wrap ErrInvalidRequest and name the field.
func (r PolicyRollbackRequest) Validate() error {
	return wrap(ErrInvalidRequest, ValidateID("user_id", r.UserID))
}

// PolicyReply is a user's effective policy (the configured one overlaid with
// Overrides) and, after a change, the snapshot taken before it.
type PolicyReply struct {
	Policy    json.RawMessage `json:"policy"`
	Overrides json.RawMessage `json:"overrides,omitempty"`
	Snapshot  string          `json:"snapshot,omitempty"`
}

// PolicySnapshot is one entry of a policy's history.
type PolicySnapshot struct {
	Name      string          `json:"name"`
	TS        time.Time       `json:"ts"`
	Overrides json.RawMessage `json:"overrides"`
}

// PolicyHistoryReply lists the snapshots, oldest first.
type PolicyHistoryReply struct {
	Snapshots []PolicySnapshot `json:"snapshots"`
}
