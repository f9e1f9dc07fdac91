package qdrant

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentmem/agentmem/pkg/embed"
	"github.com/agentmem/agentmem/pkg/vectorstore"
	"github.com/google/uuid"
	qc "github.com/qdrant/go-client/qdrant"
)

// Vector names in the collection.
const (
	vectorDense  = "dense"
	vectorSparse = "bm25"
)

// Payload fields of a point.
const (
	fieldTenant     = "tenant"
	fieldUserID     = "user_id"
	fieldMemoryType = "memory_type"
	fieldScope      = "scope"
	fieldKind       = "kind"
	fieldKey        = "key"
	fieldText       = "text"
	fieldTS         = "ts"
	fieldChatID     = "chat_id"
	fieldWho        = "who"
	fieldHitCount   = "hit_count"
	fieldConfidence = "confidence"
	fieldExpiresAt  = "expires_at"
	fieldMetadata   = "metadata"
)

// checkStrings rejects strings gRPC cannot carry: protobuf strings must be UTF-8.
func checkStrings(r vectorstore.Record) error {
	for _, f := range []struct{ name, v string }{
		{"text", r.Text}, {"scope", r.Scope}, {"kind", r.Kind}, {"key", r.Key}, {"chat_id", r.ChatID}, {"who", r.Who},
	} {
		if !utf8.ValidString(f.v) {
			return fmt.Errorf("%w: record %s: %s is not valid UTF-8", vectorstore.ErrInvalidRecord, r.ID, f.name)
		}
	}
	return nil
}

// toPoint maps a normalised record onto a point: both named vectors and the full
// payload.
func toPoint(r vectorstore.Record) (*qc.PointStruct, error) {
	if err := checkStrings(r); err != nil {
		return nil, err
	}
	meta, err := metadataValue(r.Metadata)
	if err != nil {
		return nil, fmt.Errorf("%w: record %s: %w", vectorstore.ErrInvalidRecord, r.ID, err)
	}
	return &qc.PointStruct{
		Id:      qc.NewIDUUID(r.ID),
		Vectors: qc.NewVectorsMap(pointVectors(r.Vector, &r.Text)),
		Payload: map[string]*qc.Value{
			fieldTenant:     qc.NewValueString(r.Tenant),
			fieldUserID:     qc.NewValueString(r.UserID),
			fieldMemoryType: qc.NewValueString(string(r.MemoryType)),
			fieldScope:      qc.NewValueString(r.Scope),
			fieldKind:       qc.NewValueString(r.Kind),
			fieldKey:        qc.NewValueString(r.Key),
			fieldText:       qc.NewValueString(r.Text),
			fieldTS:         qc.NewValueInt(r.TS.UnixMicro()),
			fieldChatID:     qc.NewValueString(r.ChatID),
			fieldWho:        qc.NewValueString(r.Who),
			fieldHitCount:   qc.NewValueInt(int64(r.HitCount)),
			fieldConfidence: qc.NewValueDouble(r.Confidence),
			fieldExpiresAt:  expiresValue(r.ExpiresAt),
			fieldMetadata:   meta,
		},
	}, nil
}

// pointVectors are the named vectors to write: the dense one if given, the sparse
// one of text if given.
func pointVectors(dense []float32, text *string) map[string]*qc.Vector {
	m := make(map[string]*qc.Vector, 2)
	if dense != nil {
		m[vectorDense] = qc.NewVectorDense(dense)
	}
	if text != nil {
		sv := embed.Sparse(*text)
		// An empty sparse vector is valid in Qdrant: stored, never found by a sparse
		// query, which is what a text without terms should be.
		m[vectorSparse] = qc.NewVectorSparse(sv.Indices, sv.Values)
	}
	return m
}

// expiresValue stores "never" as null rather than leaving the field out, so that a
// payload update can also clear an expiry.
func expiresValue(t time.Time) *qc.Value {
	if t.IsZero() {
		return qc.NewValueNull()
	}
	return qc.NewValueInt(t.UnixMicro())
}

