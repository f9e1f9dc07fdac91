package embedded

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// sameAsEncodingJSON fails t unless decodeMetadata(doc) gives what json.Unmarshal
// into a map gives: the same value, or an error for both (encoding/json's partial
// value on an error is not compared: a read returns no record then).
func sameAsEncodingJSON(t interface {
	Helper()
	Fatalf(string, ...any)
}, doc string) {
	t.Helper()
	got, gotErr := decodeMetadata(doc)
	var want map[string]any
	wantErr := json.Unmarshal([]byte(doc), &want)
	if (gotErr != nil) != (wantErr != nil) || wantErr == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("decodeMetadata(%q) = %#v, %v; encoding/json: %#v, %v", doc, got, gotErr, want, wantErr)
	}
}

// jsonValue generates what metadata holds, with strings that need escaping, are
// not UTF-8 or hold runes outside the BMP, numbers of every magnitude, nil lists
// and maps, and values of types encodeMetadata leaves to json.Marshal.
func jsonValue(depth int) *rapid.Generator[any] {
	str := rapid.OneOf(
		rapid.String(),
		rapid.Map(rapid.SliceOf(rapid.Byte()), func(b []byte) string { return string(b) }),
		rapid.SampledFrom([]string{"", "a\"b\\c/d", "tab\there\nnew\r\b\f", "<&>", "\u2028\u2029", "\x00\x1f\x7f", "\xff\xfe", "é😀", "\xed\xa0\x80"}),
	)
	scalar := rapid.OneOf(
		rapid.Map(str, func(s string) any { return s }),
		rapid.Map(rapid.Float64(), func(f float64) any { return f }),
		rapid.Map(rapid.SampledFrom([]float64{1e-6, 1e-7, 1e20, 1e21, -1e21, 123456789e-15, 0.000001234}), func(f float64) any { return f }),
		rapid.Map(rapid.Int64(), func(n int64) any { return n }),
		rapid.Map(rapid.Int(), func(n int) any { return n }),
		rapid.Map(rapid.Bool(), func(b bool) any { return b }),
		rapid.Just[any](nil),
		rapid.SampledFrom([]any{[]any(nil), map[string]any(nil), []string{"typed", "<list>"}, json.Number("12.50"), float32(0.1), struct{ A int }{1}}),
	)
	if depth == 0 {
		return scalar
	}
	return rapid.OneOf(
		scalar,
		rapid.Map(rapid.SliceOfN(jsonValue(depth-1), 0, 4), func(vs []any) any { return vs }),
		rapid.Map(rapid.MapOfN(str, jsonValue(depth-1), 0, 4), func(m map[string]any) any { return m }),
	)
}

// Every metadata map json.Marshal can encode decodes exactly as encoding/json
// decodes it.
func TestPropertyDecodeMetadataMatchesEncodingJSON(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		md := rapid.MapOfN(rapid.String(), jsonValue(3), 0, 6).Draw(t, "metadata")
		doc, err := encodeMetadata("id", md)
		if err != nil {
			t.Skip("not encodable: ", err) // NaN or ±Inf
		}
		sameAsEncodingJSON(t, doc)
	})
}

// encodeMetadata writes exactly what json.Marshal writes, and fails where it
// fails (NaN, ±Inf) with ErrInvalidRecord.
func TestPropertyEncodeMetadataMatchesMarshal(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		md := rapid.MapOfN(rapid.String(), jsonValue(3), 0, 6).Draw(t, "metadata")
		got, err := encodeMetadata("id", md)
		want, wantErr := json.Marshal(md)
		if (err != nil) != (wantErr != nil) || wantErr == nil && got != string(want) {
			t.Fatalf("encodeMetadata = %q, %v; json.Marshal: %q, %v", got, err, want, wantErr)
		}
		if err != nil && !errors.Is(err, vectorstore.ErrInvalidRecord) {
			t.Fatalf("error %v is not ErrInvalidRecord", err)
		}
	})
}

// An episode's metadata, as the pipeline builds it, takes the fast path: a change
// that sent it to json.Marshal would pass the property above and cost every
// ingested observation its encoding again.
func TestEncodeMetadataEpisodeTakesFastPath(t *testing.T) {
	md := episodeMetadata()
	got, ok := appendJSON(nil, md, 0)
	want, err := json.Marshal(md)
	if !ok || err != nil || string(got) != string(want) {
		t.Fatalf("appendJSON = %q, %v; json.Marshal: %q, %v", got, ok, want, err)
	}
}

