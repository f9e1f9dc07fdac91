package vectorstoretest

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/agentmem/agentmem/pkg/embed"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// Dimensions is the vector length the suite uses: newStore must return an empty
// store configured for it.
const Dimensions = 64

// embedder gives the suite realistic vectors: texts that share words are close.
var embedder = func() *embed.Local {
	l, err := embed.NewLocal(embed.LocalConfig{Dimensions: Dimensions})
	if err != nil {
		panic(err) // a constant, valid configuration
	}
	return l
}()

func vectorOf(text string) []float32 {
	v, _ := embedder.Embed(context.Background(), []string{text}) // Local only fails on a cancelled context
	if slices.ContainsFunc(v[0], func(x float32) bool { return x != 0 }) {
		return v[0]
	}
	// Texts without terms embed to zero; give them some unit vector.
	z := make([]float32, Dimensions)
	z[0] = 1
	return z
}

// base is the suite's reference time; ts values are whole microseconds, the
// precision every backend keeps.
var base = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// matches is the reference semantics of a Filter: what a backend must select.
func matches(f vectorstore.Filter, r vectorstore.Record, now time.Time) bool {
	if r.Tenant != f.Tenant || r.UserID != f.UserID {
		return false
	}
	if len(f.MemoryTypes) > 0 && !slices.Contains(f.MemoryTypes, r.MemoryType) {
		return false
	}
	if f.IDs != nil && !slices.Contains(f.IDs, r.ID) {
		return false
	}
	if !f.Since.IsZero() && r.TS.Before(f.Since) {
		return false
	}
	if !f.Until.IsZero() && !r.TS.Before(f.Until) {
		return false
	}
	for _, c := range [][2]string{{f.ChatID, r.ChatID}, {f.Who, r.Who}, {f.Scope, r.Scope}, {f.Kind, r.Kind}, {f.Key, r.Key}} {
		if c[0] != "" && c[0] != c[1] {
			return false
		}
	}
	meta := jsonNormal(r.Metadata)
	for k, want := range f.Payload {
		m, _ := meta.(map[string]any)
		if !payloadEqual(m[k], want) {
			return false
		}
	}
	expired := !r.ExpiresAt.IsZero() && !r.ExpiresAt.After(now)
	switch {
	case f.ExpiredOnly:
		return expired
	case !f.IncludeExpired:
		return !expired
	}
	return true
}

// payloadEqual compares a JSON-decoded metadata value with a filter value.
func payloadEqual(got, want any) bool {
	w, err := vectorstore.PayloadValue(want)
	if err != nil {
		return false
	}
	switch w := w.(type) {
	case string, bool:
		return got == w
	case int64:
		g, ok := got.(float64)
		return ok && g == float64(w)
	}
	return false
}

// jsonNormal is v as encoding/json gives it back after a round trip.
func jsonNormal(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("suite metadata is not JSON: %v", err))
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		panic(err)
	}
	return out
}

// sameRecord reports how got differs from want ("" when equal): every field, times
// to the microsecond, metadata as JSON, vectors up to rounding (a backend may
// normalise them; the suite only stores unit vectors).
func sameRecord(got, want vectorstore.Record) string {
	wantID, err := vectorstore.CanonicalID(want.ID)
	if err != nil {
		return err.Error()
	}
	switch {
	case got.ID != wantID:
		return fmt.Sprintf("id %q, want %q", got.ID, wantID)
	case got.Tenant != want.Tenant || got.UserID != want.UserID:
		return fmt.Sprintf("partition %s/%s, want %s/%s", got.Tenant, got.UserID, want.Tenant, want.UserID)
	case got.MemoryType != want.MemoryType:
		return fmt.Sprintf("memory type %q, want %q", got.MemoryType, want.MemoryType)
	case got.Scope != want.Scope || got.Kind != want.Kind || got.Key != want.Key:
		return fmt.Sprintf("scope/kind/key %q/%q/%q, want %q/%q/%q", got.Scope, got.Kind, got.Key, want.Scope, want.Kind, want.Key)
	case got.Text != want.Text:
		return fmt.Sprintf("text %q, want %q", got.Text, want.Text)
	case !got.TS.Equal(want.TS.Truncate(time.Microsecond)):
		return fmt.Sprintf("ts %s, want %s", got.TS, want.TS)
	case got.ChatID != want.ChatID || got.Who != want.Who:
		return fmt.Sprintf("chat/who %q/%q, want %q/%q", got.ChatID, got.Who, want.ChatID, want.Who)
	case got.HitCount != want.HitCount:
		return fmt.Sprintf("hit count %d, want %d", got.HitCount, want.HitCount)
	case got.Confidence != want.Confidence:
		return fmt.Sprintf("confidence %v, want %v", got.Confidence, want.Confidence)
	case got.ExpiresAt.IsZero() != want.ExpiresAt.IsZero() ||
		!want.ExpiresAt.IsZero() && !got.ExpiresAt.Equal(want.ExpiresAt.Truncate(time.Microsecond)):
		return fmt.Sprintf("expires at %s, want %s", got.ExpiresAt, want.ExpiresAt)
	case (got.Metadata == nil) != (want.Metadata == nil):
		return fmt.Sprintf("metadata %v, want %v", got.Metadata, want.Metadata)
	}
	g, _ := json.Marshal(got.Metadata)
	w, _ := json.Marshal(jsonNormal(want.Metadata))
	if string(g) != string(w) {
		return fmt.Sprintf("metadata %s, want %s", g, w)
	}
	if len(got.Vector) != len(want.Vector) {
		return fmt.Sprintf("vector of %d dimensions, want %d", len(got.Vector), len(want.Vector))
	}
	if c := embed.Cosine(got.Vector, want.Vector); math.Abs(float64(c)-1) > 1e-5 {
		return fmt.Sprintf("vector differs (cosine %v with the stored one)", c)
	}
	return ""
}