// metadataValue converts metadata to a payload value through encoding/json, so it
// holds exactly what the embedded store keeps (the same JSON) and numbers keep
// their kind: a JSON integer becomes an integer value (so payload filters on
// integers match it), anything else a double. A nil map is null.
func metadataValue(m map[string]any) (*qc.Value, error) {
	if m == nil {
		return qc.NewValueNull(), nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("metadata is not JSON: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("metadata is not JSON: %w", err)
	}
	return jsonToValue(v)
}

func jsonToValue(v any) (*qc.Value, error) {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return qc.NewValueInt(i), nil
		}
		f, err := x.Float64()
		if err != nil {
			return nil, fmt.Errorf("number %s: %w", x, err)
		}
		return qc.NewValueDouble(f), nil
	case []any:
		list := make([]*qc.Value, len(x))
		for i, e := range x {
			ev, err := jsonToValue(e)
			if err != nil {
				return nil, err
			}
			list[i] = ev
		}
		return qc.NewValueFromList(list...), nil
	case map[string]any:
		fields := make(map[string]*qc.Value, len(x))
		for k, e := range x {
			ev, err := jsonToValue(e)
			if err != nil {
				return nil, err
			}
			fields[k] = ev
		}
		return qc.NewValueFromFields(fields), nil
	}
	// nil, bool and string: encoding/json gives nothing else.
	return qc.NewValue(v)
}

// valueToJSON is the inverse of jsonToValue as encoding/json would decode it into
// an any: every number is a float64.
func valueToJSON(v *qc.Value) any {
	switch k := v.GetKind().(type) {
	case *qc.Value_BoolValue:
		return k.BoolValue
	case *qc.Value_IntegerValue:
		return float64(k.IntegerValue)
	case *qc.Value_DoubleValue:
		return k.DoubleValue
	case *qc.Value_StringValue:
		return k.StringValue
	case *qc.Value_ListValue:
		out := make([]any, len(k.ListValue.GetValues()))
		for i, e := range k.ListValue.GetValues() {
			out[i] = valueToJSON(e)
		}
		return out
	case *qc.Value_StructValue:
		out := make(map[string]any, len(k.StructValue.GetFields()))
		for name, e := range k.StructValue.GetFields() {
			out[name] = valueToJSON(e)
		}
		return out
	}
	return nil
}

// number reads a numeric payload value whichever way the server encoded it.
func number(v *qc.Value) (float64, bool) {
	switch k := v.GetKind().(type) {
	case *qc.Value_IntegerValue:
		return float64(k.IntegerValue), true
	case *qc.Value_DoubleValue:
		return k.DoubleValue, true
	}
	return 0, false
}

// integer reads an integral payload value; Qdrant keeps integers as integers, but
// a double with an integral value is accepted too.
func integer(v *qc.Value) (int64, bool) {
	if k, ok := v.GetKind().(*qc.Value_IntegerValue); ok {
		return k.IntegerValue, true
	}
	f, ok := number(v)
	return int64(f), ok && f == float64(int64(f))
}

// fromPoint maps a point read back (payload and, if asked, the dense vector) onto a
// record. A point without the adapter's payload is reported, not guessed at.
func fromPoint(id *qc.PointId, payload map[string]*qc.Value, vectors *qc.VectorsOutput) (vectorstore.Record, error) {
	var r vectorstore.Record
	var err error
	if r.ID, err = pointUUID(id); err != nil {
		return r, err
	}
	str := func(k string) string { return payload[k].GetStringValue() }
	r.Tenant, r.UserID = str(fieldTenant), str(fieldUserID)
	r.MemoryType = vectorstore.MemoryType(str(fieldMemoryType))
	r.Scope, r.Kind, r.Key = str(fieldScope), str(fieldKind), str(fieldKey)
	r.Text, r.ChatID, r.Who = str(fieldText), str(fieldChatID), str(fieldWho)
	ts, ok := integer(payload[fieldTS])
	if !ok {
		return r, fmt.Errorf("point %s: payload %q is not an integer", r.ID, fieldTS)
	}
	r.TS = time.UnixMicro(ts).UTC()
	hits, _ := integer(payload[fieldHitCount])
	r.HitCount = int(hits)
	r.Confidence, _ = number(payload[fieldConfidence])
	if exp, ok := integer(payload[fieldExpiresAt]); ok {
		r.ExpiresAt = time.UnixMicro(exp).UTC()
	}
	if m, ok := valueToJSON(payload[fieldMetadata]).(map[string]any); ok {
		r.Metadata = m
	}
	if vectors != nil {
		r.Vector = vectors.GetVectors().GetVectors()[vectorDense].GetDenseVector().GetData()
	}
	return r, nil
}

// pointUUID is a point id in the canonical form records use.
func pointUUID(id *qc.PointId) (string, error) {
	u, err := uuid.Parse(id.GetUuid())
	if err != nil {
		return "", fmt.Errorf("point %v: id is not a UUID", id)
	}
	return u.String(), nil
}

