// Package markdown is the human-readable memory format: entries in MEMORY.md and topic
// files, long-term appends, daily notes, the core head, capacity trimming, chunking
// and keyword scoring (SPEC A2, A6, A7, A9, A10, A11). It only turns text into values
// and back; reading and writing files is pkg/docstore's job.
//
// # Lines
//
// A line is the text up to and including a "\n", or the non-empty text after the last
// "\n": "" has no lines, "a" and "a\n" one, "a\n\n" two. "\r\n" ends a line like "\n"
// and the "\r" is never part of a line's text; a lone "\r" does not end a line.
// CountLines, Head and TrimToCapacity all count this way.
//
// # Entries (SPEC A6)
//
// FormatEntries writes entries one after another, separated by one blank line:
//
//	### [2025-01-15 14:30] file_pattern
//
//	Sales files: columns date, product, qty, unit_price, amount; about 5000 rows.
//
//	---
//
//	### [2025-01-16 09:05] user_pref
//
//	Charts: dark theme, bar charts preferred.
//
//	---
//
// The time is UTC at minute precision; the category is file_pattern, user_pref,
// error_solution or general. ParseEntries is the exact inverse for entries that pass
// Entry.Validate: content has no line that is "---" (trailing white space ignored), no
// heading line ("#" after at most three spaces) and no line ending in "\r";
// SanitizeContent makes any text such content.
//
// # Content cannot forge structure
//
// Every formatter (FormatEntry, FormatLongTerm, FormatDailyNote) writes its content
// through SanitizeContent: a "---" line becomes "***" and a heading line gets a
// backslash before its first "#" ("\### [2020-01-01 00:00] user_pref", "\## 2020-01-01",
// "\### 14:30"), which Markdown shows as the literal text. So text an agent appends, or
// an extractor or model returns, always parses back as the one entry, section or item
// it was written as, with the sanitized content, never as entries, sections or items of
// its own.
//
// The parser is lenient where people edit files: every line starting with "### [" begins
// an entry, which runs to the next line that is "---" (trailing white space allowed);
// the blank lines around the body are optional, CRLF line endings are accepted, the
// category is read case-insensitively. Malformed entries — a header whose date or shape
// is wrong, an unknown category, or no "---" before the next "### [" line or the end of
// the document — are skipped and each is reported as a ParseError with its header's
// line number. Everything outside entries (titles, human notes, "## YYYY-MM-DD"
// sections, stray "---" rules) is ignored.
//
// # Long-term appends and daily notes (SPEC A9)
//
// memory_append(slot=long_term) appends FormatLongTerm's block to MEMORY.md: an
// entry of category general, so MEMORY.md has one format, A6 entries, whether the
// extractor or an agent wrote it:
//
//	### [2025-01-15 14:30] general
//
//	The team's fiscal year starts in April.
//
//	---
//
// Files written before that hold long-term sections instead, "## YYYY-MM-DD", a
// blank line and the content up to the next heading. They are still read: the
// core head, chunks and capacity trimming treat a section as a block of its own,
// the way they treat an entry; ParseEntries, which lists entries, skips them as
// it skips any text outside entries, without an error.
//
// memory_append(slot=today) appends FormatDailyNote's item to the note named by
// DailyNoteName, e.g. "202501/20250115.md"; ParseDailyNote reads the items back:
//
//	### 14:30
//
//	Exported the Q3 report as PDF.
//
// Every formatted block ends with exactly one "\n". Append blocks with AppendBlock,
// which only ever extends the existing text and puts exactly one blank line between it
// and the new block, so a file written by appends reads like one written by
// FormatEntries. Dates and times are UTC throughout.
//
// # Core head and capacity (SPEC A2, A7)
//
// Head(doc, 200) is the part of MEMORY.md loaded into every context. TrimToCapacity(doc,
// 500, 400) drops the oldest whole entries and long-term sections when the file has
// grown past 500 lines, keeping any preamble before the first of them.
//
// # Chunks and search (SPEC A10)
//
// Chunks splits a document into retrievable pieces (an entry, a long-term section, a
// paragraph) and SearchChunks ranks them with BM25 from pkg/bm25, the same tokenizer
// and scorer the vector stores use for their sparse vectors.
package markdown
