package memory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/bus"
)

// HistoryLog is the change log of memories (SPEC C2 history) in a JetStream KV
// bucket: one key per memory, "<tenant>.<user>.<memory id>", whose value is the
// JSON list of its events.Change, oldest first, at most Config.MaxHistory (the
// newest kept). Every writer (this service for add, update and delete; the
// consolidator for merge, separate and reconsolidate) appends with a
// compare-and-set, so concurrent appends never lose a change.
type HistoryLog struct {
	js     jetstream.JetStream
	kv     jetstream.KeyValue
	bucket string
	max    int
}

// maxHistoryBytes keeps a history value well under NATS's default 1 MiB message
// limit whatever the texts' sizes: beyond it the oldest changes go first.
const maxHistoryBytes = 512 << 10

// historyKey validates the parts and builds the key. Tenant and user are ID
// tokens; the memory id is a UUID in canonical form, so both spellings of one id
// share a key. All three are valid KV key tokens.
func historyKey(tenant, userID, memoryID string) (string, error) {
	if err := firstErr(events.ValidateID("tenant", tenant), events.ValidateID("user_id", userID)); err != nil {
		return "", invalid(err)
	}
	id, err := canonicalID("memory id", memoryID)
	if err != nil {
		return "", err
	}
	return tenant + "." + userID + "." + id, nil
}

// Append adds changes to the memory's history, in order, in one compare-and-set;
// each needs Op and TS. The stored changes are kept as raw JSON, not decoded: an
// append costs a scan of the value, not a decode and re-encode of every change.
func (h *HistoryLog) Append(ctx context.Context, tenant, userID, memoryID string, changes ...events.Change) error {
	key, err := historyKey(tenant, userID, memoryID)
	if err != nil {
		return err
	}
	add := make([]json.RawMessage, len(changes))
	for i, ch := range changes {
		if ch.Op == "" {
			return invalidf("change op is required")
		}
		if ch.TS.IsZero() {
			return invalidf("change ts is required")
		}
		if add[i], err = json.Marshal(ch); err != nil {
			return fmt.Errorf("memory: encode history change of %s: %w", key, err)
		}
	}
	if len(add) == 0 {
		return nil
	}
	_, err = bus.UpdateKV(ctx, h.kv, key, 0, func(old []byte, exists bool) ([]byte, error) {
		var list []json.RawMessage
		if exists {
			if err := json.Unmarshal(old, &list); err != nil {
				return nil, fmt.Errorf("memory: history %s is not a change list: %w", key, err)
			}
			for _, c := range list {
				if len(c) == 0 || c[0] != '{' {
					return nil, fmt.Errorf("memory: history %s is not a change list: holds %.20s", key, c)
				}
			}
		}
		list = append(list, add...)
		if len(list) > h.max {
			list = list[len(list)-h.max:]
		}
		for {
			data := joinJSON(list)
			if len(data) <= maxHistoryBytes || len(list) == 1 {
				return data, nil
			}
			list = list[max(1, len(list)/8):]
		}
	})
	if err != nil {
		return fmt.Errorf("memory: append history %s: %w", key, err)
	}
	return nil
}

// joinJSON encodes list as a JSON array of its (valid, compact) elements, as
// json.Marshal would, without validating and compacting each element again.
func joinJSON(list []json.RawMessage) []byte {
	n := 2 + len(list)
	for _, c := range list {
		n += len(c)
	}
	data := make([]byte, 0, n)
	data = append(data, '[')
	for i, c := range list {
		if i > 0 {
			data = append(data, ',')
		}
		data = append(data, c...)
	}
	return append(data, ']')
}

// List returns the memory's changes, oldest first; nil when it has none.
func (h *HistoryLog) List(ctx context.Context, tenant, userID, memoryID string) ([]events.Change, error) {
	key, err := historyKey(tenant, userID, memoryID)
	if err != nil {
		return nil, err
	}
	e, err := h.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("memory: read history %s: %w", key, err)
	}
	var changes []events.Change
	if err := json.Unmarshal(e.Value(), &changes); err != nil {
		return nil, fmt.Errorf("memory: history %s is not a change list: %w", key, err)
	}
	return changes, nil
}

// purgeUser removes every history of the user in one stream purge of the
// bucket's subjects under "<tenant>.<user>.", leaving no delete markers behind.
func (h *HistoryLog) purgeUser(ctx context.Context, tenant, userID string) error {
	str, err := h.js.Stream(ctx, "KV_"+h.bucket)
	if err != nil {
		return fmt.Errorf("memory: history bucket %s: %w", h.bucket, err)
	}
	subject := "$KV." + h.bucket + "." + tenant + "." + userID + ".>"
	if err := str.Purge(ctx, jetstream.WithPurgeSubject(subject)); err != nil {
		return fmt.Errorf("memory: purge history %s: %w", subject, err)
	}
	return nil
}