// partitionConditions are the isolation conditions every request carries.
func partitionConditions(tenant, userID string) []*qc.Condition {
	return []*qc.Condition{qc.NewMatchKeyword(fieldTenant, tenant), qc.NewMatchKeyword(fieldUserID, userID)}
}

// partitionFilter selects the points of one partition with these ids.
func partitionFilter(tenant, userID string, ids ...string) *qc.Filter {
	must := partitionConditions(tenant, userID)
	if len(ids) > 0 {
		must = append(must, qc.NewHasID(pointIDs(ids)...))
	}
	return &qc.Filter{Must: must}
}

func pointIDs(ids []string) []*qc.PointId {
	out := make([]*qc.PointId, len(ids))
	for i, id := range ids {
		out[i] = qc.NewIDUUID(id)
	}
	return out
}

// selectsNothing reports a filter that matches no record whatever is stored (an
// empty id list), answered without a call.
func selectsNothing(f vectorstore.Filter) bool { return f.IDs != nil && len(f.IDs) == 0 }

// toFilter maps a normalised filter onto a Qdrant filter, evaluated against now
// for expiry. Every condition is a must: the partition first, then each
// constrained field.
func toFilter(f vectorstore.Filter, now time.Time) *qc.Filter {
	must := partitionConditions(f.Tenant, f.UserID)
	if len(f.MemoryTypes) > 0 {
		types := make([]string, len(f.MemoryTypes))
		for i, t := range f.MemoryTypes {
			types[i] = string(t)
		}
		must = append(must, qc.NewMatchKeywords(fieldMemoryType, types...))
	}
	if f.IDs != nil {
		must = append(must, qc.NewHasID(pointIDs(f.IDs)...))
	}
	if !f.Since.IsZero() || !f.Until.IsZero() {
		var rng qc.Range
		if !f.Since.IsZero() {
			rng.Gte = qc.PtrOf(float64(ceilMicro(f.Since)))
		}
		if !f.Until.IsZero() {
			rng.Lt = qc.PtrOf(float64(ceilMicro(f.Until)))
		}
		must = append(must, qc.NewRange(fieldTS, &rng))
	}
	for _, c := range []struct{ field, v string }{
		{fieldChatID, f.ChatID}, {fieldWho, f.Who}, {fieldScope, f.Scope}, {fieldKind, f.Kind}, {fieldKey, f.Key},
	} {
		if c.v != "" {
			must = append(must, qc.NewMatchKeyword(c.field, c.v))
		}
	}
	keys := make([]string, 0, len(f.Payload))
	for k := range f.Payload {
		keys = append(keys, k)
	}
	slices.Sort(keys) // a stable request shape for the same filter
	for _, k := range keys {
		// Keys are [A-Za-z0-9_-] (Normalize checked), a plain segment of Qdrant's
		// JSON path syntax.
		path := fieldMetadata + "." + k
		switch v, _ := vectorstore.PayloadValue(f.Payload[k]); v := v.(type) {
		case string:
			must = append(must, qc.NewMatchKeyword(path, v))
		case bool:
			must = append(must, qc.NewMatchBool(path, v))
		case int64:
			must = append(must, qc.NewMatchInt(path, v))
		}
	}
	// Stored expiries are whole microseconds, so "expires_at <= now" on now's
	// microsecond is exactly "not after now".
	nowUS := float64(now.UnixMicro())
	switch {
	case f.ExpiredOnly:
		must = append(must, qc.NewRange(fieldExpiresAt, &qc.Range{Lte: &nowUS}))
	case !f.IncludeExpired:
		must = append(must, qc.NewFilterAsCondition(&qc.Filter{Should: []*qc.Condition{
			qc.NewIsEmpty(fieldExpiresAt),
			qc.NewRange(fieldExpiresAt, &qc.Range{Gt: &nowUS}),
		}}))
	}
	return &qc.Filter{Must: must}
}

// ceilMicro is t in Unix microseconds rounded up, so that comparing stored
// (truncated) microseconds against it gives the same answer as comparing the times.
func ceilMicro(t time.Time) int64 {
	us := t.UnixMicro()
	if t.Nanosecond()%1000 != 0 {
		us++
	}
	return us
}

// redact removes secret from s.
func redact(s, secret string) string {
	if secret == "" {
		return s
	}
	return strings.ReplaceAll(s, secret, "[REDACTED]")
}
