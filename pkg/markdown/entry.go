// Package markdown is the human-readable memory format: entries in MEMORY.md and
// topic files, long-term appends, daily notes, chunking and keyword scoring.
package markdown

import "time"

// Category says what an entry is about; it decides which file the entry goes to (SPEC A4).
type Category string

// The categories an extractor may return (SPEC A3).
const (
	CategoryFilePattern   Category = "file_pattern"
	CategoryUserPref      Category = "user_pref"
	CategoryErrorSolution Category = "error_solution"
	CategoryGeneral       Category = "general"
)

// Entry is one memory entry (SPEC A6):
//
//	### [2025-01-15 14:30] file_pattern
//
//	Sales files: columns date, product, qty.
//
//	---
type Entry struct {
	Time     time.Time // minute precision, UTC
	Category Category
	Content  string // body, without surrounding blank lines
}
