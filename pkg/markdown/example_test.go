package markdown_test

import (
	"fmt"
	"time"

	"github.com/agentmem/agentmem/pkg/markdown"
)

func ExampleFormatEntries() {
	doc := markdown.FormatEntries([]markdown.Entry{
		{Time: time.Date(2025, 1, 15, 14, 30, 0, 0, time.UTC), Category: markdown.CategoryFilePattern, Content: "Sales files: columns date, product, qty."},
		{Time: time.Date(2025, 1, 16, 9, 5, 0, 0, time.UTC), Category: markdown.CategoryUserPref, Content: "Charts: dark theme."},
	})
	fmt.Print(doc)
	entries, errs := markdown.ParseEntries(doc)
	fmt.Println(len(entries), len(errs))
	// Output:
	// ### [2025-01-15 14:30] file_pattern
	//
	// Sales files: columns date, product, qty.
	//
	// ---
	//
	// ### [2025-01-16 09:05] user_pref
	//
	// Charts: dark theme.
	//
	// ---
	// 2 0
}

func ExampleAppendBlock() {
	day := time.Date(2025, 1, 15, 14, 30, 0, 0, time.UTC)
	doc := markdown.AppendBlock("# Memory\n", markdown.FormatLongTerm(day, "Fiscal year starts in April."))
	fmt.Print(doc)
	fmt.Println(markdown.DailyNoteName(day))
	fmt.Print(markdown.AppendBlock("", markdown.FormatDailyNote(day, "Exported the Q3 report.")))
	// Output:
	// # Memory
	//
	// ### [2025-01-15 14:30] general
	//
	// Fiscal year starts in April.
	//
	// ---
	// 202501/20250115.md
	// ### 14:30
	//
	// Exported the Q3 report.
}

func ExampleSearchChunks() {
	doc := "# Memory\n\nThe user likes dark charts.\n\n" + markdown.FormatEntry(markdown.Entry{
		Time: time.Date(2025, 1, 15, 14, 30, 0, 0, time.UTC), Category: markdown.CategoryFilePattern,
		Content: "Sales files: columns date, product, qty.",
	})
	for _, c := range markdown.SearchChunks(doc, "which columns do sales files have?", 3) {
		fmt.Printf("lines %d-%d: %s\n", c.StartLine, c.EndLine, c.Heading)
	}
	// Output:
	// lines 5-7: [2025-01-15 14:30] file_pattern
}
