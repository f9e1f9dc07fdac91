package uselite

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// vocabJSON encodes pieces as vocab.json does, after the six reserved entries.
func vocabJSON(pieces []string, scores []float64) []byte {
	entries := [][]any{{"\uFFFD", 0}, {"<s>", 0}, {"</s>", 0}, {"extra_token_id_1", 0}, {"extra_token_id_2", 0}, {"extra_token_id_3", 0}}
	for i, p := range pieces {
		entries = append(entries, []any{p, scores[i]})
	}
	b, _ := json.Marshal(entries) // strings and finite floats always encode
	return b
}

func joinPieces(tok *Tokenizer, ids []int32) (string, bool) {
	var b strings.Builder
	for _, id := range ids {
		if id == unknownID {
			return "", false
		}
		b.WriteString(tok.Piece(id))
	}
	return b.String(), true
}

// Property: without unknown characters, the pieces of a text concatenate back to
// its normalised form, whatever the vocabulary's pieces and scores (a vocabulary
// holding every single character, as SentencePiece's does).
func TestPropertyPiecesRebuildTheText(t *testing.T) {
	alphabet := []rune("ab▁cé,")
	rapid.Check(t, func(t *rapid.T) {
		pieces := []string{}
		for _, r := range alphabet {
			pieces = append(pieces, string(r))
		}
		pieces = append(pieces, rapid.SliceOfN(rapid.StringOfN(rapid.RuneFrom(alphabet), 2, 6, -1), 0, 30).Draw(t, "pieces")...)
		scores := rapid.SliceOfN(rapid.Float64Range(-20, 0), len(pieces), len(pieces)).Draw(t, "scores")
		tok, err := NewTokenizer(vocabJSON(pieces, scores))
		if err != nil {
			t.Fatal(err)
		}
		text := rapid.StringOf(rapid.RuneFrom(append([]rune{' '}, alphabet...))).Draw(t, "text")
		ids := tok.Encode(text)
		got, ok := joinPieces(tok, ids)
		if !ok {
			t.Fatalf("unknown id in %v for %q", ids, text)
		}
		if want := Normalize(text); got != want {
			t.Fatalf("pieces %v join to %q, want the normalised text %q", ids, got, want)
		}
	})
}

// The same property over the real vocabulary, for texts without unknown pieces.
func TestPropertyPiecesRebuildTheTextRealVocab(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(modelDir(t), "vocab.json"))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := NewTokenizer(b)
	if err != nil {
		t.Fatal(err)
	}
	chars := []rune("abcdefghijklmnopqrstuvwxyzABCXYZ0123456789 .,;:!?'\"-()éü")
	rapid.Check(t, func(t *rapid.T) {
		text := rapid.StringOf(rapid.RuneFrom(chars)).Draw(t, "text")
		ids := tok.Encode(text)
		got, ok := joinPieces(tok, ids)
		if !ok {
			t.Skip("text has a character outside the vocabulary")
		}
		if want := Normalize(text); got != want {
			t.Fatalf("pieces %v join to %q, want the normalised text %q", ids, got, want)
		}
	})
}

func FuzzTokenizer(f *testing.F) {
	f.Add([]byte(`[["?",0],["<s>",0],["</s>",0],["a",0],["b",0],["c",0],["▁the",-1.5],["s",-2],["😀",-3]]`), "the cats 😀 ok")
	f.Add([]byte(`[]`), "")
	f.Add([]byte(`[["",0],["",0],["",0],["",0],["",0],["",0],["",0],["x",0]]`), "xx yy")
	f.Fuzz(func(t *testing.T, vocab []byte, text string) {
		tok, err := NewTokenizer(vocab)
		if err != nil {
			return
		}
		for _, id := range tok.Encode(text) {
			if id < 0 || int(id) >= tok.VocabSize() {
				t.Fatalf("id %d outside the vocabulary of %d", id, tok.VocabSize())
			}
		}
	})
}
