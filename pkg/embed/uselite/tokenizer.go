package uselite

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf16"

	"golang.org/x/text/unicode/norm"
)

// separator marks word starts in the piece vocabulary (SentencePiece style).
const separator = '▁'

// reservedPieces are the vocabulary's first entries (unknown, <s>, </s> and three
// extra tokens); the reference tokenizer never emits them except 0, unknown.
const reservedPieces = 6

// unknownID is the id of a character no piece covers.
const unknownID = 0

// Tokenizer reproduces the reference JavaScript tokenizer of
// @energetic-ai/embeddings 0.2.0 (itself the tfjs-models USE tokenizer): NFKC,
// "▁" before the text and instead of every space, a Viterbi search over the
// piece scores, runs of unknown characters merged into one id. Its quirks are
// kept on purpose (a best score of exactly 0 counts as unset; backtracking steps
// back by the piece's UTF-16 length), because the model was trained on ids made
// this way and the tests compare ids with the reference. Safe for concurrent use.
type Tokenizer struct {
	root   trieNode
	pieces []string
	// utf16Len is, per id, the UTF-16 length of the piece (the backtracking step).
	utf16Len []int
}

type trieNode struct {
	children map[rune]*trieNode
	end      bool
	score    float64
	id       int32
	runes    int
}

// parseVocab decodes vocab.json: an array of [piece, score] pairs.
func parseVocab(data []byte) ([]string, []float64, error) {
	var raw [][]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, nil, fmt.Errorf("%w: vocab.json: %w", ErrCorruptModel, err)
	}
	if len(raw) <= reservedPieces {
		return nil, nil, fmt.Errorf("%w: vocab.json has %d entries, want more than %d", ErrCorruptModel, len(raw), reservedPieces)
	}
	pieces := make([]string, len(raw))
	scores := make([]float64, len(raw))
	for i, e := range raw {
		if len(e) != 2 {
			return nil, nil, fmt.Errorf("%w: vocab.json entry %d has %d fields, want [piece, score]", ErrCorruptModel, i, len(e))
		}
		if err := json.Unmarshal(e[0], &pieces[i]); err != nil {
			return nil, nil, fmt.Errorf("%w: vocab.json entry %d piece: %w", ErrCorruptModel, i, err)
		}
		if err := json.Unmarshal(e[1], &scores[i]); err != nil {
			return nil, nil, fmt.Errorf("%w: vocab.json entry %d score: %w", ErrCorruptModel, i, err)
		}
	}
	return pieces, scores, nil
}

// NewTokenizer builds a tokenizer from vocab.json's contents.
func NewTokenizer(vocabJSON []byte) (*Tokenizer, error) {
	pieces, scores, err := parseVocab(vocabJSON)
	if err != nil {
		return nil, err
	}
	t := &Tokenizer{pieces: pieces, utf16Len: make([]int, len(pieces))}
	for i, p := range pieces {
		// At least 1, so that a corrupt vocabulary with an empty piece 0 cannot
		// stall the backtracking.
		t.utf16Len[i] = max(1, len(utf16.Encode([]rune(p))))
	}
	for i := reservedPieces; i < len(pieces); i++ {
		t.insert(pieces[i], scores[i], int32(i))
	}
	return t, nil
}

// VocabSize is the number of ids the tokenizer can emit (reserved ones included).
func (t *Tokenizer) VocabSize() int { return len(t.pieces) }

// Piece returns the text of id, or "" for an id outside the vocabulary.
func (t *Tokenizer) Piece(id int32) string {
	if id < 0 || int(id) >= len(t.pieces) {
		return ""
	}
	return t.pieces[id]
}

func (t *Tokenizer) insert(piece string, score float64, id int32) {
	n := &t.root
	depth := 0
	for _, r := range piece {
		if n.children == nil {
			n.children = make(map[rune]*trieNode)
		}
		c := n.children[r]
		if c == nil {
			c = &trieNode{}
			n.children[r] = c
		}
		n = c
		depth++
	}
	if depth == 0 {
		return
	}
	// A repeated piece keeps the last entry, as the reference trie does.
	n.end, n.score, n.id, n.runes = true, score, id, depth
}

// edge is one piece that can cover symbols[start:start+runes].
type edge struct {
	start int
	score float64
	id    int32
}

// Normalize returns the text the tokenizer segments: NFKC, "▁" before the text and
// instead of every ASCII space. The empty string stays empty.
func Normalize(text string) string {
	s := norm.NFKC.String(text)
	if s == "" {
		return ""
	}
	return string(separator) + strings.ReplaceAll(s, " ", string(separator))
}

// Encode returns the piece ids of text.
func (t *Tokenizer) Encode(text string) []int32 {
	symbols := []rune(Normalize(text))
	n := len(symbols)
	if n == 0 {
		return nil
	}
	// ends[e] lists the pieces ending at e, in increasing start order because
	// starts are visited in increasing order: the reference's iteration order.
	ends := make([][]edge, n+1)
	for i := range symbols {
		found := false
		node := t.root.children[symbols[i]]
		for j := i; node != nil; {
			if node.end {
				ends[i+node.runes] = append(ends[i+node.runes], edge{start: i, score: node.score, id: node.id})
				found = true
			}
			j++
			if j >= n {
				break
			}
			node = node.children[symbols[j]]
		}
		if !found {
			ends[i+1] = append(ends[i+1], edge{start: i, score: 0, id: unknownID})
		}
	}
	best := make([]float64, n+1)
	words := make([]int32, n+1)
	for end := 1; end <= n; end++ {
		for _, e := range ends[end] {
			s := e.score + best[e.start]
			if best[end] == 0 || s >= best[end] {
				best[end] = s
				words[end] = e.id
			}
		}
	}
	var rev []int32
	for i := n; i > 0; i -= t.utf16Len[words[i]] {
		rev = append(rev, words[i])
	}
	ids := make([]int32, 0, len(rev))
	prevUnknown := false
	for _, id := range rev {
		if !(prevUnknown && id == unknownID) {
			ids = append(ids, id)
		}
		prevUnknown = id == unknownID
	}
	for i, j := 0, len(ids)-1; i < j; i, j = i+1, j-1 {
		ids[i], ids[j] = ids[j], ids[i]
	}
	return ids
}
