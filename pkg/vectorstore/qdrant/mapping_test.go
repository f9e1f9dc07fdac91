package qdrant

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	qc "github.com/qdrant/go-client/qdrant"
	"pgregory.net/rapid"

	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// diffRecords reports how got differs from want ("" when equal): every field
// exactly, times as instants in UTC, metadata as encoding/json would return it.
func diffRecords(got, want vectorstore.Record) string {
	wantMeta := any(nil)
	if want.Metadata != nil {
		b, err := json.Marshal(want.Metadata)
		if err != nil {
			return err.Error()
		}
		if err := json.Unmarshal(b, &wantMeta); err != nil {
			return err.Error()
		}
	}
	gotMeta := any(nil)
	if got.Metadata != nil {
		gotMeta = got.Metadata
	}
	switch {
	case !reflect.DeepEqual(gotMeta, wantMeta):
		return fmt.Sprintf("metadata %#v, want %#v", gotMeta, wantMeta)
	case !got.TS.Equal(want.TS) || got.TS.Location() != time.UTC:
		return fmt.Sprintf("ts %v, want %v in UTC", got.TS, want.TS)
	case !got.ExpiresAt.Equal(want.ExpiresAt) || !got.ExpiresAt.IsZero() && got.ExpiresAt.Location() != time.UTC:
		return fmt.Sprintf("expires at %v, want %v", got.ExpiresAt, want.ExpiresAt)
	case !slices.Equal(got.Vector, want.Vector):
		return fmt.Sprintf("vector %v, want %v", got.Vector, want.Vector)
	}
	got.Metadata, want.Metadata = nil, nil
	got.TS, want.TS = time.Time{}, time.Time{}
	got.ExpiresAt, want.ExpiresAt = time.Time{}, time.Time{}
	got.Vector, want.Vector = nil, nil
	if !reflect.DeepEqual(got, want) {
		return fmt.Sprintf("%+v, want %+v", got, want)
	}
	return ""
}

func genJSON(depth int) *rapid.Generator[any] {
	leaves := []*rapid.Generator[any]{
		rapid.Map(rapid.String(), func(s string) any { return s }),
		rapid.Map(rapid.Float64Range(-1e300, 1e300), func(f float64) any { return f }),
		rapid.Map(rapid.Int64Range(-1<<53, 1<<53), func(i int64) any { return i }),
		rapid.Map(rapid.Bool(), func(b bool) any { return b }),
		rapid.Just[any](nil),
	}
	if depth == 0 {
		return rapid.OneOf(leaves...)
	}
	return rapid.OneOf(append(leaves,
		rapid.Map(rapid.SliceOfN(genJSON(depth-1), 0, 3), func(v []any) any { return v }),
		rapid.Map(rapid.MapOfN(rapid.String(), genJSON(depth-1), 0, 3), func(m map[string]any) any { return m }),
	)...)
}

func genRecord(t *rapid.T) vectorstore.Record {
	us := func(label string) time.Time {
		return time.UnixMicro(rapid.Int64Range(-1e17, 1e17).Draw(t, label)).In(time.FixedZone("x", 3600))
	}
	r := vectorstore.Record{
		ID:         vectorstore.DeterministicID(rapid.String().Draw(t, "seed")),
		Tenant:     rapid.StringMatching(`[A-Za-z0-9_-]{1,20}`).Draw(t, "tenant"),
		UserID:     rapid.StringMatching(`[A-Za-z0-9_-]{1,20}`).Draw(t, "user"),
		MemoryType: rapid.SampledFrom([]vectorstore.MemoryType{vectorstore.Episodic, vectorstore.Semantic, vectorstore.Item}).Draw(t, "type"),
		Scope:      rapid.String().Draw(t, "scope"),
		Kind:       rapid.String().Draw(t, "kind"),
		Key:        rapid.String().Draw(t, "key"),
		Text:       rapid.String().Draw(t, "text"),
		Vector:     rapid.SliceOfN(rapid.Float32Range(-10, 10), testDims, testDims).Draw(t, "vector"),
		TS:         us("ts"),
		ChatID:     rapid.String().Draw(t, "chat"),
		Who:        rapid.String().Draw(t, "who"),
		HitCount:   rapid.IntRange(0, 1<<40).Draw(t, "hits"),
		Confidence: rapid.Float64Range(-1e300, 1e300).Draw(t, "confidence"),
	}
	if rapid.Bool().Draw(t, "expires") {
		r.ExpiresAt = us("expires_at")
	}
	if rapid.Bool().Draw(t, "has metadata") {
		r.Metadata = rapid.MapOfN(rapid.String(), genJSON(2), 0, 4).Draw(t, "metadata")
	}
	return r
}

