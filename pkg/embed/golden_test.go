package embed

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math"
	"testing"
)

// goldenTexts cover the tokenizer's cases: stems, digits, stopwords, repeated
// words (term frequency), non-ASCII letters, combining marks, typographic
// quotes, invalid UTF-8, and texts without tokens.
var goldenTexts = []string{
	"My sales files have columns date, product, qty and unit_price.",
	"I have been leading the sales forecast project for 12 months.",
	"I study at Peking University; I'm a student at Peking University.",
	"sales sales sales files files",
	"Zoë’s café in São Paulo serves crème brûlée — ÜBER naïve",
	"東京で働いています 2024",
	"e\u0301te\u0301 x1 y2 3",
	"bad \xff\xfe utf8 \xc3 bytes",
	"",
	"the and of",
	"!?.,",
}

// goldenDigest is the SHA-256 of the float32 bits of goldenTexts' vectors. The
// offline embedder's vectors are stored, so a change of the feature scheme must
// be deliberate: bump Name's version and this digest together.
const goldenDigest = "423b6e93e5d0ff757132449e74afa7a9bbbacfb275524005b6831b7b46280ed0"

func TestLocalGoldenVectors(t *testing.T) {
	l := newLocal(t)
	h := sha256.New()
	for _, text := range goldenTexts {
		for _, x := range embedOne(t, l, text) {
			_ = binary.Write(h, binary.LittleEndian, math.Float32bits(x))
		}
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != goldenDigest {
		t.Fatalf("vectors of the golden texts changed: digest %s, want %s", got, goldenDigest)
	}
}

// BenchmarkLocalEmbed is the embedding of one episode statement, as ingest
// embeds each kept observation.
func BenchmarkLocalEmbed(b *testing.B) {
	l := newLocal(b)
	texts := []string{goldenTexts[1]}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := l.Embed(b.Context(), texts); err != nil {
			b.Fatal(err)
		}
	}
}
