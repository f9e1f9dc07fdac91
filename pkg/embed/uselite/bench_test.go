package uselite

import (
	"context"
	"testing"
)

// benchSentence has 25 words.
const benchSentence = "Caroline told Melanie that she went to the LGBTQ support group on Sunday and felt accepted by everyone who shared their stories with her there."

// BenchmarkEmbed embeds with the embedded weights, and with the npm files when
// AGENTMEM_TEST_USELITE_DIR is set: the forward pass is the same.
func BenchmarkEmbed(b *testing.B) {
	b.Run("embedded", func(b *testing.B) { benchEmbed(b, embeddedEncoder(b)) })
	b.Run("dir", func(b *testing.B) { benchEmbed(b, encoder(b)) })
}

func benchEmbed(b *testing.B, enc *Encoder) {
	ctx := context.Background()
	b.Run("sentence", func(b *testing.B) {
		texts := []string{benchSentence}
		for b.Loop() {
			if _, err := enc.Embed(ctx, texts); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("batch32", func(b *testing.B) {
		texts := make([]string, 32)
		for i := range texts {
			texts[i] = benchSentence
		}
		for b.Loop() {
			if _, err := enc.Embed(ctx, texts); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkNew loads the encoder: from the embedded weights, and from the npm
// files when AGENTMEM_TEST_USELITE_DIR is set.
func BenchmarkNew(b *testing.B) {
	b.Run("embedded", func(b *testing.B) {
		for b.Loop() {
			if _, err := New(Config{}, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("dir", func(b *testing.B) {
		dir := modelDir(b)
		for b.Loop() {
			if _, err := New(Config{ModelDir: dir}, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}
