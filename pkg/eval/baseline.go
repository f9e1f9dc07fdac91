package eval

import (
	"fmt"
	"strings"

	"github.com/agentmem/agentmem/pkg/bm25"
	"github.com/agentmem/agentmem/pkg/markdown"
)

// Retriever answers a question with ranked items; the baselines implement it.
type Retriever interface {
	Retrieve(question string, limit int) []Item
}

// TurnsBM25 is the first in-run baseline: Okapi BM25 (pkg/bm25, the tokenizer and
// scorer agentmem uses everywhere) over the raw turns, "Speaker: text" each; an item
// is one turn.
type TurnsBM25 struct {
	ids    []string
	tokens []int
	index  *bm25.Index
}

// NewTurnsBM25 indexes the turns of c.
func NewTurnsBM25(c Conversation) *TurnsBM25 {
	turns := c.Turns()
	b := &TurnsBM25{ids: make([]string, len(turns)), tokens: make([]int, len(turns))}
	docs := make([][]string, len(turns))
	for i, t := range turns {
		b.ids[i] = t.DiaID
		b.tokens[i] = estimateTokens(t.Line())
		docs[i] = bm25.Tokenize(t.Line())
	}
	b.index = bm25.NewIndex(docs, bm25.DefaultParams())
	return b
}

// Retrieve returns the best limit turns for question.
func (b *TurnsBM25) Retrieve(question string, limit int) []Item {
	hits := b.index.Search(bm25.Tokenize(question), limit)
	out := make([]Item, len(hits))
	for i, h := range hits {
		out[i] = Item{DiaIDs: []string{b.ids[h.Doc]}, Tokens: b.tokens[h.Doc]}
	}
	return out
}

// MemoryFileChunks is the second in-run baseline: the whole conversation written into
// one MEMORY.md, a "## Session N (date)" heading per session and every turn a
// paragraph of its own, searched with markdown.SearchChunks (the keyword search of
// agentmem's Markdown memory). An item is a chunk; its dia ids are those of the turns
// on its lines (a heading-only chunk has none).
type MemoryFileChunks struct {
	doc    string
	lineID map[int]string // 1-based line → dia id of the turn on it
}

// NewMemoryFileChunks writes c's MEMORY.md.
func NewMemoryFileChunks(c Conversation) *MemoryFileChunks {
	var b strings.Builder
	m := &MemoryFileChunks{lineID: map[int]string{}}
	line := 0
	writeLine := func(s string) {
		b.WriteString(s)
		b.WriteByte('\n')
		line++
	}
	writeLine("# Conversation " + c.SampleID)
	for _, s := range c.Sessions {
		writeLine("")
		writeLine(fmt.Sprintf("## Session %d (%s)", s.Number, s.Start.Format("2 January 2006")))
		for _, t := range s.Turns {
			writeLine("")
			writeLine(t.Line())
			m.lineID[line] = t.DiaID
		}
	}
	m.doc = b.String()
	return m
}

// Doc is the MEMORY.md text.
func (m *MemoryFileChunks) Doc() string { return m.doc }

// Retrieve returns the best limit chunks for question.
func (m *MemoryFileChunks) Retrieve(question string, limit int) []Item {
	chunks := markdown.SearchChunks(m.doc, question, limit)
	out := make([]Item, len(chunks))
	for i, c := range chunks {
		out[i].Tokens = estimateTokens(c.Text)
		for l := c.StartLine; l <= c.EndLine; l++ {
			if id, ok := m.lineID[l]; ok {
				out[i].DiaIDs = append(out[i].DiaIDs, id)
			}
		}
	}
	return out
}
