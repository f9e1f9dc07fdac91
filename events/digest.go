package events

import (
	"encoding/json"
	"hash/fnv"
	"io"
	"strconv"
)

// ContentDigest is a short hash of what an event says: type, agent and the
// observation's kind, role, text, tool call, tool result and turn. Its time and
// its meta (provenance, such as a dialogue id) are left out, so a re-sent event is
// a duplicate whatever its ts. The same id with the same digest is a duplicate;
// with another, a conflict.
func (env Envelope) ContentDigest() string {
	h := fnv.New64a()
	field := func(v string) {
		_, _ = io.WriteString(h, v)
		_, _ = h.Write([]byte{0})
	}
	field(string(env.Type))
	field(env.AgentID)
	if o := env.Observation; o != nil {
		field(string(o.EffectiveKind()))
		field(string(o.Role))
		field(o.Text)
		// Rare and small: not worth a field-by-field hash.
		enc := json.NewEncoder(h)
		if o.ToolCall != nil {
			_ = enc.Encode(o.ToolCall)
		}
		if o.ToolResult != nil {
			_ = enc.Encode(o.ToolResult)
		}
		if o.Turn != nil {
			_ = enc.Encode(o.Turn)
		}
	}
	return strconv.FormatUint(h.Sum64(), 36)
}
