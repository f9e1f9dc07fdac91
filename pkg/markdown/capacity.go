package markdown

import (
	"sort"
	"strings"
	"time"
)

// block is a run of whole lines that capacity trimming keeps or drops as one: an entry
// or a long-term section, from its first line up to the next block.
type block struct {
	start, end int       // line indexes, end exclusive
	when       time.Time // age; zero (oldest) for an entry header with an unreadable date
}

// findBlocks tiles lines from the first block to the end of the document.
func findBlocks(lines []line) []block {
	spans := scanEntries(lines)
	var blocks []block
	for i, next := 0, 0; i < len(lines); i++ {
		if next < len(spans) && spans[next].header == i {
			blocks = append(blocks, block{start: i, when: spans[next].when})
			i = spans[next].last
			next++
			continue
		}
		if day, ok := isSectionHeading(lines[i].text); ok {
			// A section has only a date; one appended after an entry of the same
			// day (memory_append after an extraction) is newer than that entry,
			// not older: it takes the previous block's time within its day.
			when := day
			if k := len(blocks) - 1; k >= 0 && blocks[k].when.After(when) && blocks[k].when.Before(day.AddDate(0, 0, 1)) {
				when = blocks[k].when
			}
			blocks = append(blocks, block{start: i, when: when})
		}
	}
	for k := range blocks {
		if k+1 < len(blocks) {
			blocks[k].end = blocks[k+1].start
		} else {
			blocks[k].end = len(lines)
		}
	}
	return blocks
}

// TrimToCapacity enforces SPEC A7. When doc has more than maxLines lines (as CountLines
// counts them), it drops whole blocks, oldest first, until at most targetLines remain,
// and returns the rest and how many blocks it dropped; otherwise it returns doc and 0.
//
// A block is an entry ("### [" header through its "---") or a long-term section
// ("## YYYY-MM-DD"), together with whatever follows it up to the next block, such as
// the blank line after an entry or a note someone typed under it. A block's age is its
// header's time (a section's is midnight UTC of its date, or the time of the block
// before it when that is later on the same day); equal ages go by position,
// earlier is older; an entry whose header date cannot be read counts as oldest. Text
// before the first block (a title, a human preamble) is never dropped, so when it alone
// exceeds targetLines every block is dropped and the preamble is returned as it is.
//
// targetLines is clamped to [0, maxLines]. Kept text is byte for byte the original.
func TrimToCapacity(doc string, maxLines, targetLines int) (trimmed string, dropped int) {
	maxLines = max(maxLines, 0)
	targetLines = min(max(targetLines, 0), maxLines)
	lines := splitLines(doc)
	if len(lines) <= maxLines {
		return doc, 0
	}
	blocks := findBlocks(lines)
	byAge := make([]int, len(blocks))
	for k := range byAge {
		byAge[k] = k
	}
	sort.SliceStable(byAge, func(a, b int) bool { return blocks[byAge[a]].when.Before(blocks[byAge[b]].when) })

	drop := make([]bool, len(blocks))
	remaining := len(lines)
	for _, k := range byAge {
		if remaining <= targetLines {
			break
		}
		drop[k] = true
		remaining -= blocks[k].end - blocks[k].start
		dropped++
	}
	if dropped == 0 {
		return doc, 0
	}
	var b strings.Builder
	b.WriteString(doc[:lines[blocks[0].start].start])
	for k, bl := range blocks {
		if !drop[k] {
			b.WriteString(doc[lines[bl.start].start:lines[bl.end-1].next])
		}
	}
	return b.String(), dropped
}
