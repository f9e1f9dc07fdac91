package markdown

import (
	"strings"

	"github.com/agentmem/agentmem/pkg/bm25"
)

// Chunk is a retrievable piece of a document (SPEC A10).
type Chunk struct {
	Text      string // exactly doc's bytes from StartLine to the end of EndLine, without its line ending
	StartLine int    // 1-based, inclusive
	EndLine   int    // 1-based, inclusive
	Heading   string // text of the nearest heading at or above StartLine, without "#"s; "" if none
}

// ScoredChunk is a chunk with its BM25 score for a query.
type ScoredChunk struct {
	Chunk
	Score float64
}

// Chunks splits doc for retrieval:
//   - an entry is one chunk, header and body, without its "---";
//   - a long-term section "## YYYY-MM-DD" is one chunk up to the next heading of any level;
//   - everything else is split into paragraphs at blank lines, and before every heading
//     (a heading starts the paragraph it heads).
//
// Trailing blank lines are not part of a chunk; chunks that are blank or just "---"
// are dropped.
func Chunks(doc string) []Chunk {
	lines := splitLines(doc)
	spans := scanEntries(lines)
	var (
		chunks  []Chunk
		heading string
		next    int // next entry span
	)
	add := func(from, to int) { // lines [from, to)
		for to > from && isBlank(lines[to-1].text) {
			to--
		}
		if to == from {
			return
		}
		last := lines[to-1]
		text := doc[lines[from].start : last.start+len(last.text)]
		if t := strings.TrimSpace(text); t == "" || t == entryEnd {
			return
		}
		chunks = append(chunks, Chunk{Text: text, StartLine: from + 1, EndLine: to, Heading: heading})
	}
	for i := 0; i < len(lines); {
		t := lines[i].text
		if next < len(spans) && spans[next].header == i {
			heading, _ = atxHeading(t)
			add(i, spans[next].bodyEnd)
			i = spans[next].last + 1
			next++
			continue
		}
		if isBlank(t) {
			i++
			continue
		}
		h, isHeading := atxHeading(t)
		_, isSection := isSectionHeading(t)
		if isHeading {
			heading = h
		}
		j := i + 1
		for ; j < len(lines); j++ {
			if _, ok := atxHeading(lines[j].text); ok || (!isSection && isBlank(lines[j].text)) {
				break
			}
		}
		add(i, j)
		i = j
	}
	return chunks
}

// SearchChunks scores Chunks(doc) against query with BM25 (pkg/bm25) and returns at most
// limit chunks with a score above zero, best first (equal scores in document order).
// It returns nil when the query has no searchable terms (callers then use the whole
// file) or limit <= 0. To search one document many times, build a ChunkIndex once.
func SearchChunks(doc, query string, limit int) []ScoredChunk {
	q := bm25.Tokenize(query)
	if len(q) == 0 || limit <= 0 {
		return nil
	}
	return NewChunkIndex(doc).search(q, limit)
}

// ChunkIndex is a document's chunks with their BM25 index: chunking and
// tokenizing cost far more than a search, so a caller that searches an unchanged
// document again keeps the index. It is immutable and safe for concurrent use.
type ChunkIndex struct {
	chunks []Chunk
	ix     *bm25.Index
}

// NewChunkIndex chunks and indexes doc.
func NewChunkIndex(doc string) *ChunkIndex {
	chunks := Chunks(doc)
	tokens := make([][]string, len(chunks))
	for i, c := range chunks {
		tokens[i] = bm25.Tokenize(c.Text)
	}
	return &ChunkIndex{chunks: chunks, ix: bm25.NewIndex(tokens, bm25.DefaultParams())}
}

// Search is SearchChunks on the indexed document.
func (c *ChunkIndex) Search(query string, limit int) []ScoredChunk {
	return c.SearchTerms(bm25.Tokenize(query), limit)
}

// SearchTerms is Search with the query already tokenized by bm25.Tokenize, for a
// caller that needs the terms itself too.
func (c *ChunkIndex) SearchTerms(q []string, limit int) []ScoredChunk {
	if len(q) == 0 || limit <= 0 {
		return nil
	}
	return c.search(q, limit)
}

func (c *ChunkIndex) search(q []string, limit int) []ScoredChunk {
	results := c.ix.Search(q, limit)
	out := make([]ScoredChunk, len(results))
	for i, r := range results {
		out[i] = ScoredChunk{Chunk: c.chunks[r.Doc], Score: r.Score}
	}
	return out
}

// atxHeading reports a Markdown heading line ("#" to "######" then a space, tab or
// nothing) and its text.
func atxHeading(text string) (string, bool) {
	n := 0
	for n < len(text) && n < 7 && text[n] == '#' {
		n++
	}
	if n == 0 || n > 6 || (n < len(text) && text[n] != ' ' && text[n] != '\t') {
		return "", false
	}
	return strings.TrimSpace(text[n:]), true
}
