package events

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// WriteOps are the retriever endpoints whose requests change memory: each is
// recorded as a write event (mem.<tenant>.write.<user>) before it is applied, so
// that the stream holds every write and a replay or rebuild can apply it again.
// session.restore is recorded without its events (they are re-published on
// their own subjects); compress only when it is not a dry run; import with the
// page as it was sent (ImportRequest.Embedder names its vectors' embedder);
// consolidate for an on-demand consolidation (what it merges, separates and
// infers changes memory).
var WriteOps = []string{
	EndpointAppend, EndpointAdd, EndpointUpdate, EndpointDelete, EndpointReset,
	EndpointItemSave, EndpointItemUpdate, EndpointItemDelete, EndpointItemDeleteScope,
	EndpointSessionClear, EndpointSessionRestore,
	EndpointBackupsRestore, EndpointCompress, EndpointPolicySet, EndpointPolicyRollback,
	EndpointImport, EndpointConsolidate,
}

// IsWriteOp reports whether endpoint is one of WriteOps.
func IsWriteOp(endpoint string) bool { return oneOf(endpoint, WriteOps) }

// Write is the body of a write event: a request to the retriever that changes
// memory, as it was applied. Applying it again (pkg/writes) with the envelope's
// ts as the current time gives the same result, on any machine.
type Write struct {
	// Op is the endpoint, one of WriteOps.
	Op string `json:"op"`
	// Request is the endpoint's request as the retriever validated it.
	Request json.RawMessage `json:"request"`
	// MemoryIDs are the ids the retriever assigned (add: the new memory's id),
	// checked again when the write is applied.
	MemoryIDs []string `json:"memory_ids,omitempty"`
}

// WriteRequest returns a new zero request of op's type, for decoding a Write's
// Request; ok is false when op is not a write.
func WriteRequest(op string) (req interface{ Validate() error }, ok bool) {
	switch op {
	case EndpointAppend:
		return &AppendRequest{}, true
	case EndpointAdd:
		return &AddRequest{}, true
	case EndpointUpdate:
		return &UpdateRequest{}, true
	case EndpointDelete:
		return &DeleteRequest{}, true
	case EndpointReset:
		return &ResetRequest{}, true
	case EndpointItemSave, EndpointItemUpdate:
		return &ItemRequest{}, true
	case EndpointItemDelete:
		return &ItemKeyRequest{}, true
	case EndpointItemDeleteScope:
		return &ItemScopeRequest{}, true
	case EndpointSessionClear:
		return &SessionRequest{}, true
	case EndpointSessionRestore:
		return &SessionArchive{}, true
	case EndpointBackupsRestore:
		return &BackupRestoreRequest{}, true
	case EndpointCompress:
		return &CompressRequest{}, true
	case EndpointPolicySet:
		return &PolicySetRequest{}, true
	case EndpointPolicyRollback:
		return &PolicyRollbackRequest{}, true
	case EndpointImport:
		return &ImportRequest{}, true
	case EndpointConsolidate:
		return &ConsolidateRequest{}, true
	}
	return nil, false
}

// Decode returns w's request, decoded and validated, as a pointer to the
// request type WriteRequest(w.Op) names.
func (w *Write) Decode() (any, error) {
	req, ok := WriteRequest(w.Op)
	if !ok {
		return nil, enumError("write.op", w.Op, WriteOps)
	}
	if len(bytes.TrimSpace(w.Request)) == 0 {
		return nil, ruleError("write.request", "is required")
	}
	if err := json.Unmarshal(w.Request, req); err != nil {
		return nil, ruleError("write.request", "is not a %s request: %v", w.Op, err)
	}
	if err := req.Validate(); err != nil {
		return nil, fmt.Errorf("write.request: %w", err)
	}
	return req, nil
}

// validate checks the body and that its request is for the envelope's user.
func (w *Write) validate(path, userID string) error {
	if _, err := w.Decode(); err != nil {
		return err
	}
	var owner struct {
		UserID string `json:"user_id"`
	}
	if err := json.Unmarshal(w.Request, &owner); err != nil || owner.UserID != userID {
		return ruleError(field(path, "request.user_id"), "is %q, not the event's user %q", owner.UserID, userID)
	}
	return idList(field(path, "memory_ids"), w.MemoryIDs, false)
}
