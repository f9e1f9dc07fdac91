package markdown

// Block is one whole block of a memory file as capacity trimming sees it: an
// entry ("### [" header through "---") or a long-term section ("## YYYY-MM-DD"),
// with whatever follows it up to the next block.
type Block struct {
	// Text is the block's text, byte for byte.
	Text string
	// Entry is the parsed entry when IsEntry; a malformed entry has IsEntry false
	// and Malformed true.
	Entry     Entry
	IsEntry   bool
	Malformed bool
}

// SplitBlocks cuts doc into the text before the first block (a title, a human
// preamble) and its blocks, in document order; preamble + every block's Text is
// doc.
func SplitBlocks(doc string) (preamble string, blocks []Block) {
	lines := splitLines(doc)
	found := findBlocks(lines)
	if len(found) == 0 {
		return doc, nil
	}
	spans := scanEntries(lines)
	byHeader := make(map[int]entrySpan, len(spans))
	for _, s := range spans {
		byHeader[s.header] = s
	}
	preamble = doc[:lines[found[0].start].start]
	for _, bl := range found {
		b := Block{Text: doc[lines[bl.start].start:lines[bl.end-1].next]}
		if s, ok := byHeader[bl.start]; ok {
			b.IsEntry, b.Malformed, b.Entry = s.err == "", s.err != "", s.entry
		}
		blocks = append(blocks, b)
	}
	return preamble, blocks
}