// Documents json.Marshal never writes (space, escapes of surrogates, malformed or
// truncated input, other top-level values) decode as encoding/json decodes them,
// or fail as it does.
func TestDecodeMetadataOtherDocuments(t *testing.T) {
	for _, doc := range []string{
		`null`, `{}`, ` { "a" : [ 1 , 2.5e3 , -0 , true , null ] , "b" : { } } `,
		`{"s":"\ud83d\ude00"}`, `{"s":"\ud83d"}`, `{"s":"\ude00x"}`, `{"s":"\u00e9\u0041"}`, `{"s":"\q"}`,
		`{"n":01}`, `{"n":1.}`, `{"n":.5}`, `{"n":1e}`, `{"n":-}`, `{"n":1e400}`, `{"n":+1}`, `{"n":0x10}`,
		`{"a":1,"a":2}`, `{"a":1}x`, `{"a":1`, `{"a"`, `{"a":tru}`, `{a:1}`, `[1]`, `"s"`, `1`,
		"{\"s\":\"a\tb\"}", "{\"s\":\"\xff\"}", `{"d":` + strings.Repeat(`[`, 100) + strings.Repeat(`]`, 100) + `}`,
	} {
		sameAsEncodingJSON(t, doc)
	}
}

// Arbitrary text built from JSON's own bytes: whatever encoding/json makes of it,
// decodeMetadata makes the same.
func TestPropertyDecodeMetadataArbitraryInput(t *testing.T) {
	tokens := []string{`{`, `}`, `[`, `]`, `:`, `,`, `"`, `"k"`, `"v\n"`, `\`, `\u00e9`, `\ud800`, `1`, `-`, `.`, `e`, `0`,
		`true`, `null`, `fals`, ` `, "\t", "é", "\xff"}
	rapid.Check(t, func(t *rapid.T) {
		parts := rapid.SliceOfN(rapid.SampledFrom(tokens), 1, 24).Draw(t, "tokens")
		sameAsEncodingJSON(t, `{`+strings.Join(parts, ""))
	})
}

// The fast path hands out substrings of the stored document, and a record's reader
// owning its map is what lets callers change it (TestReadsReturnTheirOwnMetadata);
// two decodes must still be independent maps.
func TestDecodeMetadataReturnsFreshMaps(t *testing.T) {
	doc := `{"a":{"b":[1,"x"]}}`
	first, err := decodeMetadata(doc)
	if err != nil {
		t.Fatal(err)
	}
	first["a"].(map[string]any)["b"].([]any)[1] = "changed"
	second, err := decodeMetadata(doc)
	if err != nil || second["a"].(map[string]any)["b"].([]any)[1] != "x" {
		t.Fatalf("second decode: %v %v", second, err)
	}
}

// episodeMetadata is an episode's metadata as the pipeline writes it.
func episodeMetadata() map[string]any {
	return map[string]any{
		"context": "user said in chat-12", "thing": "I adopted a puppy last \"Tuesday\", his name is Max.\nHe is 3 months old.",
		"time": "2026-11-22T10:00:00.123456Z", "chat_id": "chat-12", "who": "user", "updates": []any{},
		"source_chat_ids": []any{"chat-12"}, "merged_from_ids": []any{}, "hit_count": 3.0,
		"source_event_ids": []any{"01JD3Q8Z5K6M7N8P9Q0R1S2T3U", "01JD3Q8Z5K6M7N8P9Q0R1S2T3V"},
		"source_meta":      []any{map[string]any{"dia_id": "D1:3"}, map[string]any{"dia_id": "D1:4"}},
	}
}

// BenchmarkEncodeMetadata encodes an episode's metadata as the pipeline writes it.
func BenchmarkEncodeMetadata(b *testing.B) {
	md := episodeMetadata()
	for b.Loop() {
		if _, err := encodeMetadata("id", md); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeMetadata decodes an episode's metadata as the pipeline writes it,
// with decodeMetadata and with encoding/json, which it replaces on the read path.
func BenchmarkDecodeMetadata(b *testing.B) {
	doc, err := encodeMetadata("id", episodeMetadata())
	if err != nil {
		b.Fatal(err)
	}
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := decodeMetadata(doc); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var md any
			if err := json.Unmarshal([]byte(doc), &md); err != nil {
				b.Fatal(err)
			}
		}
	})
}