// Property: a record mapped to a point and read back from that point's payload and
// dense vector is the same record, every field and arbitrary metadata included.
func TestPropertyPointRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		r, err := genRecord(t).Normalize(testDims)
		if err != nil {
			t.Fatal(err)
		}
		p, err := toPoint(r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := fromPoint(p.GetId(), p.GetPayload(), denseOutput(p.GetVectors().GetVectors().GetVectors()[vectorDense].GetDense().GetData()))
		if err != nil {
			t.Fatal(err)
		}
		if d := diffRecords(got, r); d != "" {
			t.Fatal(d)
		}
	})
}

// Property: whatever a filter constrains, the Qdrant filter is a pure conjunction
// that starts with the filter's own tenant and user, so no filter can widen a call
// beyond its partition.
func TestPropertyFilterConfinedToPartition(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		id := rapid.StringMatching(`[A-Za-z0-9_-]{1,20}`)
		opt := func(label string) string { return rapid.SampledFrom([]string{"", "x", "y"}).Draw(t, label) }
		f := vectorstore.Filter{
			Tenant: id.Draw(t, "tenant"), UserID: id.Draw(t, "user"),
			MemoryTypes: rapid.SliceOfN(rapid.SampledFrom([]vectorstore.MemoryType{vectorstore.Episodic, vectorstore.Semantic, vectorstore.Item}), 0, 3).Draw(t, "types"),
			ChatID:      opt("chat"), Who: opt("who"), Scope: opt("scope"), Kind: opt("kind"), Key: opt("key"),
			Payload:        rapid.MapOfN(id, rapid.SampledFrom([]any{"v", true, 3, 2.0}), 0, 3).Draw(t, "payload"),
			IncludeExpired: rapid.Bool().Draw(t, "include expired"),
			ExpiredOnly:    rapid.Bool().Draw(t, "expired only"),
		}
		if rapid.Bool().Draw(t, "by ids") {
			f.IDs = []string{vectorstore.DeterministicID(id.Draw(t, "id"))}
		}
		f, err := f.Normalize()
		if err != nil {
			t.Fatal(err)
		}
		qf := toFilter(f, time.Now())
		if len(qf.GetShould()) != 0 || len(qf.GetMustNot()) != 0 || qf.MinShould != nil {
			t.Fatalf("filter %v is not a pure conjunction", qf)
		}
		must := qf.GetMust()
		if len(must) < 2 ||
			must[0].GetField().GetKey() != fieldTenant || must[0].GetField().GetMatch().GetKeyword() != f.Tenant ||
			must[1].GetField().GetKey() != fieldUserID || must[1].GetField().GetMatch().GetKeyword() != f.UserID {
			t.Fatalf("filter %v does not start with tenant %q and user %q", qf, f.Tenant, f.UserID)
		}
	})
}

func TestFromPointRejectsForeignPoints(t *testing.T) {
	if _, err := fromPoint(qc.NewIDNum(7), map[string]*qc.Value{}, nil); err == nil {
		t.Error("a numeric point id was accepted")
	}
	if _, err := fromPoint(qc.NewIDUUID(vectorstore.DeterministicID("x")), map[string]*qc.Value{fieldTS: qc.NewValueString("now")}, nil); err == nil {
		t.Error("a point without an integer ts was accepted")
	}
}
