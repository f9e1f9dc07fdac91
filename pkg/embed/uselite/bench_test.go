package uselite

import (
	"context"
	"testing"
)

// benchSentence has 25 words.
const benchSentence = "Caroline told Melanie that she went to the LGBTQ support group on Sunday and felt accepted by everyone who shared their stories with her there."

func BenchmarkEmbed(b *testing.B) {
	enc := encoder(b)
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
